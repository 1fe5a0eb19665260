"""pass@k per problem against exact binomials, and the curve / coverage / crossing helpers."""
from __future__ import annotations

import math
from fractions import Fraction

import pytest

from training.algorithms import pass_at_k
from training.passk import coverage, crossing_k, doubling_ks, mean_pass_at_k, pass_at_k_curve


def exact_pass_at_k(n: int, c: int, k: int) -> Fraction:
    """1 - C(n-c, k) / C(n, k) in exact rational arithmetic (math.comb(m, k) is 0 when k > m)."""
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


@pytest.mark.parametrize("n", range(1, 13))
def test_pass_at_k_per_problem_matches_exact_binomials(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(float(exact_pass_at_k(n, c, k)), rel=1e-12, abs=1e-15), (n, c, k)


def test_pass_at_1_is_the_share_correct_and_pass_at_n_is_whether_any_is():
    for n in (1, 5, 16):
        for c in range(n + 1):
            assert pass_at_k(n, c, 1) == pytest.approx(c / n)
            assert pass_at_k(n, c, n) == (1.0 if c > 0 else 0.0)


def test_dataset_pass_at_k_is_the_mean_over_problems_even_with_different_n():
    counts = [(4, 1), (8, 0), (6, 6), (10, 3)]
    for k in (1, 2, 4):
        expected = sum(exact_pass_at_k(n, c, k) for n, c in counts) / len(counts)
        assert mean_pass_at_k(counts, k) == pytest.approx(float(expected), rel=1e-12)
    # the default ks stop at the smallest n, where every problem still has k <= n
    assert list(pass_at_k_curve(counts)) == [1, 2, 4]
    with pytest.raises(ValueError, match="k"):
        mean_pass_at_k(counts, 5)
    with pytest.raises(ValueError, match="no problems"):
        mean_pass_at_k([], 1)


def test_large_n_stays_exact_where_binomials_are_huge():
    # C(1024, 512) has ~307 digits: the product form must still agree with exact rationals
    for c, k in ((1, 1), (3, 256), (100, 512), (1, 1024)):
        assert pass_at_k(1024, c, k) == pytest.approx(float(exact_pass_at_k(1024, c, k)), rel=1e-10)


def test_doubling_ks():
    assert doubling_ks(1) == [1]
    assert doubling_ks(256) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert doubling_ks(100) == [1, 2, 4, 8, 16, 32, 64, 100]
    with pytest.raises(ValueError, match="n"):
        doubling_ks(0)


def test_coverage_splits_problems_four_ways():
    base = [True, False, True, False, False, True]
    rl = [True, True, False, False, True, True]
    assert coverage(base, rl) == {"a_only": 1, "b_only": 2, "both": 2, "neither": 1}
    with pytest.raises(ValueError, match="problems"):
        coverage([True], [True, False])


def test_crossing_k_finds_where_rl_is_overtaken_by_the_base():
    rl = {1: 0.6, 4: 0.8, 16: 0.85, 64: 0.87}
    base = {1: 0.3, 4: 0.7, 16: 0.86, 64: 0.95}
    assert crossing_k(rl, base) == 16
    assert crossing_k(rl, {k: v - 0.1 for k, v in rl.items()}) is None
    # ties do not count as a crossing
    assert crossing_k({1: 0.5, 2: 0.7}, {1: 0.5, 2: 0.6}) is None
