"""Differential tests of the ``math`` verifier against Math-Verify 0.9.0, run as its authors ship it:
``math_verify.verify(parse(gold), parse(completion))`` on the whole completion, default settings.

Each case of ``math_peer_cases.py`` (written for Seedbed) and each response of a seeded generator goes through
both, in both modes. Seedbed may differ only where :data:`INTENTIONAL_DIFFERENCES` says so (a 0 where
Math-Verify gives 1, with the listed reason, in a listed mode); it never gives 1 where Math-Verify gives 0.
"""
import random
from pathlib import Path

import pytest
from math_verify import parse, verify

from tests.verifiers.math_peer_cases import CASES, FLAT
from training.verifiers import VerifierError, get_verifier, score_batch
from training.verifiers.math_answer import INTENTIONAL_DIFFERENCES, MathVerifier, intentional_difference

pytestmark = pytest.mark.peer
MODES = ("strict", "lenient")


def reference(gold: str, completion: str) -> float:
    """Math-Verify's verdict, default settings (its own 5 s timeouts, on this test's main thread)."""
    return float(verify(parse(gold), parse(completion)))


@pytest.fixture(scope="module")
def verifiers():
    return {mode: get_verifier("math", mode=mode, processes=2, cache_size=0) for mode in MODES}


def disagreements(verifier, mode: str, items: list[tuple[str, str, float]]) -> tuple[list, list]:
    """(unlisted, listed): the items where Seedbed's verdict differs from the reference ``ref``, split by
    whether :data:`INTENTIONAL_DIFFERENCES` covers them."""
    out = score_batch(verifier, [c for _, c, _ in items], [{"answer": g} for g, _, _ in items])
    unlisted, listed = [], []
    for (gold, completion, ref), result in zip(items, out):
        assert not isinstance(result, VerifierError), (gold, completion, result)
        if result.score == ref:
            continue
        allowed = ref == 1.0 and result.score == 0.0 and intentional_difference(result.details, mode)
        (listed if allowed else unlisted).append((gold, completion, ref, result.score, result.details))
    return unlisted, listed


def test_the_table_covers_every_category_and_the_reference_gives_its_verdicts():
    assert {"boxes", "markers", "dollar", "identical", "thousands", "sets", "intervals", "fractions", "percent",
            "units", "latex_plain", "negative", "decimal_comma", "prose", "hedged"} <= set(CASES)
    assert len(FLAT) >= 95
    wrong = [(g, c, e) for _, g, c, e in FLAT if reference(g, c) != e]
    assert not wrong, wrong


@pytest.mark.parametrize("mode", MODES)
def test_table_agrees_with_math_verify_up_to_the_listed_differences(verifiers, mode):
    items = [(g, c, float(e)) for _, g, c, e in FLAT]
    unlisted, listed = disagreements(verifiers[mode], mode, items)
    assert not unlisted, unlisted
    if mode == "lenient":  # Math-Verify's own extraction: no difference at all on the table
        assert not listed, listed
    else:  # strict: exactly the prose-only answers, the hedged ones and the lists, ranges and bounds, on purpose
        assert {d[4]["reason"] for d in listed} == {"no final answer found", "hedged answer",
                                                    "answer is a list, range or bound"}
        prose = [(g, c) for grp, g, c, e in FLAT if grp == "prose" and e == 1]
        assert set(prose) <= {(g, c) for g, c, *_ in listed}


@pytest.mark.parametrize("group", ["boxes", "markers", "dollar", "identical", "thousands"])
def test_the_five_bugs_of_issue_21_are_fixed_in_strict_mode(verifiers, group):
    """Each case of the five bug groups gets its right verdict in the default (strict) mode."""
    cases = CASES[group]
    out = score_batch(verifiers["strict"], [c for _, c, _ in cases], [{"answer": g} for g, _, _ in cases])
    assert [r.score for r in out] == [float(e) for _, _, e in cases], [r.details for r in out]


# ---- a property test: generated responses -----------------------------------------------------------------

WORDS = ["First", "note", "that", "we", "compute", "the", "sum", "then", "divide", "Hence", "so", "Next",
         "Consider", "each", "term", "carefully", "Thus", "clearly", "Let", "us", "check", "again"]


def _value(rng: random.Random):
    """A random exact value and how to write it (several notations), or a wrong value nearby."""
    kind = rng.choice(["int", "int", "big", "neg", "frac", "dec"])
    if kind == "int":
        n = rng.randint(0, 999)
        return str(n), [str(n)], [str(n + rng.choice([1, -1, 10]))]
    if kind == "big":
        n = rng.randint(1000, 9_999_999)
        return str(n), [str(n), f"{n:,}", f"{n:,}".replace(",", "{,}")], [f"{n + 1:,}", str(n * 10)]
    if kind == "neg":
        n = rng.randint(1, 500)
        return f"-{n}", [f"-{n}"], [str(n), f"-{n + 1}"]
    if kind == "frac":
        a, b = rng.randint(1, 20), rng.choice([2, 3, 4, 5, 7, 8])
        if a % b == 0:
            a += 1
        return (rf"$\frac{{{a}}}{{{b}}}$", [rf"\frac{{{a}}}{{{b}}}", rf"\dfrac{{{a}}}{{{b}}}", f"{a}/{b}"],
                [rf"\frac{{{a + 1}}}{{{b}}}", rf"\frac{{{b}}}{{{a}}}"])
    tenths = rng.randint(1, 999)
    value = f"{tenths / 10:g}"
    return value, [value], [f"{(tenths + 1) / 10:g}"]


def _wrap(answer: str, rng: random.Random) -> str:
    """The answer in one of the ways a model gives it: boxed, after a marker (any case, markdown), in prose."""
    marker = rng.choice(["Answer", "ANSWER", "answer", "Final Answer", "Final answer", "FINAL ANSWER"])
    bold = rng.random() < 0.3
    styles = [
        rf"\boxed{{{answer}}}",
        rf"$\boxed{{{answer}}}$",
        rf"The result is $\boxed{{{answer}}}$",
        f"{'**' if bold else ''}{marker}:{'**' if bold else ''} ${answer}$",
        f"{'**' if bold else ''}{marker}:{'**' if bold else ''} {answer}" if "\\" not in answer else
        f"{marker}: ${answer}$",
        f"Final Answer: The final answer is ${answer}$. I hope it is correct.",
        f"so the {marker.lower()} is ${answer}$",
        f"{marker}:\n$$\n{answer}\n$$",
        f"{marker}: \\({answer}\\)",
        f"{marker}:\n\\[ {answer} \\]",
        rf"Both ways agree: \boxed{{{answer}}}. {marker}: ${answer}$",
        f"Putting it together gives ${answer}$",  # prose: no box, no marker
    ]
    return rng.choice(styles)


def _response(rng: random.Random, answer_text: str) -> str:
    """Some reasoning (random words, markdown, case; no digits, so the final answer is the only number)."""
    lines = []
    for _ in range(rng.randint(0, 4)):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9)))
        words = rng.choice([str.lower, str.upper, str.capitalize, lambda w: w])(words)
        lines.append(rng.choice(["", "# ", "- ", "**", "> ", "1. "]) + words + rng.choice([".", ":", "!", ",", ""]))
    ending = rng.choice(["", ".", "!", " ", "\n", "\n\nI hope it is correct.", "\n\nDone"])
    return "\n".join(lines + [_wrap(answer_text, rng) + ending])


def generated(n: int, seed: int) -> list[tuple[str, str]]:
    """n (gold, completion) pairs: right answers in several notations and wrong ones, in random responses."""
    rng = random.Random(seed)
    items = []
    for _ in range(n):
        gold, right, wrong = _value(rng)
        answer = rng.choice(right if rng.random() < 0.6 else wrong)
        items.append((gold, _response(rng, answer)))
    return items


@pytest.mark.parametrize("mode", MODES)
def test_generated_responses_agree_with_math_verify(verifiers, mode):
    items = [(g, c, reference(g, c)) for g, c in generated(300, seed=21)]
    assert 0.3 < sum(ref for *_, ref in items) / len(items) < 0.8  # both verdicts well represented
    unlisted, listed = disagreements(verifiers[mode], mode, items)
    assert not unlisted, unlisted[:5]
    if mode == "lenient":
        assert not listed, listed[:5]
    else:  # the prose style, and only it, scores 0 on purpose
        assert listed and all("Putting it together" in completion for _, completion, *_ in listed)


# ---- the list is documented ---------------------------------------------------------------------------------

def test_intentional_differences_are_in_the_docstring_and_the_readme():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    for difference in INTENTIONAL_DIFFERENCES:
        assert difference.why in MathVerifier.__doc__
        assert f"`{difference.reason}`" in readme and difference.why in readme, difference.reason
