"""The ``bayes`` policy's prior: the drift table its predictive distributions are drawn from, learned from the finished
sweeps of the same project on the same metric, shrunk toward the built-in table (docs/architecture.md, "Early
stopping").

``calibrated`` forecasts a seed's worth as level + scale * z with z ~ Q(f, u), a table of quantiles of z per cell
of (fraction of the run f, standing u). The built-in table (``drift_table``) was learned on synthetic sweeps; the
prior does not transfer to curves unlike them (on a second synthetic corpus the built-in table's realized loss
runs past its risk and it saves less than a one-shot rule). A project's own finished sweeps say how its curves
move: ``learn(history)`` measures, for every seed that ran to its end and every step t from 10 % of its run, what
the policy saw at t (level, noise, scale, standing among the sweep's seeds at t) and its standardized drift to
its final,

    z = ((final - level) - median over the sweep's finished seeds of (final - level)) / scale

(``bench/calibrate_bayes.py`` does the same on the noise-free worth), and per cell mixes the empirical distribution
of those z with the built-in one:

    F(z) = w F_history(z) + (1 - w) F_builtin(z),   w = n / (n + ``STRENGTH``)

with n the seeds that gave the cell samples (a seed's samples in one cell are nearly the same number, so seeds,
not steps, count), then reads the new table's knots off F at ``drift_table.PROBS``. This is the prior-data
approach of learning-curve extrapolation (Adriaensen et al., LC-PFN, NeurIPS 2023) with the project's curves as
the prior data, and the shrinkage is a beta-binomial-like pseudo-count: a cell with ``STRENGTH`` seeds of history
weighs as much as the built-in table.

A history is a list of finished sweeps, each a mapping run id -> list of ``(step, value)`` of the policy's metric
at raw steps, runs stopped early included as they were recorded (they count in the standing of the seeds beside
them; only seeds that reached the sweep's horizon give samples, so a history of sweeps whose poor seeds were
stopped says less about low standings, where the built-in table keeps more weight). A sweep's horizon is the
largest last step that two of its runs reached (one run extended past it does not move it).
"""
from __future__ import annotations

import math
import statistics
from collections import OrderedDict
from dataclasses import dataclass
from typing import Hashable, Mapping, Optional, Sequence

import numpy as np

from . import drift_table

__all__ = ["DriftTable", "BUILTIN", "STRENGTH", "learn", "samples", "horizon", "history_key"]

STRENGTH = 50
"""Seeds of history per cell that weigh as much as the built-in table: 14 finished sweeps of 8 seeds give a cell of
the middle standings about 30-60 seeds (w about 0.4-0.5); 500 sweeps, w above 0.95."""

MAX_POINTS = 200
"""Steps of a run at which samples are taken: every step up to 200 steps, beyond that 200 evenly spaced ones."""

History = Sequence[Mapping[Hashable, Sequence[tuple[int, float]]]]


@dataclass(frozen=True)
class DriftTable:
    """Quantiles of z per (fraction, standing) cell: ``knots[f_cell][u_cell]`` at ``drift_table.PROBS``; ``source``
    says where it came from, ``sweeps`` how many finished sweeps it learned from (0: the built-in table)."""

    knots: np.ndarray
    source: str
    sweeps: int = 0

    def at(self, fraction: float, standing: float) -> np.ndarray:
        f_cell = int(np.searchsorted(_F_EDGES, fraction, side="right"))
        return self.knots[f_cell, int(np.searchsorted(_U_EDGES, standing, side="right"))]


_F_EDGES = np.asarray(drift_table.F_EDGES)
_U_EDGES = np.asarray(drift_table.U_EDGES)
_PROBS = np.asarray(drift_table.PROBS)
BUILTIN = DriftTable(np.asarray(drift_table.TABLE, dtype=float), "built-in prior")


def horizon(sweep: Mapping[Hashable, Sequence[tuple[int, float]]]) -> int:
    """The sweep's planned last step: the largest last step at least two runs reached (the largest, for one run)."""
    lasts = sorted((int(curve[-1][0]) for curve in sweep.values() if curve), reverse=True)
    if not lasts:
        return 0
    return next((a for a, b in zip(lasts, lasts[1:]) if a == b), lasts[0]) if len(lasts) > 1 else lasts[0]


def _run_arrays(curve: Sequence[tuple[int, float]], sign: float, end: int) -> tuple[np.ndarray, np.ndarray]:
    points = sorted((int(s), sign * float(v)) for s, v in curve if int(s) <= end and math.isfinite(float(v)))
    steps = np.fromiter((s for s, _ in points), dtype=float, count=len(points))
    return steps, np.fromiter((v for _, v in points), dtype=float, count=len(points))


def _sweep_samples(sweep, sign: float) -> list[tuple[np.ndarray, int]]:
    """(rows (fraction, standing, z), the run's index) of every seed of one sweep that reached its horizon."""
    end = horizon(sweep)
    if end < 4:
        return []
    window = max(1, math.ceil(0.1 * end))
    runs = [_run_arrays(curve, sign, end) for curve in sweep.values()]
    runs = [(s, v) for s, v in runs if len(s) >= 2]
    finished = [i for i, (s, _) in enumerate(runs) if s[-1] >= end]
    if len(finished) < 2:
        return []
    finals = {i: float(runs[i][1][-window:].mean()) for i in finished}
    # the final's own noise, sd / sqrt(window) (the sd from successive differences): what it says of the worth
    final_se = {i: math.sqrt(float(np.sum(np.diff(runs[i][1]) ** 2)) / (2.0 * (len(runs[i][1]) - 1)) / window)
                for i in finished}
    grid = np.unique(np.linspace(max(2, math.ceil(0.1 * end)), end - 1, num=min(MAX_POINTS, end)).round())
    sums = [(np.concatenate([[0.0], np.cumsum(v)]), np.concatenate([[0.0, 0.0], np.cumsum(np.diff(v) ** 2)]))
            for _, v in runs]
    rows: dict[int, list] = {i: [] for i in finished}
    for t in grid:
        levels, noises = np.full(len(runs), np.nan), np.zeros(len(runs))
        for i, (steps, _) in enumerate(runs):
            k = int(np.searchsorted(steps, t, side="right"))  # the points logged by step t
            if k >= 2:
                csum, d2 = sums[i]
                lo = max(0, k - window)
                levels[i] = (csum[k] - csum[lo]) / (k - lo)
                noises[i] = math.sqrt(d2[k] / (2.0 * (k - 1)))
        present = ~np.isnan(levels)
        live = [i for i in finished if present[i]]
        if len(live) < 2:
            continue
        spread, median = float(np.std(levels[present])), float(np.median(levels[present]))
        drifts = {i: finals[i] - levels[i] for i in live}
        middle = float(np.median(list(drifts.values())))
        for i in live:
            scale = max(math.sqrt(noises[i] ** 2 / window + spread ** 2), 1e-9)
            rows[i].append((t / end, (levels[i] - median) / scale, (drifts[i] - middle) / scale,
                            final_se[i] / scale))
    return [(np.asarray(r), i) for i, r in rows.items() if r]


def samples(history: History, sign: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Rows (fraction, standing, z, h) of every finished seed of every sweep in ``history`` (values times ``sign``:
    +1 when larger is better, -1 when smaller is), h the seed's final's standard error over the row's scale, and
    each row's seed number (distinct per sweep and run)."""
    rows, seeds, seed = [], [], 0
    for sweep in history:
        for block, _ in _sweep_samples(sweep, sign):
            rows.append(block)
            seeds.append(np.full(len(block), seed))
            seed += 1
    if not rows:
        return np.zeros((0, 4)), np.zeros(0, dtype=int)
    return np.concatenate(rows), np.concatenate(seeds)


def _mixed_knots(z: np.ndarray, weight: float, prior: np.ndarray) -> np.ndarray:
    """The knots at ``PROBS`` of F = weight * (the empirical CDF of z) + (1 - weight) * (the prior's CDF, linear
    between its knots)."""
    grid = np.unique(np.concatenate([prior, np.quantile(z, np.linspace(0.0, 1.0, 201))]))
    mixed = weight * np.searchsorted(np.sort(z), grid, side="right") / len(z) + (1.0 - weight) * np.interp(
        grid, prior, _PROBS, left=0.0, right=1.0)
    mixed = np.maximum.accumulate(mixed + np.arange(len(grid)) * 1e-12)  # strictly increasing for the inversion
    return np.interp(_PROBS, mixed, grid)


_NORMAL_Q = np.asarray([statistics.NormalDist().inv_cdf((k + 0.5) / 8) for k in range(8)])


def _worth_z(z: np.ndarray, h: np.ndarray) -> np.ndarray:
    """The z of the worth rather than of the recorded final: worth = final - e, e ~ N(0, se^2) the final's noise, so
    each sample z is spread over z + h q_k at the 8 normal quantiles q_k = Phi^-1((k + 1/2) / 8) (a deterministic
    convolution with N(0, h^2)). Without it a history's seeds near their end look as if they could not move (their
    level is their final), and bayes stops seeds late on a worth the finals do not pin down."""
    return (z[:, None] + h[:, None] * _NORMAL_Q[None, :]).ravel()


def _learn(history: History, sign: float, prior: DriftTable, strength: float) -> DriftTable:
    rows, seeds = samples(history, sign)
    knots = prior.knots.copy()
    if len(rows):
        f_cell = np.searchsorted(_F_EDGES, rows[:, 0], side="right")
        u_cell = np.searchsorted(_U_EDGES, rows[:, 1], side="right")
        for i in range(knots.shape[0]):
            for j in range(knots.shape[1]):
                cell = (f_cell == i) & (u_cell == j)
                n = len(np.unique(seeds[cell]))
                if n:
                    knots[i, j] = _mixed_knots(_worth_z(rows[cell, 2], rows[cell, 3]), n / (n + strength),
                                               prior.knots[i, j])
    used = sum(1 for sweep in history if _sweep_samples_any(sweep))
    source = (f"prior from {used} finished sweep{'s' if used != 1 else ''} of this project" if used
              else prior.source)
    return DriftTable(knots, source, used)


def _sweep_samples_any(sweep) -> bool:
    end = horizon(sweep)
    return end >= 4 and sum(1 for curve in sweep.values() if curve and int(curve[-1][0]) >= end) >= 2


_CACHE: "OrderedDict[tuple, DriftTable]" = OrderedDict()


def history_key(history: History) -> tuple:
    """What identifies a history for the caches: every run's id, length and last point."""
    return tuple(tuple((str(r), len(c), tuple(c[-1]) if c else None) for r, c in sweep.items()) for sweep in history)


def learn(history: Optional[History], sign: float = 1.0, prior: DriftTable = BUILTIN,
          strength: float = STRENGTH) -> DriftTable:
    """The drift table learned from ``history`` (see the module's docstring); the built-in one when it has no
    finished sweep. The last few tables are kept, keyed by every run's length and last point, so replays that
    share one history learn it once."""
    if not history:
        return prior
    key = (sign, id(prior), strength, history_key(history))
    table = _CACHE.get(key)
    if table is None:
        table = _CACHE[key] = _learn(history, sign, prior, strength)
        while len(_CACHE) > 8:
            _CACHE.popitem(last=False)
    _CACHE.move_to_end(key)
    return table
