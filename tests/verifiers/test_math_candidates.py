"""The ``math`` verifier, mode strict, on answers read as written: abbreviations after a marker, boxes in separate
math spans across a clause, a rejected root, and answers that give several values (a list, a range, a bound, a
second candidate in any phrasing). Each case carries Math-Verify 0.9.0's verdict on the whole completion (checked
here) and Seedbed's; a Seedbed 0 where Math-Verify gives 1 carries one of the listed intentional differences.
"""
import pytest
from math_verify import parse, verify

from training.verifiers import get_verifier, score_batch
from training.verifiers.answers import answer_line, final_boxed_group
from training.verifiers.math_answer import MathVerifier, intentional_difference

pytestmark = pytest.mark.peer
B = r"\boxed"

# (gold, completion, Math-Verify's verdict, strict's verdict, strict's reason)
CASES = [
    # an abbreviation does not end the answer after a marker
    ("6.28", "Answer: approx. 6.28", 1, 1, None),  # was read as "approx": 0
    ("3", "Answer: 3 (i.e. $4$ …)", 0, 0, "hedged answer"),  # was read as "3 (i.e": 1 where Math-Verify gives 0
    ("4", "Answer: 3 (i.e. $4$ …)", 1, 0, "hedged answer"),  # two values: listed
    ("5", "Answer: e.g. 5", 1, 1, None),  # was "e.g": 0
    ("5", "Answer: 5 vs. 6", 1, 0, "hedged answer"),  # was read as "5 vs": 1
    ("5", "Answer: ca. 5 apples", 1, 1, None),  # was "ca": 0
    ("5", "Answer: No. 5", 1, 1, None),  # was "No": 0
    ("5", "Answer: cf. 5", 1, 1, None),
    # boxes in separate math spans across a clause: the final, corrected one, as Math-Verify reads it
    ("64", rf"I initially thought ${B}{{32}}$, but each chip has two faces, so the total is ${B}{{64}}$.", 1, 1,
     None),  # was read as {32, 64}: 0
    ("32", rf"I initially thought ${B}{{32}}$, but each chip has two faces, so the total is ${B}{{64}}$.", 0, 0,
     "not equivalent to the gold answer"),
    ("64", rf"I initially thought ${B}{{32}}$, or maybe ${B}{{64}}$.", 1, 0, "hedged answer"),  # a hedge still
    ("64", rf"I thought ${B}{{32}}$, though it could also be ${B}{{64}}$.", 1, 0, "hedged answer"),
    ("4", rf"{B}{{3}} and ${B}{{4}}$", 1, 1, None),  # a bare box is not joined to a span's
    (r"$\{-2, 1\}$", rf"The roots are ${B}{{-2}}$ and ${B}{{1}}$.", 1, 1, None),  # spans joined by "and": a set
    # (bare boxes across a clause are joined, as Math-Verify joins them: a set, 0 for the gold 64)
    ("64", rf"I initially thought {B}{{32}}, but each chip has two faces, so the total is {B}{{64}}.", 0, 0,
     "not equivalent to the gold answer"),
    # a rejected root is not a hedge: the candidate kept
    ("3", "Answer: $x = 3$ or $x = -3$, but since $x$ is a side length, $x = 3$.", 1, 1, None),  # was 0 (hedge)
    ("-3", "Answer: $x = 3$ or $x = -3$, but since $x$ is a side length, $x = 3$.", 0, 0,
     "not equivalent to the gold answer"),
    # ... where Math-Verify reads the candidates as a set, the kept one is still the answer
    ("3", "Answer: $3$ or $-3$, but since $x$ is a side length, $3$.", 0, 0, "not equivalent to the gold answer"),
    ("3, -3", "Answer: $3$ or $-3$, but since $x$ is a side length, $3$.", 1, 0,
     "kept candidate not equivalent to the gold answer"),
    ("3", "Answer: $x = 3$ or $x = -3$, but maybe $x = 3$.", 1, 0, "hedged answer"),  # no keeping clause
    # a list, a range, a bound where the gold is one value (Math-Verify reads the first value)
    ("3", "**Answer:** 3, 4, 5, 6, 7, 8, 9", 1, 0, "answer is a list, range or bound"),  # was 1
    ("3", "Answer: between 3 and 5", 1, 0, "answer is a list, range or bound"),  # was 1
    ("3", "Answer: at least 3", 1, 0, "answer is a list, range or bound"),  # was 1
    ("3", "Answer: 3 to 5", 1, 0, "answer is a list, range or bound"),
    ("3", "Answer: 3–5", 1, 0, "answer is a list, range or bound"),
    ("3", "Answer: more than 3", 1, 0, "answer is a list, range or bound"),
    ("3", rf"{B}{{\geq 3}}", 1, 0, "answer is a list, range or bound"),  # was 1
    ("3", "Answer: $\\geq 3$", 1, 0, "answer is a list, range or bound"),
    ("3", "Answer: $3$ or more", 1, 0, "answer is a list, range or bound"),
    ("3", rf"It is at least {B}{{3}}.", 1, 0, "answer is a list, range or bound"),
    # a second candidate in any phrasing
    ("5", "Answer: $5$ (though $6$ is also plausible)", 1, 0, "hedged answer"),  # was 1
    ("5", "Answer: 5 o 6", 1, 0, "hedged answer"),  # was 1
    ("5", "Answer: 5 ou 6", 1, 0, "hedged answer"),
    ("5", rf"{B}{{5}} (though 6 is also plausible)", 1, 0, "hedged answer"),
    ("5", "Answer: 5 (though 6 is also plausible)", 1, 0, "hedged answer"),
    ("5", "Answer: $5$; $6$", 1, 0, "answer is a list, range or bound"),
    ("5", "Answer: 5 (6 if counted twice)", 1, 0, "hedged answer"),
    ("5", "Answer: $5$, else $6$", 1, 0, "hedged answer"),
    ("6", rf"${B}{{5}}$, unless it is ${B}{{6}}$", 1, 0, "hedged answer"),
    ("6", rf"{B}{{5}}, unless it is ${B}{{6}}$", 1, 0, "hedged answer"),
    ("5", "The answer is $5$ (alternatively $6$).", 1, 0, "hedged answer"),
    # a gold that is several values is still matched by the same several values
    ("x \\geq 3", rf"{B}{{x \geq 3}}", 1, 1, None),
    ("[3, 5]", rf"{B}{{[3, 5]}}", 1, 1, None),
    (r"\{3, 4, 5\}", "Answer: $3$, $4$, $5$", 1, 1, None),
    # what is not a second candidate: a restatement, a reason, a count beside the answer
    ("12", r"The answer is $12$ since $3 \cdot 4 = 12$.", 1, 1, None),
    ("0.5", "Answer: $0.5$ (i.e. $\\frac{1}{2}$)", 1, 1, None),
    ("3", "Answer: 3 apples (2 red and 1 green)", 1, 1, None),
    ("7", rf"The answer is {B}{{7}}, which is also 3 + 4.", 1, 1, None),
    ("12", rf"{B}{{12}} (i.e. $3 \cdot 4$)", 1, 1, None),
    ("7", "Answer: $7$, which could be checked by 3 + 4 = 7.", 1, 1, None),
    ("5", "Answer: $5$, but it could also be $6$.", 1, 0, "hedged answer"),
    ("1234", "Answer: 1,234", 1, 1, None),
    ("3/4", "Answer: 3 over 4", 0, 0, "not equivalent to the gold answer"),
]


@pytest.fixture(scope="module")
def strict():
    return get_verifier("math", processes=2, cache_size=0)


def test_strict_reads_each_answer_as_written(strict):
    out = score_batch(strict, [c for _, c, *_ in CASES], [{"answer": g} for g, *_ in CASES])
    got = [(g, c, r.score, r.details["reason"]) for (g, c, *_), r in zip(CASES, out)]
    assert got == [(g, c, float(s), reason) for g, c, _, s, reason in CASES]


def test_strict_never_pays_where_math_verify_does_not_and_its_other_zeros_are_listed(strict):
    out = score_batch(strict, [c for _, c, *_ in CASES], [{"answer": g} for g, *_ in CASES])
    for (gold, completion, noted, *_), result in zip(CASES, out):
        mv = float(verify(parse(f"${gold}$"), parse(completion)))  # Math-Verify on the whole completion
        assert mv == noted, (gold, completion, mv)
        assert not (result.score == 1.0 and mv == 0.0), (gold, completion)
        if result.score == 0.0 and mv == 1.0:
            assert intentional_difference(result.details, "strict"), (gold, completion, result.details)


def test_the_fast_path_gives_the_full_paths_verdicts(strict):
    """The same cases with the in-process fast path off: every verdict comes from math-verify alone, and is
    the same."""
    class NoFastPath(MathVerifier):
        def _fast(self, gold, info):
            return None

    slow = NoFastPath(processes=2, cache_size=0)
    fast = score_batch(strict, [c for _, c, *_ in CASES], [{"answer": g} for g, *_ in CASES])
    full = score_batch(slow, [c for _, c, *_ in CASES], [{"answer": g} for g, *_ in CASES])
    assert [(r.score, r.details["reason"]) for r in full] == [(float(s), reason) for *_, s, reason in CASES]
    assert [(r.score, r.details["reason"]) for r in fast] == [(r.score, r.details["reason"]) for r in full]
    assert any(r.details.get("fast_path") for r in fast)  # (the fast path did decide some of them)


@pytest.mark.parametrize("text, answer", [
    ("Answer: approx. 6.28", "approx. 6.28"), ("Answer: e.g. 5", "e.g. 5"), ("Answer: 5 vs. 6", "5 vs. 6"),
    ("Answer: ca. 5 apples", "ca. 5 apples"), ("Answer: No. 5", "No. 5"), ("Answer: i.e. 7. Done", "i.e. 7."),
    ("Answer: No. The set is empty.", "No."), ("Answer: 42. This is probably right", "42."),
])
def test_an_abbreviation_does_not_end_the_answer(text, answer):
    assert answer_line(text) == answer


def test_boxes_in_separate_spans_join_only_as_math_verify_joins_spans():
    clause = rf"I initially thought ${B}{{32}}$, but each chip has two faces, so the total is ${B}{{64}}$."
    assert final_boxed_group(clause) == ["64"]
    assert final_boxed_group(clause.replace("$", "")) == ["32", "64"]  # bare boxes: Math-Verify's box rule
    assert final_boxed_group(rf"${B}{{1}}, {B}{{2}}$ and ${B}{{3}}$") == ["1", "2", "3"]
    assert final_boxed_group(rf"${B}{{3}}$ ${B}{{4}}$") == ["4"]
