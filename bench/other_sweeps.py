"""A second synthetic corpus whose curves are unlike bench/synthetic_sweeps.py's: other shapes, lengths, seed counts
and noise, every seed with a known noise-free worth (the ``bayes`` policy is judged on it, never tuned on it).

A sweep is one config run with n seeds (n drawn from 4, 6, 8, 12, 16) for T steps (T from 30, 50, 100, 150).
Each seed's expected curve mu(t) in [0, 1] is one of these kinds (rates per seed, fixed in the README's
early-stopping section before any policy was tuned on this corpus):

========== ====== ==================================================================================================
kind        rate   expected curve
========== ====== ==================================================================================================
sigmoid     30 %   logistic rise from ``start`` to the seed's level, centred at 15-50 % of the run, width 3-12 %
power       20 %   power law: level - (level - start) (1 + t / t_s)**(-alpha), t_s 2-20 % of T, alpha 0.5-1.5
overopt     15 %   reward over-optimization: saturating (tau 10-30 % of T), then from 40-80 % of the run a linear
                   decline by 0.05-0.25 by its end
jump        10 %   grokking-like: saturating 0.15-0.35 below its level, then at 30-80 % of the run a rise to its
                   level within 2 % of the run
dip         10 %   saturating, then at 20-60 % of the run a drop by 0.1-0.3 that recovers over 10-20 % of the run
flat        10 %   learns nothing: ``start`` plus a drift of -0.03 to +0.03 over the run
linear       5 %   a straight rise from ``start`` to its level at the run's end
========== ====== ==================================================================================================

Every seed's observed point is x_t = mu(t) + a_t + e_t, clipped to [0, 1]: a_t an AR(1) wander (phi 0.5-0.95 per
seed, sd 0-0.03 per sweep), e_t a batch's noise with the sd of a mean of B Bernoulli rewards, sqrt(mu (1 - mu) / B),
B from 16, 32, 64, 128, 256 per sweep, drawn normal or (in a third of the sweeps) from a Student t with 3 degrees of
freedom scaled to that sd (heavy tails); per step a 2 % chance of an outlier batch (uniform on [0, 1]). A seed's
**worth** is the mean of mu(t) over the run's last 10 % of steps.

Seeds' levels: the sweep's level b ~ U(0.2, 0.9) plus N(0, sd_seed) per seed, sd_seed ~ U(0, 0.1) per sweep;
start ~ U(0, 0.3) per seed.

Generator seeds: 11 and 12 (history and test: disjoint); any other seed gives other sweeps of the same kinds.
"""
from __future__ import annotations

import math

import numpy as np

import synthetic_sweeps
from synthetic_sweeps import SyntheticSweep, continue_run, continued_noise, generate, record

__all__ = ["KINDS", "RATES", "other_sweeps", "HISTORY_SEED", "TEST_SEED"]

KINDS = ("sigmoid", "power", "overopt", "jump", "dip", "flat", "linear")
RATES = (0.30, 0.20, 0.15, 0.10, 0.10, 0.10, 0.05)
HISTORY_SEED = 11
TEST_SEED = 12
SEED_COUNTS = (4, 6, 8, 12, 16)
LENGTHS = (30, 50, 100, 150)
BATCHES = (16, 32, 64, 128, 256)


def _saturating(t: np.ndarray, start: float, level: float, tau: float) -> np.ndarray:
    return start + (level - start) * (1.0 - np.exp(-t / tau))


def _expected(rng: np.random.Generator, kind: str, t: np.ndarray, steps: int, start: float,
              level: float) -> np.ndarray:
    """mu(t) of one seed of ``kind`` (see the module's table)."""
    tau = rng.uniform(0.1, 0.3) * steps
    if kind == "sigmoid":
        centre, width = rng.uniform(0.15, 0.5) * steps, rng.uniform(0.03, 0.12) * steps
        return start + (level - start) / (1.0 + np.exp(-(t - centre) / width))
    if kind == "power":
        t_s, alpha = rng.uniform(0.02, 0.2) * steps, rng.uniform(0.5, 1.5)
        return level - (level - start) * (1.0 + t / t_s) ** (-alpha)
    if kind == "overopt":
        at, by = rng.uniform(0.4, 0.8) * steps, rng.uniform(0.05, 0.25)
        return _saturating(t, start, level, tau) - by * np.maximum(t - at, 0.0) / (steps - at)
    if kind == "jump":
        low, at = max(start, level - rng.uniform(0.15, 0.35)), rng.uniform(0.3, 0.8) * steps
        rise = np.clip((t - at) / (0.02 * steps), 0.0, 1.0)
        return _saturating(t, start, low, tau) + (level - low) * rise
    if kind == "dip":
        at, drop, over = rng.uniform(0.2, 0.6) * steps, rng.uniform(0.1, 0.3), rng.uniform(0.1, 0.2) * steps
        hole = np.where(t < at, 0.0, drop * np.clip(1.0 - (t - at) / over, 0.0, 1.0))
        return _saturating(t, start, level, tau) - hole
    if kind == "flat":
        return start + rng.uniform(-0.03, 0.03) * t / steps
    return start + (level - start) * t / steps  # linear


def _sweep(rng: np.random.Generator, index: int) -> SyntheticSweep:
    steps, n_seeds = int(rng.choice(LENGTHS)), int(rng.choice(SEED_COUNTS))
    t = np.arange(1, steps + 1, dtype=float)
    b, sd_seed, sd_ar = rng.uniform(0.2, 0.9), rng.uniform(0.0, 0.1), rng.uniform(0.0, 0.03)
    batch, heavy = int(rng.choice(BATCHES)), rng.random() < 1 / 3
    window = max(1, math.ceil(0.1 * steps))
    sweep, longer = SyntheticSweep({}, {}, {}, name=f"other-{index}"), synthetic_sweeps.CONTINUE
    for i in range(n_seeds):
        kind = KINDS[int(rng.choice(len(KINDS), p=RATES))]
        start = rng.uniform(0.0, 0.3)
        level = float(np.clip(b + rng.normal(0.0, sd_seed), 0.05, 0.98))
        mu_all = np.clip(_expected(rng, kind, np.arange(1, longer * steps + 1, dtype=float), steps, start, level),
                         0.0, 1.0)
        mu = mu_all[:steps]
        phi = rng.uniform(0.5, 0.95)
        ar = np.empty(steps)
        ar[0] = rng.normal(0.0, sd_ar) if sd_ar else 0.0
        shocks = rng.normal(0.0, 1.0, steps) * sd_ar * math.sqrt(1.0 - phi * phi)
        for k in range(1, steps):
            ar[k] = phi * ar[k - 1] + shocks[k]
        eps = rng.standard_t(3, steps) / math.sqrt(3.0) if heavy else rng.normal(0.0, 1.0, steps)
        x = mu + ar + eps * np.sqrt(mu * (1.0 - mu) / batch)
        x = np.where(rng.random(steps) < 0.02, rng.random(steps), x)
        record((sweep, sweep.worth, sweep.kinds), f"seed-{i}", t, np.clip(x, 0.0, 1.0), mu, window, kind)
        if longer > 1:
            ext = np.random.default_rng([index, i, int(level * 1e9), int(phi * 1e9), 11])
            extra = continued_noise(ext, mu_all[steps:], ar[-1], phi, sd_ar, batch)
            continue_run(sweep, f"seed-{i}", mu_all, np.where(ext.random(extra.size) < 0.02, ext.random(extra.size),
                                                              extra))
    return sweep


def other_sweeps(seed: int, n_sweeps: int) -> list[SyntheticSweep]:
    """``n_sweeps`` sweeps from generator seed ``seed`` (``synthetic_sweeps.generate``)."""
    return generate(_sweep, seed, n_sweeps)
