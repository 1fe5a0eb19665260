"""The math fast path never disagrees with math-verify on a verdict it claims.

A seeded generator writes the same value (or a nearby wrong one) in many shapes: integers with separators and
leading zeros, decimals (exact, padded, rounded to 6 or 7 places), fractions in every notation, percentages,
radicals, ``x = v``; each claimed fast verdict is compared with ``check_in_worker`` (math-verify) run in the
worker pool. Set SEEDBED_FASTPATH_CORPUS=20000 for a longer run.
"""
import os
import random
from fractions import Fraction

import pytest

from training.verifiers import get_verifier
from training.verifiers.math_fastpath import decide, parse_fast, square_free
from training.verifiers.workers import WorkerPool

CORPUS_SIZE = int(os.environ.get("SEEDBED_FASTPATH_CORPUS", "1200"))


def _int_text(n: int, rng: random.Random) -> str:
    style = rng.randrange(5)
    if style == 0 and abs(n) >= 1000:
        return f"{n:,}"
    if style == 1 and abs(n) >= 1000:
        return f"{n:,}".replace(",", "{,}")
    if style == 2 and n >= 0:
        return "0" + str(n)
    if style == 3 and n > 0:
        return "+" + str(n)
    return str(n)


def _decimal_text(v: Fraction, rng: random.Random) -> str | None:
    """v as a decimal: exact when it terminates (sometimes padded), else rounded to 6 or 7 places."""
    for places in range(0, 7):
        if (v * 10**places).denominator == 1:
            text = f"{float(v):.{places + rng.randrange(2)}f}"
            if places == 0 and "." not in text:
                text += ".0"
            if text.startswith("0.") and rng.random() < 0.2:
                text = text[1:]
            if abs(v) >= 1000 and rng.random() < 0.3:
                whole, _, frac = text.partition(".")
                text = f"{int(whole):,}.{frac}"
            return text
    return f"{float(v):.{rng.choice([2, 6, 7])}f}"


def _fraction_text(v: Fraction, rng: random.Random) -> str:
    scale = rng.choice([1, 1, 1, 2, 3])
    a, b = v.numerator * scale, v.denominator * scale
    sign, a_abs = ("-" if a < 0 else ""), abs(a)
    style = rng.randrange(7)
    if style == 0:
        return f"{a}/{b}"
    if style == 1 and a_abs < 10 and b < 10:
        return rf"{sign}\frac{a_abs}{b}"
    if style == 2:
        return rf"\frac{{{a}}}{{{b}}}"
    command = rng.choice([r"\frac", r"\dfrac", r"\tfrac"])
    return rf"{sign}{command}{{{a_abs}}}{{{b}}}"


def _percent_text(v: Fraction, rng: random.Random) -> str | None:
    p = v * 100
    if p < 0:
        return None
    for places in range(0, 3):
        if (p * 10**places).denominator == 1:
            return f"{float(p):.{places}f}" + rng.choice([r"\%", "%"])
    return None


def _radical_text(q: Fraction, m: int, rng: random.Random) -> str:
    """q*sqrt(m) written several ways (square factors sometimes pushed under the root)."""
    sign, q = ("-" if q < 0 else ""), abs(q)
    coef, den = q.numerator, q.denominator
    if rng.random() < 0.3 and coef > 1 and coef * coef * m < 10**5:
        coef, m = 1, coef * coef * m
    braced = rf"\sqrt{{{m}}}"
    root = rng.choice([braced, rf"\sqrt {m}" if m < 10 else braced, rf"\sqrt{m}" if m < 10 else braced])
    head = ("" if coef == 1 else str(coef)) + root
    if den == 1:
        return sign + head
    return rng.choice([f"{sign}{head}/{den}", rf"{sign}\frac{{{head}}}{{{den}}}", rf"\frac{{{sign}{head}}}{{{den}}}"])


def render(q: Fraction, m: int, rng: random.Random) -> str | None:
    """One written form of q*sqrt(m), or None when the chosen shape cannot write it."""
    if m != 1:
        if rng.random() < 0.15:  # a rounded decimal of an irrational
            return f"{float(q) * m ** 0.5:.{rng.choice([2, 6, 7])}f}"
        return _radical_text(q, m, rng)
    shape = rng.choice(["int", "decimal", "fraction", "percent", "radical"])
    if shape == "int" and q.denominator == 1:
        return _int_text(q.numerator, rng)
    if shape == "decimal" and abs(q) < 10**5:
        return _decimal_text(q, rng)
    if shape == "percent":
        return _percent_text(q, rng)
    if shape == "radical" and q > 0 and q.denominator == 1 and q < 100:
        return rf"\sqrt{{{q.numerator ** 2}}}"
    if q.denominator == 1:
        return _int_text(q.numerator, rng)
    return _fraction_text(q, rng)


def _random_value(rng: random.Random) -> tuple[Fraction, int]:
    kind = rng.randrange(5)
    if kind == 0:
        return Fraction(rng.randint(-50, 50)), 1
    if kind == 1:
        return Fraction(rng.randint(-10**7, 10**7)), 1
    if kind == 2:
        return Fraction(rng.randint(-40, 40), rng.choice([2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 25, 100, 1000])), 1
    if kind == 3:
        return Fraction(rng.randint(0, 200), rng.choice([100, 1000])), 1  # percent-like
    return Fraction(rng.randint(-9, 9) or 1, rng.choice([1, 1, 2, 3, 4])), square_free(rng.randint(2, 60))[1]


def _near_miss(q: Fraction, m: int, rng: random.Random) -> tuple[Fraction, int]:
    """A value math-verify should (mostly) reject, some of them deliberately close."""
    move = rng.randrange(8)
    if move == 0:
        return q + 1, m
    if move == 1:
        return -q, m
    if move == 2:
        return q * 100, m  # the percent confusions: 50 vs 50%
    if move == 3:
        return q / 100, m
    if move == 4:
        return q + Fraction(1, 10**7), m
    if move == 5:
        return q + Fraction(3, 10**6), m
    if move == 6:
        return q, (square_free(m + 1)[1] if m > 1 else 2)
    return q * 2, m


def corpus(size: int, seed: int = 1234) -> list[tuple[str, str]]:
    """``size`` distinct (gold, answer) pairs: about half written values equal, half near misses."""
    rng = random.Random(seed)
    pairs, seen = [], set()
    while len(pairs) < size:
        q, m = _random_value(rng)
        other = (q, m) if rng.random() < 0.5 else _near_miss(q, m, rng)
        gold, answer = render(q, m, rng), render(*other, rng)
        if gold is None or answer is None:
            continue
        if rng.random() < 0.12:
            gold = f"{rng.choice('xyn')} = {gold}"
        if rng.random() < 0.12:
            answer = f"{rng.choice('xyk')}={answer}"
        if (gold, answer) not in seen:
            seen.add((gold, answer))
            pairs.append((gold, answer))
    return pairs


@pytest.fixture(scope="module")
def math_verify_pool():
    pool = WorkerPool("training.verifiers.math_answer:check_in_worker", processes=2, deadline_s=30)
    yield pool
    pool.close()


# Every ordered pair of these edge forms (signs, zeros, padding, 6th-decimal boundaries, percent quirks).
EDGE_FORMS = ["-.5", "+0.5", r"+\frac{1}{2}", r"\frac{-1}{-2}", r"-\frac{-1}{2}", "1,000,000.0", "0.0", "-0", "-0.0",
              "0%", "0.0%", ".5%", "100%", "1", r"\sqrt{1}", "x = -0.5", "-0.5", "0.5", "1000000", "1{,}000{,}000",
              r"2\sqrt 3", r"\sqrt{12}", r"-2\sqrt{3}", r"\frac{-2\sqrt{3}}{1}", "0", r"\frac{0}{5}", "z=0",
              "0.000001", "0.0000001", "0.0000015", "1/1000000", "999999.5", "12.5%", "0.125", r"\frac{1}{8}",
              r"25\%", "0.25", r"k = \frac{1}{4}", "5%", "5", "0.05", "500%", "042", "42.0"]


def test_fast_path_agrees_with_math_verify_on_generated_corpus(math_verify_pool):
    generated = corpus(CORPUS_SIZE)
    pairs = generated + [(g, a) for g in EDGE_FORMS for a in EDGE_FORMS]
    claimed = []
    for gold, answer in pairs:
        g, a = parse_fast(gold), parse_fast(answer)
        if g is not None and a is not None:
            verdict = decide(g, a)
            if verdict is not None:
                claimed.append((gold, answer, verdict))
    replies = math_verify_pool.map([(gold, answer, 6, 5) for gold, answer, _ in claimed])
    disagreements = [(gold, answer, verdict, reply) for (gold, answer, verdict), reply in zip(claimed, replies)
                     if not (isinstance(reply, dict) and reply.get("status") == "ok"
                             and reply["correct"] == verdict)]
    assert not disagreements, disagreements[:20]
    # The corpus exercises both verdicts and the fast path claims most of these common shapes.
    verdicts = [v for _, _, v in claimed]
    assert verdicts.count(True) > len(generated) // 5 and verdicts.count(False) > len(generated) // 5
    generated_set = set(generated)
    claimed_generated = sum(1 for g, a, _ in claimed if (g, a) in generated_set)
    assert claimed_generated > 0.75 * len(generated), f"claimed only {claimed_generated} of {len(generated)}"


# (gold, answer, expected fast-path verdict): None = outside the grammar or too close to call.
SHAPES = [
    ("1000", "1,000", True), ("1000", "1{,}000", True), ("42", "042", True), ("-7", "+7", False),
    ("0.5", r"\frac{1}{2}", True), (r"\frac34", "0.75", True), (r"\dfrac{3}{4}", r"\tfrac{6}{8}", True),
    ("-0.5", r"\frac{-1}{2}", True), ("-0.5", r"-\frac{1}{2}", True), ("2/3", r"\frac{2}{3}", True),
    ("50", r"50\%", True), ("0.25", r"25\%", True), (r"\frac{1}{4}", "25%", True), ("12.5%", "0.125", True),
    ("50", r"5000\%", None), (r"\frac{4}{2}", r"2\%", None), ("5", r"6\%", False),
    (r"\sqrt{8}", r"2\sqrt{2}", True), (r"\frac{\sqrt{2}}{2}", r"\sqrt{2}/2", True),
    (r"\sqrt{12}", r"2\sqrt3", True), (r"\sqrt{4}", "2", True), (r"\sqrt{3}", r"\sqrt{2}", False),
    (r"\sqrt{2}", "1.414214", None), (r"\sqrt{2}", "1.41", False),
    ("x = 3", "3", True), ("3", "x=3", True), ("x=3", "x = 4", False), ("x=3", "y=3", None),
    (r"\frac{1}{3}", "0.333333", None), (r"\frac{1}{3}", "0.33", False),
    ("1,2", "1,2", None), (r"10 \text{ cm}", "10", None), (r"\pi", "3.14", None), ("-5%", "-0.05", None),
]


@pytest.mark.parametrize("gold,answer,expected", SHAPES)
def test_fast_path_shapes(gold, answer, expected):
    g, a = parse_fast(gold), parse_fast(answer)
    verdict = None if g is None or a is None else decide(g, a)
    assert verdict is expected, (gold, answer, g, a)


def test_fast_path_shapes_agree_with_math_verify(math_verify_pool):
    claimed = [(g, a, e) for g, a, e in SHAPES if e is not None]
    replies = math_verify_pool.map([(g, a, 6, 5) for g, a, _ in claimed])
    assert [r["correct"] for r in replies] == [e for _, _, e in claimed]


def test_verifier_uses_fast_path_and_says_so():
    v = get_verifier("math", processes=1, cache_size=0)
    r = v(r"so \boxed{\dfrac{3}{4}}", {"answer": "0.75"})
    assert r.score == 1.0 and r.details["fast_path"] is True and r.details["answer_parsed"] == "3/4"
    r = v(r"\boxed{25\%}", {"answer": "0.3"})
    assert r.score == 0.0 and r.details["fast_path"] is True and r.details["reason"]
    slow = v(r"\boxed{\frac{\pi}{2}}", {"answer": r"\pi/2"})
    assert slow.score == 1.0 and slow.details["fast_path"] is False


def test_same_text_shortcut_in_worker_matches_full_check():
    """An answer identical to its gold skips math-verify's second parse; the verdict must not change."""
    from training.verifiers.math_answer import check_in_worker
    golds = [r"\frac{\pi}{2}", "(x+1)^2", "[1, 3)", r"\{1, 2\}", r"2\sqrt{2}+1", r"3 \text{ cm}", "3/0",
             r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", "x^2 - 1 = 0", r"\infty", r"\text{Monday}", "a=b=3"]
    for gold in golds:
        fast = check_in_worker(gold, gold, 6, 5)
        full = check_in_worker(gold, gold, 6, 5, same_text_shortcut=False)
        assert (fast["status"], fast.get("correct")) == (full["status"], full.get("correct")), gold


def hang_or_check(pairs, float_rounding, timeout_s, budget_s):
    """Pool target for the test below: a chunk holding the answer "HANG" never returns (a stuck sympy call
    that SIGALRM cannot interrupt); any other chunk is checked as usual."""
    import time as _time
    from training.verifiers.math_answer import check_chunk_in_worker
    if any(answer == "HANG" for _, answer, *_ in pairs):
        _time.sleep(3600)
    return check_chunk_in_worker(pairs, float_rounding, timeout_s, budget_s)


def test_chunk_past_deadline_is_retried_one_by_one_so_only_the_stuck_pair_fails():
    from training.verifiers import VerifierError, score_batch
    v = get_verifier("math", processes=2, cache_size=0)
    v.pool = WorkerPool("tests.verifiers.test_math_fastpath:hang_or_check", processes=2, deadline_s=4)
    try:
        golds = [rf"\frac{{\pi}}{{{k}}}" for k in range(2, 14)]
        completions = [rf"\boxed{{\pi/{k}}}" for k in range(2, 14)]
        completions[5] = r"\boxed{HANG}"
        out = score_batch(v, completions, [{"answer": g} for g in golds])
        assert isinstance(out[5], VerifierError) and "timed out" in str(out[5])
        assert [o.score for i, o in enumerate(out) if i != 5] == [1.0] * 11
        assert v.pool.restarts >= 2  # the chunk's worker, then the single stuck pair's worker
    finally:
        v.pool.close()


def test_chunk_stops_starting_pairs_past_its_budget_and_the_rest_are_sent_again():
    from training.verifiers import score_batch
    from training.verifiers.math_answer import check_chunk_in_worker
    replies = check_chunk_in_worker([(r"\pi", r"\pi"), (r"\pi", "3"), (r"\pi", "4")], 6, 3, budget_s=0.0)
    assert replies[0]["correct"] is True and replies[1:] == [None, None]
    # timeout_s=3 in a 9.6 s deadline leaves a 0.1 s budget per chunk: every pair still gets judged.
    v = get_verifier("math", processes=2, cache_size=0, timeout_s=3, deadline_s=9.6)
    golds = [rf"(x+{k})^2" for k in range(40)]
    out = score_batch(v, [rf"\boxed{{x^2+{2 * k}x+{k * k}}}" for k in range(40)], [{"answer": g} for g in golds])
    assert [o.score for o in out] == [1.0] * 40


def test_pool_that_cannot_start_fails_the_batch_once_without_per_pair_retries():
    from training.verifiers import VerifierError, score_batch
    from training.verifiers.workers import PoolWorker
    started = []

    def broken_worker():
        started.append(PoolWorker("no_such_module_for_seedbed_tests:fn"))
        return started[-1]

    v = get_verifier("math", processes=1, cache_size=0)
    v.pool = WorkerPool("no_such_module_for_seedbed_tests:fn", processes=1, deadline_s=5,
                        worker_factory=broken_worker)
    try:
        out = score_batch(v, [rf"\boxed{{\pi/{k}}}" for k in range(2, 8)],
                          [{"answer": rf"\frac{{\pi}}{{{k}}}"} for k in range(2, 8)])
        assert all(isinstance(o, VerifierError) and "worker failed" in str(o) for o in out)
        assert len(started) == 1
    finally:
        v.pool.close()
