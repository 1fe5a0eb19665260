"""pass@k curves and coverage from per-problem (n, c) counts: pure functions, no Django.

Used by the evaluation page (webapp/evals), its exports and bench/passk_eval.py. The estimator itself,
``pass_at_k`` (unbiased, Chen et al. 2021), is defined here in pure Python so the web app never imports torch
for it, and is re-exported by ``training.algorithms`` with the rest of the RL math.

Reference for what the curves are for: Yue et al., "Does Reinforcement Learning Really Incentivize Reasoning
Capacity in LLMs Beyond the Base Model?" (arXiv 2504.13837): RLVR raises pass@1, yet at large k the base
model's curve often catches up and crosses above the RL model's.
"""
from __future__ import annotations

import math
import operator
from typing import Iterable, Sequence

MAX_N = 1024  # samples per problem the evaluation jobs accept


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are correct (Chen et al., arXiv 2107.03374, Fig. 3).

        pass@k = 1 − C(n−c, k) / C(n, k) = 1 − Π_{i=n−c+1}^{n} (1 − k/i)

    The product form (summed as logs) avoids huge binomials; for n up to 10,000 the result is exact to
    about 1e-13 relative. Returns 1.0 when
    n − c < k (every k-subset holds a correct sample). Raises ValueError for negative numbers, k < 1,
    k > n or c > n.
    """
    n, c, k = operator.index(n), operator.index(c), operator.index(k)
    if n < 0 or c < 0 or k < 0:
        raise ValueError(f"pass_at_k: n, c and k must be >= 0; got n={n}, c={c}, k={k}")
    if k < 1:
        raise ValueError(f"k: must be >= 1; got {k}")
    if k > n:
        raise ValueError(f"k: must be <= n ({n}); got {k}")
    if c > n:
        raise ValueError(f"c: must be <= n ({n}); got {c}")
    if n - c < k:
        return 1.0
    # 1 − exp(Σ log(1 − k/i)) via log1p/expm1/fsum: keeps relative precision when pass@k is tiny (c = 1,
    # k = 1, n = 10,000 gives 1e-4), where 1 − Π(...) would cancel away digits.
    return -math.expm1(math.fsum(math.log1p(-k / i) for i in range(n - c + 1, n + 1)))

def doubling_ks(n: int) -> list[int]:
    """k = 1, 2, 4, … up to n, plus n itself when n is not a power of two.

    >>> doubling_ks(12)
    [1, 2, 4, 8, 12]
    >>> doubling_ks(16)
    [1, 2, 4, 8, 16]
    """
    if n < 1:
        raise ValueError(f"n: must be at least 1; got {n}")
    ks, k = [], 1
    while k <= n:
        ks.append(k)
        k *= 2
    if ks[-1] != n:
        ks.append(n)
    return ks


def mean_pass_at_k(counts: Sequence[tuple[int, int]], k: int) -> float:
    """Dataset pass@k = (1/P) Σ_p pass@k(n_p, c_p) over problems p with n_p samples, c_p correct.

    Every problem must have n_p >= k (``pass_at_k`` raises ValueError naming k otherwise).

    >>> mean_pass_at_k([(4, 0), (4, 4)], 1)
    0.5
    """
    if not counts:
        raise ValueError("counts: no problems to average over")
    return math.fsum(pass_at_k(n, c, k) for n, c in counts) / len(counts)


def pass_at_k_curve(counts: Sequence[tuple[int, int]], ks: Iterable[int] | None = None) -> dict[int, float]:
    """{k: dataset pass@k} for ``ks`` (default: ``doubling_ks`` of the smallest n among the problems)."""
    if not counts:
        raise ValueError("counts: no problems to average over")
    if ks is None:
        ks = doubling_ks(min(n for n, _ in counts))
    return {k: mean_pass_at_k(counts, k) for k in ks}


def coverage(solved_a: Sequence[bool], solved_b: Sequence[bool]) -> dict[str, int]:
    """How many problems each of two models solves at least once (c > 0), split four ways.

    ``solved_a[p]`` / ``solved_b[p]``: whether model A (e.g. the base) / B (e.g. an RL checkpoint) solved
    problem p. Returns counts for ``a_only``, ``b_only``, ``both``, ``neither`` (they sum to the problem count).

    >>> coverage([True, True, False, False], [True, False, True, False])
    {'a_only': 1, 'b_only': 1, 'both': 1, 'neither': 1}
    """
    if len(solved_a) != len(solved_b):
        raise ValueError(f"coverage: {len(solved_a)} problems for A but {len(solved_b)} for B")
    out = {"a_only": 0, "b_only": 0, "both": 0, "neither": 0}
    for a, b in zip(solved_a, solved_b):
        out["both" if a and b else "a_only" if a else "b_only" if b else "neither"] += 1
    return out


def crossing_k(curve_a: dict[int, float], curve_b: dict[int, float], tol: float = 1e-12) -> int | None:
    """The first k at which the curves swap order, or None when one stays at or above the other.

    Only the ks both curves share are compared, in increasing order; differences within ``tol`` count as
    ties and do not define an order. "Crossing" means the sign of (A − B) at some k is the opposite of the
    first non-tied sign: e.g. RL above the base at k = 1 and the base above RL at k = 256.

    >>> crossing_k({1: 0.3, 16: 0.8, 256: 0.95}, {1: 0.5, 16: 0.8, 256: 0.9})
    256
    >>> crossing_k({1: 0.3, 16: 0.8}, {1: 0.5, 16: 0.9}) is None
    True
    """
    first_sign = 0
    for k in sorted(set(curve_a) & set(curve_b)):
        diff = curve_a[k] - curve_b[k]
        sign = 0 if abs(diff) <= tol else (1 if diff > 0 else -1)
        if sign == 0:
            continue
        if first_sign == 0:
            first_sign = sign
        elif sign != first_sign:
            return k
    return None
