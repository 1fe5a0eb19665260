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
    "highlighted_sections": ({"min": 2}, "*one* and **two**", "*one* and 2 * 3 * 4"),
    "sections": ({"exact": 2, "marker": "SECTION"}, "SECTION 1\nfoo\nSECTION 2\nbar", "SECTION 1\nfoo"),
    "postscript": ({"marker": "P.S."}, "Body.\nP.S. Bye", "Body. Bye"),
    "two_responses": ({}, "First answer.\n******\nSecond answer.", "Same.\n******\nSame."),
    "repeat_prompt": ({"prompt": "Write a haiku."}, "Write a haiku. Leaves fall...", "Leaves fall..."),
    "language": ({"language": "fr"}, "Le chat est sur le tapis et il dort.", "The cat is on the mat."),
    "constrained_response": ({}, "My answer is maybe.", "Maybe, maybe not."),
    "nth_paragraph_first_word": ({"paragraphs": 2, "nth": 2, "first_word": "Then"}, "First.\n\nthen, the end.",
                                 "First.\n\nNow the end."),
}


def test_all_27_types_covered():
    assert len(CHECKS) == 27
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


def test_languages_by_langdetect_seeded():
    v = get_verifier("ifeval")
    for lang, text in [("ru", "Привет, как у тебя дела сегодня?"), ("zh", "今天天气很好，我们去公园散步吧。"),
                       ("ja", "こんにちは、今日はいい天気ですね。"), ("uk", "Привіт, як у тебе справи сьогодні?"),
                       ("de", "Der Hund und die Katze sind nicht im Haus."), ("en", "It is the end of the day."),
                       ("fi", "Hyvää huomenta, miten voit tänään?"), ("pl", "Dzień dobry, jak się dzisiaj masz?"),
                       ("sw", "Habari za asubuhi, unaendeleaje leo rafiki yangu?")]:
        assert v(text, {"constraints": [{"type": "language", "language": lang}]}).score == 1.0, lang
    # seeded: the same verdict every time, and a text with no letters has no language
    from training.verifiers.ifeval import detect_language
    assert len({detect_language.__wrapped__("Ciao bella, come stai") for _ in range(5)}) == 1  # uncached
    r = v("12345 !!!", {"constraints": [{"type": "language", "language": "en"}]})
    assert r.score == 0.0 and "unknown" in r.details["constraints"][0]["why"]


@pytest.mark.parametrize("kind, params, text, ok", [
    # bugs users reported, each with the verdict a user of IFEval expects
    ("postscript", {}, "body.\n\np.s. bye", True),
    ("postscript", {}, "Body.\n\n**P.S.** Bye", True),
    ("postscript", {}, "Body, that is all. P.S. Bye", True),
    ("postscript", {}, "Body.\nP. S. Bye", True),
    ("postscript", {"marker": "P.P.S"}, "Body.\nP.S. one\nP.P.S two", True),
    ("postscript", {}, "Body without one.", False),
    ("highlighted_sections", {"exact": 2}, "**bold** and *italic*", True),
    ("highlighted_sections", {"min": 1}, "2 * 3 * 4", False),
    ("sentence_count", {"exact": 1}, "Dr. Smith came at 5 p.m. on Friday.", True),
    ("sentence_count", {"exact": 3}, 'He said "hi." She said "bye." They left.', True),
    ("sentence_count", {"exact": 1}, "Wait... we should go now.", True),
    ("sentence_count", {"exact": 2}, "It rose 3.5 percent in the U.S. economy. Then it fell.", True),
    ("sections", {"marker": "SECTION", "exact": 2}, "## SECTION 1\na\n## SECTION 2\nb", True),
    ("sections", {"marker": "Section", "exact": 2}, "**Section 1**\na\n**Section 2**\nb", True),
    ("sections", {"marker": "SECTION", "exact": 2}, "SECTION 1\na, unlike SECTION 2 says", False),
    ("capital_words", {"exact": 3}, "NASA's rocket flew from the U.S. and I watched.", True),
    ("title", {}, "<< >>\ntext", False),
    ("title", {}, "<<A < B>>\ntext", True),
    ("keywords_include", {"keywords": ["  river "]}, "The river is wide.", True),
    ("keywords_include", {"keywords": ["U.S."]}, "She moved to the U.S. last year.", True),
    ("keywords_include", {"keywords": ["cat"]}, "A category.", False),
    ("keywords_exclude", {"keywords": ["U.S."]}, "She moved to the U.S. last year.", False),
    ("keyword_frequency", {"keyword": "C++", "exact": 2}, "C++ and c++ but not C.", True),
    ("ends_with", {"phrase": "Any other questions?"}, '"Done. Any other questions?"', True),
    ("lowercase", {}, "p.s. all lowercase", True),
    ("word_count", {"exact": 2}, "नमस्ते दुनिया", True),  # vowel signs do not split words
    ("paragraph_count", {"exact": 2, "separator": "***"}, "One.\n\nStill one.\n***\nTwo.", True),
    ("paragraph_count", {"exact": 3}, "One.\n\nTwo.\n***\nThree.", True),
    ("paragraph_count", {"exact": 2, "separator": "***"}, "One.\n***\n***\nTwo.", False),
    ("two_responses", {}, "One.\n******\nTwo.\n******", True),
    ("repeat_prompt", {"prompt": "Write a haiku."}, "write a haiku. leaves fall", True),
    ("constrained_response", {}, "After thinking: My answer is no.", True),
    ("constrained_response", {}, "My answer is yes. My answer is no.", False),
    ("nth_paragraph_first_word", {"paragraphs": 2, "nth": 2, "first_word": "summary"}, "Intro.\n\n**Summary**: x",
     True),
    ("nth_paragraph_first_word", {"paragraphs": 3, "nth": 2, "first_word": "summary"}, "Intro.\n\nSummary x",
     False),
])
def test_issue_21_verdicts(kind, params, text, ok):
    r = get_verifier("ifeval")(text, {"constraints": [{"type": kind, **params}]})
    assert r.score == float(ok), r.details


def test_a_blank_response_meets_nothing():
    r = get_verifier("ifeval")("  \n", {"constraints": [{"type": "no_commas"}, {"type": "keywords_exclude",
                                                                                "keywords": ["x"]}]})
    assert r.score == 0.0 and r.details["constraints"][0]["why"] == "blank response"


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
    with pytest.raises(VerifierError, match="'max' must be between 0 and 1000000"):
        v("x", {"constraints": [{"type": "word_count", "max": 10**9}]})
    with pytest.raises(VerifierError, match="'separator' must be one of"):
        v("x", {"constraints": [{"type": "paragraph_count", "exact": 1, "separator": "---"}]})
    with pytest.raises(VerifierError, match="'language' must be one of"):
        v("x", {"constraints": [{"type": "language", "language": "klingon"}]})
    with pytest.raises(VerifierError, match="'keywords' must be a non-empty list of non-blank strings"):
        v("x", {"constraints": [{"type": "keywords_include", "keywords": ["  "]}]})
    with pytest.raises(VerifierError, match="needs parameter 'nth'"):
        v("x", {"constraints": [{"type": "nth_paragraph_first_word", "paragraphs": 2, "first_word": "a"}]})
    with pytest.raises(VerifierError, match="'nth' must be between 1 and 'paragraphs'"):
        v("x", {"constraints": [{"type": "nth_paragraph_first_word", "paragraphs": 2, "nth": 3, "first_word": "a"}]})
    with pytest.raises(VerifierError, match="'first_word' must be one word"):
        v("x", {"constraints": [{"type": "nth_paragraph_first_word", "paragraphs": 1, "nth": 1,
                                 "first_word": "two words"}]})
    with pytest.raises(VerifierError, match="'first_word' must be a string"):
        v("x", {"constraints": [{"type": "nth_paragraph_first_word", "paragraphs": 1, "nth": 1, "first_word": 3}]})


@pytest.mark.parametrize("constraint, response, ok", [
    ({"type": "keywords_include", "keywords": ["climate"]}, "We discuss _climate_ change.", True),
    ({"type": "keywords_include", "keywords": ["climate"]}, "We discuss __climate__ change.", True),
    ({"type": "keyword_frequency", "keyword": "climate", "exact": 2}, "_climate_ and __climate__", True),
    ({"type": "postscript", "marker": "P.S."}, "Body.\n\n_P.S._ Bye.", True),
    ({"type": "keywords_exclude", "keywords": ["bad"]}, "This is _bad_ news.", False),
    ({"type": "keywords_exclude", "keywords": ["bad"]}, "This is __bad__ news.", False),
    ({"type": "keywords_exclude", "keywords": ["bad"]}, "This is b\u0430d news.", False),  # Cyrillic a
    ({"type": "keywords_exclude", "keywords": ["bad"]}, "This is b\u200bad news.", False),  # zero-width space
    ({"type": "keywords_exclude", "keywords": ["bad"]}, "This is ｂａｄ news.", False),  # full-width
    ({"type": "keywords_exclude", "keywords": ["нет"]}, "Он сказал н\u200bет.", False),  # a Cyrillic keyword too
    ({"type": "keywords_exclude", "keywords": ["bad"]}, "snake_bad_case is an identifier", True),
    # an included keyword must be written plainly: a look-alike letter does not include it
    ({"type": "keywords_include", "keywords": ["climate"]}, "We discuss cl\u0456mate change.", False),
])
def test_markdown_and_disguises_around_a_word(constraint, response, ok):
    result = get_verifier("ifeval")(response, {"constraints": [constraint]})
    assert result.score == float(ok), result.details
