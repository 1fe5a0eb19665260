"""The ``bayes`` policy's calibrated model: each seed's predictive distribution of its worth from its prefix, and
the joint Monte Carlo draws that give P(near-best) per seed and P(the sweep has stopped every near-best seed).

One function computes these numbers (``sweep_draws`` then ``p_near_best`` / ``loss``), for the policy's decisions
(``bayes.BayesPolicy``), the dashboard's probability column and forecasts (``forecast_paths``): the same inputs
give the same numbers (a fixed seeded generator, common random numbers).

The model (docs/architecture.md, "Early stopping"). A seed's worth is what its final (the mean of its last
``window`` points, ``window`` = 10 % of the run) would be without noise. Given its prefix up to the fraction f of
its run, its worth is

    worth = level + scale * z,   z ~ Q(f, u)

with ``level`` the mean of its last ``window`` raw points, ``scale`` = sqrt(noise**2 / window + spread**2) (its
own point noise, from its first differences, and the spread of the seeds' levels: a drift ahead is as large as
the seeds differ), u = (level - median of the seeds' levels) / scale its standing, and Q the empirical
distribution of z, a table of quantiles per (f, u) cell learned from a tuning corpus of synthetic sweeps
(``drift_table``, made by bench/calibrate_bayes.py): how far curves that wander slowly, collapse late, fall off a
cliff or bloom late still moved after the fraction f, measured on their noise-free worth. This is the approach
of learning-curve extrapolation with a prior trained on curves (Adriaensen et al., "Efficient Bayesian Learning
Curve Extrapolation using Prior-Data Fitted Networks", NeurIPS 2023, LC-PFN; Domhan et al., IJCAI 2015, fit
parametric curve families): a predictive distribution learned from many curves, here a table, not a network.

Seeds are drawn independently (seeds are independent runs; what they share, the sweep's common course, is in
each seed's drift and makes the draws only more cautious about their differences). A seed the policy stopped
keeps the distribution it had when it stopped (its ``Prediction`` is frozen in its decision's details).
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Hashable, Iterable, Optional, Sequence

import numpy as np

from . import drift_table
from .prior import BUILTIN, DriftTable

__all__ = ["SeedFold", "Prediction", "predictions", "sweep_draws", "p_near_best", "loss", "choose_stops",
           "DRAWS", "level_window", "continuing_gain", "fresh_seed_gain", "worth_continuing"]

DRAWS = 2000
"""Monte Carlo draws per check: a probability of 0.05 is known to +-0.005 (its binomial sd)."""

SEED = 20261127
"""The draws' fixed seed: the same inputs give the same numbers on every replay and on the dashboard."""


def level_window(max_steps: int) -> int:
    """Points of a seed's level (and of its final): ceil(10 % of ``max_steps``), at least 1."""
    return max(1, math.ceil(0.1 * max_steps))


class SeedFold:
    """One seed's raw points as the model reads them, point by point: the last ``window`` points (its level) and
    the sums of its squared first differences (its noise: Var(x_t - x_(t-1)) = 2 sigma**2 for white noise around
    a slow trend). ``state()`` / ``load()`` give and take them as JSON."""

    def __init__(self, window: int):
        self.recent: deque = deque(maxlen=window)
        self.last: Optional[float] = None
        self.d2 = 0.0
        self.n_diffs = 0
        self.step = -1

    def add(self, step: int, value: float) -> None:
        if self.last is not None:
            self.d2 += (value - self.last) ** 2
            self.n_diffs += 1
        self.last, self.step = value, step
        self.recent.append(value)

    @property
    def level(self) -> float:
        return sum(self.recent) / len(self.recent)

    @property
    def noise(self) -> float:
        """sigma = sqrt(sum (x_t - x_(t-1))**2 / (2 (n - 1))); 0 before a second point."""
        return math.sqrt(self.d2 / (2.0 * self.n_diffs)) if self.n_diffs else 0.0

    def state(self) -> list:
        return [list(self.recent), self.last, self.d2, self.n_diffs, self.step]

    def load(self, state: list) -> None:
        recent, self.last, self.d2, self.n_diffs, self.step = state
        self.recent.extend(float(x) for x in recent)
        self.d2, self.n_diffs, self.step = float(self.d2), int(self.n_diffs), int(self.step)


@dataclass(frozen=True)
class Prediction:
    """A seed's predictive distribution of its worth: worth = level + scale * z, z ~ Q(fraction, standing)."""

    level: float
    scale: float
    fraction: float
    standing: float

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, saved: dict) -> "Prediction":
        return cls(**{k: float(saved[k]) for k in ("level", "scale", "fraction", "standing")})

    def quantiles(self, probs: Sequence[float], table: DriftTable = BUILTIN) -> list[float]:
        """The worth's quantiles at ``probs`` (linear between ``table``'s knots)."""
        knots = table.at(self.fraction, self.standing)
        return [self.level + self.scale * float(np.interp(p, drift_table.PROBS, knots)) for p in probs]


def predictions(seeds: dict[Hashable, tuple[float, float, float]], window: int) -> dict[Hashable, Prediction]:
    """Each seed's ``Prediction`` from ``seeds[run] = (level, noise, fraction)``: spread = the sd of the levels
    (population sd, 0 for one seed), scale = sqrt(noise**2 / window + spread**2) (at least 1e-9), standing u =
    (level - median level) / scale."""
    levels = [v[0] for v in seeds.values()]
    if not levels:
        return {}
    spread = float(np.std(levels)) if len(levels) > 1 else 0.0
    median = float(np.median(levels))
    out = {}
    for run_id, (level, noise, fraction) in seeds.items():
        scale = max(math.sqrt(noise * noise / window + spread * spread), 1e-9)
        out[run_id] = Prediction(level=level, scale=scale, fraction=fraction, standing=(level - median) / scale)
    return out


def sweep_draws(preds: Sequence[Prediction], draws: int = DRAWS, table: DriftTable = BUILTIN) -> np.ndarray:
    """Joint draws of the seeds' worths, shape (draws, len(preds)): column j is preds[j].level + preds[j].scale * z
    with z drawn from its cell's quantiles in ``table`` (the built-in one, or ``prior.learn``'s from the project's
    finished sweeps) by inverse transform (U ~ Uniform(0, 1), z = Q^-1(U), linear
    between the knots), the seeds independent; ``SEED`` fixes the uniforms, so column j depends only on j and
    ``preds[j]``."""
    u = _uniforms(draws, len(preds))
    out = np.empty_like(u)
    for j, pred in enumerate(preds):
        out[:, j] = pred.level + pred.scale * np.interp(u[:, j], drift_table.PROBS,
                                                         table.at(pred.fraction, pred.standing))
    return out


@lru_cache(maxsize=64)
def _uniforms(draws: int, n: int) -> np.ndarray:
    """The draws' uniforms for ``n`` seeds (read-only: every call with the same shape shares them)."""
    u = np.random.default_rng(SEED).random((draws, n))
    u.flags.writeable = False
    return u


def _near(worths: np.ndarray, tolerance: float) -> np.ndarray:
    """near[d, j]: in draw d, seed j's worth is within ``tolerance`` of the best worth (larger is better)."""
    return worths >= worths.max(axis=1, keepdims=True) - tolerance


def p_near_best(worths: np.ndarray, tolerance: float) -> np.ndarray:
    """P(seed j is near-best) = the share of draws in which its worth >= max worth - tolerance."""
    return _near(worths, tolerance).mean(axis=0)


def loss(worths: np.ndarray, tolerance: float, stopped: Iterable[int]) -> float:
    """P(every near-best seed is among ``stopped``) = the share of draws in which no kept seed is near-best."""
    kept = np.ones(worths.shape[1], dtype=bool)
    kept[list(stopped)] = False
    return float(1.0 - _near(worths, tolerance)[:, kept].any(axis=1).mean())


def choose_stops(worths: np.ndarray, tolerance: float, risk: float, candidates: Sequence[int],
                 stopped: Sequence[int]) -> list[tuple[int, float, float]]:
    """Greedy: the candidates (live seeds that may be stopped) in increasing P(near-best), each stopped while
    P(every near-best seed is stopped), the seeds stopped before included, stays <= ``risk``; one seed is always
    kept. Returns (column, its P(near-best), the loss with it stopped) per stop, in order."""
    near = _near(worths, tolerance)
    p = near.mean(axis=0)
    kept = np.ones(worths.shape[1], dtype=bool)
    kept[list(stopped)] = False
    out = []
    for j in sorted(candidates, key=lambda j: (p[j], j)):
        if kept.sum() <= 1:
            break
        kept[j] = False
        lost = float(1.0 - near[:, kept].any(axis=1).mean())
        if lost > risk:
            kept[j] = True
            break
        out.append((j, float(p[j]), lost))
    return out


# --- the value of compute: with a budget, is a seed's rest worth more than a fresh seed? --------------------------

def continuing_gain(worths: np.ndarray, j: int, kept: Sequence[int]) -> float:
    """What running seed j to its end adds to the sweep's best worth, in expectation over the draws:

        g_j = E[ max(W_j - max_{k in kept, k != j} W_k, 0) ]

    (the expected improvement of Jones et al. 1998 with the other kept seeds' best as the incumbent; 0 for no
    draw in which j beats them). ``kept``: the columns of the seeds still in the race (running or finished)."""
    others = [k for k in kept if k != j]
    if not others:
        return float(np.maximum(worths[:, j], 0.0).mean()) if worths.size else 0.0
    return float(np.maximum(worths[:, j] - worths[:, others].max(axis=1), 0.0).mean())


def fresh_seed_gain(worths: np.ndarray, kept: Sequence[int]) -> float:
    """What a fresh seed run to its end adds to the sweep's best worth, in expectation:

        g_new = E[ max(W_new - max_{k in kept} W_k, 0) ],   W_new ~ the sweep's seed population

    A fresh seed is one more draw of the seeds the sweep has run (its config is theirs; only its seed differs), so
    W_new in draw d is the worth of a seed J(d) picked uniformly among *every* seed in the race (stopped ones
    included: the population is not only its survivors) in another draw D(d) (independent of the kept seeds'
    worths in draw d). J and D come from a generator with a fixed seed, so the same inputs give the same number."""
    n_draws, n_seeds = worths.shape
    if not n_draws or not n_seeds or not kept:
        return 0.0
    other_draw, seed = _fresh_picks(n_draws, n_seeds)
    best = worths[:, list(kept)].max(axis=1)
    return float(np.maximum(worths[other_draw, seed] - best, 0.0).mean())


@lru_cache(maxsize=64)
def _fresh_picks(n_draws: int, n_seeds: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(SEED + 1)
    return rng.permutation(n_draws), rng.integers(0, n_seeds, n_draws)


def worth_continuing(gain: float, steps_left: int, fresh_gain: float, run_steps: int,
                     margin: float = 1.0) -> bool:
    """The value-of-compute rule: keep seed j when its rest buys at least as much of the sweep's best worth per step
    as a fresh seed would,

        g_j / (steps j has left)  >=  g_new / (steps of a full run),

    the expected improvement per unit of cost (Snoek et al., "Practical Bayesian Optimization of Machine Learning
    Algorithms", NeurIPS 2012, EI per second) applied to the choice freeze-thaw Bayesian optimization makes between
    resuming a run and starting a new one (Swersky et al., "Freeze-Thaw Bayesian Optimization", 2014).

    ``margin`` (c <= 1) is a safety factor on both estimates: keep j unless g_j / left < c x g_new / run_steps,
    i.e. stop only when a fresh seed buys at least 1/c times as much per step; c -> 0 never stops (the sweep runs
    its seeds to their end), c = 1 is the plain comparison (``bayes.FRESH_SEED_MARGIN`` gives the policy's).

    >>> worth_continuing(0.002, 10, 0.01, 100)   # 2e-4 per step left against 1e-4 per step of a fresh seed
    True
    >>> worth_continuing(0.002, 40, 0.01, 100)   # 5e-5 against 1e-4: a fresh seed buys more with the same steps
    False
    >>> worth_continuing(0.002, 40, 0.01, 100, margin=0.5)   # but not twice as much: keep it
    True
    """
    if steps_left <= 0:
        return True
    return gain * run_steps >= margin * fresh_gain * steps_left
