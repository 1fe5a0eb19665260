"""ifeval: every constraint type passing and failing; scoring and bad constraints."""
import pytest

from training.verifiers import VerifierError, get_verifier
from training.verifiers.ifeval import CHECKS

# type -> (constraint params, a passing response, a failing response)
CASES = {
    "lowercase": ({}, "all quiet here.", "Not quiet."),
    "uppercase": ({}, "LOUD AND CLEAR!", "Loud and clear"),
    "word_count": ({"min": 3, "max": 5}, "one two three four", "one two"),
    "sentence_count": ({"exact": 2}, "First one. Second one!", "Only one sentence here."),
    "paragraph_count": ({"exact": 2}, "Para one.\n\nPara two.", "Just one paragraph."),
    "char_count": ({"max": 10}, "short", "this is far too long"),
    "keywords_include": ({"keywords": ["apple", "pear"]}, "An apple and a pear.", "An apple only."),
    "keywords_exclude": ({"keywords": ["banana"]}, "No fruit named.", "A Banana!"),
    "keyword_frequency": ({"keyword": "go", "min": 2}, "go go gadget", "go gadget, gone"),
    "letter_frequency": ({"letter": "z", "min": 2}, "Zig zag", "zig"),
    "capital_words": ({"min": 2}, "USE CAPS here", "Use Caps here"),
    "json_format": ({}, '```json\n{"a": [1, 2]}\n```', "{'a': 1}"),
    "bullet_count": ({"exact": 2}, "* one\n* two", "* one\n**bold**\n- two\n- three"),
    "title": ({}, "<<Ode to Joy>>\nText", "<Ode to Joy>"),
    "starts_with": ({"phrase": "Dear Sir"}, "dear sir, hello", "Hello, dear sir"),
    "ends_with": ({"phrase": "Any other questions?"}, "Done. Any other questions?", "Any other questions? Done."),
    "no_commas": ({}, "No commas at all.", "One, two."),
    "quotation": ({}, '"Quoted reply."', 'Quoted "reply".'),
    "placeholders": ({"min": 2}, "Send to [name] at [address].", "Send to [name]."),
    "highlighted_sections": ({"min": 2}, "*one* and *two*", "**bold** and *one*"),
    "sections": ({"exact": 2, "marker": "SECTION"}, "SECTION 1\nfoo\nSECTION 2\nbar", "SECTION 1\nfoo"),
    "postscript": ({"marker": "P.S."}, "Body.\nP.S. Bye", "Body. Bye"),
    "two_responses": ({}, "First answer.\n******\nSecond answer.", "Same.\n******\nSame."),
    "repeat_prompt": ({"prompt": "Write a haiku."}, "Write a haiku. Leaves fall...", "Leaves fall..."),
    "language": ({"language": "fr"}, "Le chat est sur le tapis et il dort.", "The cat is on the mat."),
}


def test_at_least_20_types_all_covered():
    assert len(CHECKS) >= 20
    assert set(CASES) == set(CHECKS)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_each_type_passes_and_fails(kind):
    v = get_verifier("ifeval")
    params, good, bad = CASES[kind]
    ok = v(good, {"constraints": [{"type": kind, **params}]})
    assert ok.score == 1.0, ok.details
    ko = v(bad, {"constraints": [{"type": kind, **params}]})
    assert ko.score == 0.0, ko.details
    assert ko.details["constraints"][0]["why"]


def test_score_is_fraction_met():
    v = get_verifier("ifeval")
    r = v("hello, world", {"constraints": [{"type": "lowercase"}, {"type": "no_commas"},
                                            {"type": "word_count", "min": 2}, {"type": "title"}]})
    assert r.score == 0.5 and r.details["met"] == 2 and r.details["total"] == 4


def test_languages_by_script_and_stopwords():
    v = get_verifier("ifeval")
    for lang, text in [("ru", "Привет, как дела?"), ("zh", "你好，世界"), ("ja", "こんにちは世界"),
                       ("de", "Der Hund und die Katze sind nicht im Haus."), ("en", "It is the end of the day.")]:
        assert v(text, {"constraints": [{"type": "language", "language": lang}]}).score == 1.0, lang


def test_bad_constraints_are_verifier_errors_naming_the_problem():
    v = get_verifier("ifeval")
    with pytest.raises(VerifierError, match="unknown type 'shout'"):
        v("x", {"constraints": [{"type": "shout"}]})
    with pytest.raises(VerifierError, match="needs parameter 'keywords'"):
        v("x", {"constraints": [{"type": "keywords_include"}]})
    with pytest.raises(VerifierError, match="'min', 'max' or 'exact'"):
        v("x", {"constraints": [{"type": "word_count"}]})
    with pytest.raises(VerifierError, match="'min' must be an integer"):
        v("x", {"constraints": [{"type": "word_count", "min": "3"}]})
    with pytest.raises(VerifierError, match="non-empty list"):
        v("x", {"constraints": []})
