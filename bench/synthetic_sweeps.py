"""Synthetic seed sweeps whose every seed has a known noise-free worth (the ``bayes`` policy's calibration corpus).

A sweep is one config run with 8 seeds for T steps (T drawn from 40, 60, 80). The seeds share the sweep's curve
(start, level, time constant, noise level) and differ by their own level, their kind, and their noise. Each seed's
expected curve mu(t) in [0, 1] is one of these kinds (rates per seed, fixed in the README's early-stopping section
before the policy was tuned):

========== ====== ==================================================================================================
kind        rate   expected curve
========== ====== ==================================================================================================
normal      55 %   start + (level - start) (1 - exp(-t / tau)): saturating
plateau     10 %   the same, saturating 0.1-0.3 below the seed's level
late        10 %   late bloomer: flat at ``start`` until 30-60 % of the run, then rising (tau 0.1 T) to its level
                   (+0 to +0.05)
collapse    10 %   late collapse: normal until 50-90 % of the run, then decaying (scale 0.03 T) to 0-0.2
cliff       10 %   normal until 30-90 % of the run, then 0.1-0.3 lower from one step to the next, for good
wander       5 %   normal, with autocorrelated noise twice as strong and slower (phi 0.97-0.99)
========== ====== ==================================================================================================

Every seed's observed point is x_t = mu(t) + a_t + e_t, clipped to [0, 1]: a_t autocorrelated noise
(AR(1), a_t = phi a_(t-1) + sqrt(1 - phi**2) sd_ar eps_t, phi 0.85-0.97 per seed, sd_ar 0.01-0.04 per sweep: a curve
that wanders slowly around its trend), e_t a batch's noise (normal with the sd of a mean of 64 Bernoulli rewards,
sqrt(mu (1 - mu) / 64)), and per step a 3 % chance of a reward spike (+0.1 to +0.3) and a 3 % chance of a bad batch
(x 0.3). A seed's **worth** is the mean of mu(t) over the run's last 10 % of steps: what its final would be
without noise, the number a near-best seed is judged by.

Seeds' levels: the sweep's level b ~ U(0.45, 0.8) plus N(0, sd_seed) per seed with sd_seed ~ U(0.01, 0.08) per
sweep (from seeds that end alike to seeds clearly apart); start ~ U(0.05, 0.2); tau = tau_0 T x U(0.8, 1.25) with
tau_0 ~ U(0.1, 0.35) per sweep.

Generator seeds: 1 is the tuning corpus (``bench/calibrate_bayes.py`` learns the drift table on it), 2 the test
corpus (``bench/early_stopping.py`` reports on it); they never mix.
"""
from __future__ import annotations

import math
from typing import Hashable

import numpy as np

__all__ = ["KINDS", "RATES", "SyntheticSweep", "synthetic_sweeps", "TUNE_SEED", "TEST_SEED", "CONTINUE"]

KINDS = ("normal", "plateau", "late", "collapse", "cliff", "wander")
RATES = (0.55, 0.10, 0.10, 0.10, 0.10, 0.05)
TUNE_SEED = 1
TEST_SEED = 2
N_SEEDS = 8
CONTINUE = 1
"""Curves run to CONTINUE x T steps (``SyntheticSweep.beyond``, ``mu``; the budget table's extended survivors):
mu(t) past T by the same formula (a saturating seed keeps approaching its level, a collapse or cliff has already
happened by 0.9 T), the noise continued from its own generator, so the first T steps are the same whatever it is."""
LENGTHS = (40, 60, 80)


class SyntheticSweep(dict):
    """run -> [(step, value), ...] for steps 1..T, plus ``worth`` (run -> noise-free worth), ``kinds`` (run ->
    kind) and ``name``."""

    def __init__(self, curves: dict, worth: dict, kinds: dict, name: str = ""):
        super().__init__(curves)
        self.worth: dict[Hashable, float] = worth
        self.kinds: dict[Hashable, str] = kinds
        self.name = name
        self.beyond: dict[Hashable, list] = {}
        """run -> its points past step T (when generated with ``CONTINUE`` > 1): the same seed trained longer."""
        self.mu: dict[Hashable, np.ndarray] = {}
        """run -> mu(t) for t = 1 .. CONTINUE T (with ``beyond``)."""

    def worth_at(self, run: Hashable, steps: int) -> float:
        """The noise-free worth of ``run`` trained for ``steps`` steps: the mean of mu over its last 10 % of
        them (``worth[run]`` at T; an extended survivor is judged at its extended end, as its observed final).

        Needs its continuation (``CONTINUE`` > 1) for any ``steps`` but T."""
        if steps == len(self[run]):
            return self.worth[run]
        window = max(1, math.ceil(0.1 * steps))
        return float(self.mu[run][max(0, steps - window):steps].mean())


def _expected(rng: np.random.Generator, kind: str, t: np.ndarray, steps: int, start: float, level: float,
              tau: float) -> np.ndarray:
    """mu(t) of one seed of ``kind`` (see the module's table)."""
    base = start + (level - start) * (1.0 - np.exp(-t / tau))
    if kind == "plateau":
        low = max(start, level - rng.uniform(0.1, 0.3))
        return start + (low - start) * (1.0 - np.exp(-t / tau))
    if kind == "late":
        bloom, top = rng.uniform(0.3, 0.6) * steps, min(0.97, level + rng.uniform(0.0, 0.05))
        rise = start + (top - start) * (1.0 - np.exp(-np.maximum(t - bloom, 0.0) / (0.1 * steps)))
        return np.where(t < bloom, start, rise)
    if kind == "collapse":
        at, to = rng.uniform(0.5, 0.9) * steps, rng.uniform(0.0, 0.2)
        return np.where(t < at, base, to + (base - to) * np.exp(-np.maximum(t - at, 0.0) / (0.03 * steps)))
    if kind == "cliff":
        at, drop = rng.uniform(0.3, 0.9) * steps, rng.uniform(0.1, 0.3)
        return np.where(t < at, base, np.maximum(base - drop, 0.0))
    return base


def _sweep(rng: np.random.Generator, index: int) -> SyntheticSweep:
    steps = int(rng.choice(LENGTHS))
    t = np.arange(1, steps + 1, dtype=float)
    b, sd_seed = rng.uniform(0.45, 0.8), rng.uniform(0.01, 0.08)
    tau_0, sd_ar = rng.uniform(0.1, 0.35), rng.uniform(0.01, 0.04)
    window = max(1, math.ceil(0.1 * steps))
    sweep = SyntheticSweep({}, {}, {}, name=f"synthetic-{index}")
    for i in range(N_SEEDS):
        kind = KINDS[int(rng.choice(len(KINDS), p=RATES))]
        start = rng.uniform(0.05, 0.2)
        level = float(np.clip(b + rng.normal(0.0, sd_seed), 0.25, 0.95))
        tau = tau_0 * steps * rng.uniform(0.8, 1.25)
        mu_all = np.clip(_expected(rng, kind, np.arange(1, CONTINUE * steps + 1, dtype=float), steps, start, level,
                                   tau), 0.0, 1.0)
        mu = mu_all[:steps]
        phi = rng.uniform(0.97, 0.99) if kind == "wander" else rng.uniform(0.85, 0.97)
        sd = 2.0 * sd_ar if kind == "wander" else sd_ar
        shocks = rng.normal(0.0, 1.0, steps) * sd * math.sqrt(1.0 - phi * phi)
        ar = np.empty(steps)
        ar[0] = rng.normal(0.0, sd)
        for k in range(1, steps):
            ar[k] = phi * ar[k - 1] + shocks[k]
        x = mu + ar + rng.normal(0.0, 1.0, steps) * np.sqrt(mu * (1.0 - mu) / 64.0)
        x = x + (rng.random(steps) < 0.03) * rng.uniform(0.1, 0.3, steps)
        x = np.where(rng.random(steps) < 0.03, 0.3 * x, x)
        record((sweep, sweep.worth, sweep.kinds), f"seed-{i}", t, np.clip(x, 0.0, 1.0), mu, window, kind)
        if CONTINUE > 1:
            ext = np.random.default_rng([index, i, int(level * 1e9), int(phi * 1e9)])
            extra = continued_noise(ext, mu_all[steps:], ar[-1], phi, sd, 64)
            extra = extra + (ext.random(extra.size) < 0.03) * ext.uniform(0.1, 0.3, extra.size)
            extra = np.where(ext.random(extra.size) < 0.03, 0.3 * extra, extra)
            continue_run(sweep, f"seed-{i}", mu_all, extra)
    return sweep


def continued_noise(rng: np.random.Generator, mu: np.ndarray, ar_last: float, phi: float, sd: float,
                    batch: int) -> np.ndarray:
    """mu + the AR(1) wander continued from ``ar_last`` + a batch's noise, for the steps past T."""
    ar, out = ar_last, np.empty(mu.size)
    for k in range(mu.size):
        ar = phi * ar + rng.normal(0.0, 1.0) * sd * math.sqrt(1.0 - phi * phi)
        out[k] = ar
    return mu + out + rng.normal(0.0, 1.0, mu.size) * np.sqrt(mu * (1.0 - mu) / batch)


def continue_run(sweep: SyntheticSweep, run: str, mu_all: np.ndarray, extra: np.ndarray) -> None:
    """Store a run's continuation past T: its observed points (clipped, 4 places) and mu over every step."""
    steps = len(sweep[run])
    sweep.mu[run] = mu_all
    sweep.beyond[run] = [(steps + 1 + k, round(float(v), 4)) for k, v in enumerate(np.clip(extra, 0.0, 1.0))]


def record(into: tuple[dict, dict, dict], run: str, t: np.ndarray, x: np.ndarray, mu: np.ndarray, window: int,
           kind: str) -> None:
    """One seed into (curves, worth, kinds): its points (step, value to 4 places), its worth (the mean of mu over
    its last ``window`` steps) and its kind."""
    curves, worth, kinds = into
    curves[run] = [(int(step), round(float(v), 4)) for step, v in zip(t, x)]
    worth[run] = float(mu[-window:].mean())
    kinds[run] = kind


def generate(make_sweep, seed: int, n_sweeps: int) -> list[SyntheticSweep]:
    """``n_sweeps`` sweeps of ``make_sweep(rng, index)`` from generator seed ``seed`` (the same seed gives the same
    sweeps; a sweep does not depend on how many come after it)."""
    rng = np.random.default_rng(seed)
    return [make_sweep(rng, k) for k in range(n_sweeps)]


def synthetic_sweeps(seed: int, n_sweeps: int) -> list[SyntheticSweep]:
    """``n_sweeps`` sweeps from generator seed ``seed`` (``generate``)."""
    return generate(_sweep, seed, n_sweeps)
