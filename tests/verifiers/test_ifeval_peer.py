"""Differential tests: Seedbed's ``ifeval`` verifier against IFEval's own checkers (lm-eval 0.4.13, strict mode,
the ``peer`` extra that ./seedbed setup installs). Every disagreement must be one of the verifier's listed
``INTENTIONAL_DIFFERENCES``, in its direction; anything else fails, with the cases to look at."""
import random
import re
from pathlib import Path

import pytest

from tests.verifiers.ifeval_cases import CASES, LANGUAGE_SAMPLES
from tests.verifiers.ifeval_reference import TO_SEEDBED, reference_verdict, registry
from training.verifiers import ifeval as ifeval_module
from training.verifiers.ifeval import INTENTIONAL_DIFFERENCES, differences_markdown, ifeval

pytestmark = pytest.mark.peer


def seedbed_verdict(instruction_id: str, kwargs: dict, response: str) -> tuple[bool, list[dict]]:
    constraints = TO_SEEDBED[instruction_id](kwargs)
    return ifeval(response, {"constraints": constraints}).score == 1.0, constraints


def explanation(constraints: list[dict], response: str, seedbed_ok: bool) -> str | None:
    """The intentional difference that covers this disagreement (its scope and direction), or None."""
    for c in constraints:
        for d in INTENTIONAL_DIFFERENCES:
            if c["type"] in d.types and d.seedbed_accepts in (None, seedbed_ok) and d.applies(c, response):
                return d.name
    return None


def compare(cases) -> tuple[int, list, list]:
    """(agreements, explained disagreements as (difference, case), unexplained disagreements)."""
    agree, explained, unexplained = 0, [], []
    for instruction_id, kwargs, response in cases:
        ref = reference_verdict(instruction_id, kwargs, response)
        ours, constraints = seedbed_verdict(instruction_id, kwargs, response)
        if ours == ref:
            agree += 1
            continue
        name = explanation(constraints, response, ours)
        case = (instruction_id, kwargs, response, f"seedbed={ours} ifeval={ref}")
        (explained.append((name, case)) if name else unexplained.append(case))
    return agree, explained, unexplained


def test_the_reference_is_ifevals_registry_with_every_instruction_mapped():
    ids = set(registry().INSTRUCTION_DICT)
    assert len(ids) == 25 and ids == set(TO_SEEDBED)
    assert {case[0] for case in CASES} == ids  # the table covers every instruction


def test_table_agrees_with_ifeval_but_for_the_listed_differences():
    assert len(CASES) >= 250
    agree, explained, unexplained = compare(CASES)
    assert not unexplained, "disagreements with IFEval that no intentional difference covers:\n" + "\n".join(
        map(repr, unexplained))
    assert agree / len(CASES) >= 0.9, (agree, len(CASES))
    # the list is not stale: each difference explains at least one case of the table
    assert {name for name, _ in explained} == {d.name for d in INTENTIONAL_DIFFERENCES}


def test_the_fixed_bugs_of_issue_21_agree_with_ifeval():
    """The issue's cases where Seedbed was wrong: now the same verdict as IFEval."""
    cases = [
        ("detectable_content:postscript", {"postscript_marker": "P.S."}, "body.\n\np.s. see you."),
        ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Body.\n\n**P.S.** See you."),
        ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Body, that is all. P.S. Bye."),
        ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Body.\n\nP. S. Bye."),
        ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "**bold** and *one*"),
        ("length_constraints:number_sentences", {"num_sentences": 2, "relation": "less than"}, "Dr. Who came."),
        ("length_constraints:number_sentences", {"num_sentences": 2, "relation": "less than"},
         "We met at 5 p.m. on Friday."),
        ("length_constraints:number_sentences", {"num_sentences": 3, "relation": "at least"},
         'He said "hi." She said "bye." They left.'),
        ("length_constraints:number_sentences", {"num_sentences": 2, "relation": "less than"},
         "Wait... we should go now."),
        ("detectable_format:multiple_sections", {"section_spliter": "SECTION", "num_sections": 2},
         "## SECTION 1\nfoo\n## SECTION 2\nbar"),
        ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2},
         "**Section 1**\nfoo\n**Section 2**\nbar"),
        ("change_case:capital_word_frequency", {"capital_frequency": 3, "capital_relation": "at least"},
         "NASA's budget grew in the U.S. and the UK."),
        ("detectable_format:title", {}, "<< >>\nText."),
        ("detectable_format:title", {}, "<<A < B>>\nText."),
        ("keywords:existence", {"keywords": ["U.S."]}, "She moved to the U.S. last year."),
        ("startend:end_checker", {"end_phrase": "Any other questions?"}, '"Done. Any other questions?"'),
        ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "One.\n\nStill one.\n***\nTwo."),
    ] + [("language:response_language", {"language": code}, text) for code, text in LANGUAGE_SAMPLES.items()]
    for instruction_id, kwargs, response in cases:
        ours, _ = seedbed_verdict(instruction_id, kwargs, response)
        assert ours == reference_verdict(instruction_id, kwargs, response), (instruction_id, kwargs, response)


def test_markdown_emphasis_is_not_part_of_a_word_as_in_ifeval():
    """``_`` is a word character to a regular expression, but emphasis around a word is markdown: the keyword
    and the postscript are found where IFEval finds them (they were missed)."""
    cases = [
        ("keywords:existence", {"keywords": ["climate"]}, "We discuss _climate_ change."),
        ("keywords:existence", {"keywords": ["climate"]}, "We discuss __climate__ change."),
        ("keywords:frequency", {"keyword": "climate", "frequency": 2, "relation": "at least"},
         "_climate_ first, then __climate__ again."),
        ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Body.\n\n_P.S._ Bye."),
        ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Body.\n\n__P.S.__ Bye."),
    ]
    for instruction_id, kwargs, response in cases:
        ours, _ = seedbed_verdict(instruction_id, kwargs, response)
        assert ours is True and reference_verdict(instruction_id, kwargs, response) is True, response


def test_a_disguised_forbidden_word_is_caught_where_ifeval_misses_it_a_listed_difference():
    for response in ("This is _bad_ news.", "This is __bad__ news.", "This is b\u0430d news.",
                     "This is b\u200bad news.", "This is ｂａｄ news.", "This is b\u00adad news."):
        kwargs = {"forbidden_words": ["bad"]}
        ours, constraints = seedbed_verdict("keywords:forbidden_words", kwargs, response)
        assert ours is False and reference_verdict("keywords:forbidden_words", kwargs, response) is True, response
        assert explanation(constraints, response, ours) == "disguised-forbidden-words", response
    ours, _ = seedbed_verdict("keywords:forbidden_words", {"forbidden_words": ["bad"]}, "snake_bad_case code")
    assert ours is True  # underscores inside an identifier are part of it: no word "bad" there


# --- property test: generated responses ---------------------------------------------------------------------

_WORDS = ("river town mill summer light children dawn bank dog cat category play NASA U.S. report data model "
          "answer section note plan day garden code test value result idea").split()


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(3, 12))]
    case = rng.random()
    text = " ".join(words)
    if case < 0.15:
        text = text.upper()
    elif case < 0.3:
        text = text.lower()
    else:
        text = text[:1].upper() + text[1:]
    if rng.random() < 0.15:  # the cases sentence splitters differ on: abbreviations, initials, numbers, ellipses
        words.insert(rng.randrange(len(words)), rng.choice(["Dr. Lee", "e.g.", "at 5 p.m.", "J. Smith", "3.5",
                                                            "etc.", "U.S.", "wait...", "(see below.)"]))
    if rng.random() < 0.2:
        i = rng.randrange(len(words))
        text = text.replace(words[i], rng.choice(["*" + words[i] + "*", "**" + words[i] + "**", f"[{words[i]}]",
                                                  words[i] + ",", f'"{words[i]}"']), 1)
    return text + rng.choice([".", ".", ".", "!", "?", "", "...", ",", ";", ".\"", " :)"])


def _block(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.35:
        return " ".join(_sentence(rng) for _ in range(rng.randint(1, 4)))
    if kind < 0.5:
        return "\n".join(rng.choice(["* ", "- ", "  * ", "1. "]) + _sentence(rng) for _ in range(rng.randint(1, 4)))
    if kind < 0.6:
        return rng.choice(["# ", "## ", "**", ""]) + rng.choice(["SECTION", "Section", "PART"]) + \
            f" {rng.randint(1, 4)}" + rng.choice(["", "**", ":"])
    if kind < 0.7:
        return rng.choice(list(LANGUAGE_SAMPLES.values()))
    if kind < 0.78:
        return rng.choice(["P.S.", "p.s.", "**P.S.**", "P. S.", "P.P.S", "PS"]) + " " + _sentence(rng)
    if kind < 0.84:
        return f"<<{_sentence(rng)}>>"
    if kind < 0.9:
        return rng.choice(CONSTRAINED) + rng.choice(["", " " + _sentence(rng)])
    return rng.choice(['{"a": 1}', '```json\n{"k": [1, 2]}\n```', "***", "******", "---", '"quoted."'])


CONSTRAINED = ("My answer is yes.", "My answer is no.", "My answer is maybe.")


def _response(rng: random.Random) -> str:
    blocks = [_block(rng) for _ in range(rng.randint(1, 5))]
    text = ""
    for block in blocks:
        text += (rng.choice(["\n\n", "\n", "\n***\n", "\n\n\n", " "]) if text else "") + block
    return rng.choice(["", "", '"']) + text + rng.choice(["", "", "\n", '"', " Any other questions?"])


def _kwargs(rng: random.Random, instruction_id: str, response: str) -> dict:
    n = rng.randint(1, 6)
    relation = rng.choice(["less than", "at least"])
    words = response.split() or ["x"]
    return {
        "keywords:existence": lambda: {"keywords": rng.sample(_WORDS, 2)},
        "keywords:frequency": lambda: {"keyword": rng.choice(_WORDS), "frequency": n, "relation": relation},
        "keywords:forbidden_words": lambda: {"forbidden_words": rng.sample(_WORDS, 2)},
        "keywords:letter_frequency": lambda: {"letter": rng.choice("aeiostz"), "let_frequency": n * 3,
                                              "let_relation": relation},
        "language:response_language": lambda: {"language": rng.choice(list(LANGUAGE_SAMPLES))},
        "length_constraints:number_sentences": lambda: {"num_sentences": n, "relation": relation},
        "length_constraints:number_paragraphs": lambda: {"num_paragraphs": rng.randint(1, 4)},
        "length_constraints:number_words": lambda: {"num_words": n * 8, "relation": relation},
        "length_constraints:nth_paragraph_first_word": lambda: {
            "num_paragraphs": rng.randint(1, 4), "nth_paragraph": 1,
            "first_word": re.sub(r"[^\w-]", "", words[0]).lower() or "x"},
        "detectable_content:number_placeholders": lambda: {"num_placeholders": rng.randint(1, 2)},
        "detectable_content:postscript": lambda: {"postscript_marker": rng.choice(["P.S.", "P.P.S"])},
        "detectable_format:number_bullet_lists": lambda: {"num_bullets": rng.randint(1, 4)},
        "detectable_format:number_highlighted_sections": lambda: {"num_highlights": rng.randint(1, 3)},
        "detectable_format:multiple_sections": lambda: {"section_spliter": rng.choice(["SECTION", "Section", "PART"]),
                                                        "num_sections": rng.randint(1, 3)},
        "combination:repeat_prompt": lambda: {"prompt_to_repeat": " ".join(words[:rng.randint(1, 4)])},
        "startend:end_checker": lambda: {"end_phrase": rng.choice(["Any other questions?", words[-1]])},
        "change_case:capital_word_frequency": lambda: {"capital_frequency": n, "capital_relation": relation},
    }.get(instruction_id, dict)()


def test_generated_responses_agree_with_ifeval_but_for_the_listed_differences():
    rng = random.Random(21)
    cases = []
    for _ in range(600):
        response = _response(rng)
        instruction_id = rng.choice(sorted(TO_SEEDBED))
        cases.append((instruction_id, _kwargs(rng, instruction_id, response), response))
    agree, explained, unexplained = compare(cases)
    assert not unexplained, "disagreements with IFEval that no intentional difference covers:\n" + "\n".join(
        map(repr, unexplained[:20]))
    assert agree / len(cases) >= 0.85, (agree, len(cases))


def test_the_differences_are_in_the_docstring_and_the_readme():
    doc = ifeval.__doc__
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert differences_markdown() in readme
    for d in INTENTIONAL_DIFFERENCES:
        assert d.reason in doc and d.name in doc
    assert ifeval_module.__doc__ and "INTENTIONAL_DIFFERENCES" in ifeval_module.__doc__
