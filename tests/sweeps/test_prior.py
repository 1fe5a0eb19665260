"""The ``bayes`` policy's prior learned from a project's finished sweeps (``policies.prior``): the built-in table
without history, a table moved toward what the history's curves did with it, seeds stopped early counted in the
standing but giving no samples, and ``make_policy(config, history=...)`` deciding on it and saying which it used."""
from __future__ import annotations

import numpy as np

from webapp.sweeps.policies import make_policy, prior, replay
from webapp.sweeps.policies.drift_table import PROBS

STEPS = 40


def sweep(rng, seeds=8, late_turn=False, stop_at=None):
    """Seeds whose early rank says nothing of their final (``late_turn``: until 65 % of the run each seed stands at
    a level of its own, drawn apart from its final one) or says everything (their level from step 1);
    ``stop_at``: the worst half stops there."""
    levels = rng.uniform(0.3, 0.7, seeds)
    early = rng.uniform(0.3, 0.7, seeds)
    out = {}
    for i, level in enumerate(levels):
        t = np.arange(1, STEPS + 1)
        if late_turn:
            mu = np.where(t < 0.65 * STEPS, early[i], level)
        else:
            mu = np.full(STEPS, level)
        x = mu + rng.normal(0, 0.01, STEPS)
        curve = [(int(s), float(v)) for s, v in zip(t, x)]
        if stop_at and level < np.median(levels):
            curve = curve[:stop_at]
        out[f"seed-{i}"] = curve
    return out


def test_no_history_is_the_built_in_table():
    assert prior.learn([]) is prior.BUILTIN and prior.learn(None) is prior.BUILTIN
    policy = make_policy({"name": "bayes", "metric": "m", "max_steps": STEPS})
    assert "built-in prior" in policy.describe()


def test_the_horizon_is_the_last_step_two_runs_reached():
    runs = {"a": [(s, 0.0) for s in range(1, 11)], "b": [(s, 0.0) for s in range(1, 11)],
            "c": [(s, 0.0) for s in range(1, 5)], "d": [(s, 0.0) for s in range(1, 16)]}  # c stopped, d extended
    assert prior.horizon(runs) == 10
    assert prior.horizon({"a": runs["a"]}) == 10


def test_a_history_of_late_turns_widens_the_low_standings_upper_tail_and_one_of_fixed_ranks_narrows_it():
    rng = np.random.default_rng(0)
    turning = prior.learn([sweep(rng, late_turn=True) for _ in range(40)])
    steady = prior.learn([sweep(rng) for _ in range(40)])
    assert turning.source == steady.source == "prior from 40 finished sweeps of this project"
    high = list(PROBS).index(0.95)
    low_standing = turning.at(0.4, -1.5)  # a seed well below the others at 40 % of its run
    assert low_standing[high] > prior.BUILTIN.at(0.4, -1.5)[high] > steady.at(0.4, -1.5)[high]
    assert np.all(np.diff(turning.knots, axis=-1) >= 0)  # every cell's knots are quantiles: non-decreasing


def test_seeds_stopped_early_count_in_the_standing_but_give_no_samples():
    rng = np.random.default_rng(1)
    history = [sweep(rng, stop_at=15) for _ in range(5)]
    rows, seeds = prior.samples(history)
    assert len(np.unique(seeds)) == 5 * 4  # the 4 seeds of each sweep that ran to its end
    full = [{run: curve for run, curve in s.items() if len(curve) == STEPS} for s in history]
    rows_without, _ = prior.samples(full)
    assert len(rows) == len(rows_without) and not np.allclose(rows[:, 1], rows_without[:, 1])  # other standings


def test_the_mixture_weighs_the_history_by_its_seeds():
    knots = np.asarray(prior.BUILTIN.at(0.5, 0.0))
    z = np.random.default_rng(2).normal(5.0, 0.1, 400)
    assert np.allclose(prior._mixed_knots(z, 0.0, knots), knots, atol=1e-6)
    assert abs(prior._mixed_knots(z, 1.0, knots)[PROBS.index(0.5)] - 5.0) < 0.05
    half = prior._mixed_knots(z, 0.5, knots)
    assert half[PROBS.index(0.2)] < 1.0 < 4.0 < half[PROBS.index(0.8)]  # half the mass each side


def test_what_a_history_says_of_early_ranks_is_what_the_policy_acts_on():
    rng = np.random.default_rng(3)
    config = {"name": "bayes", "metric": "m", "max_steps": STEPS, "risk": 0.1}
    steady = [sweep(rng) for _ in range(40)]
    turning = [sweep(rng, late_turn=True) for _ in range(40)]
    target = sweep(np.random.default_rng(99))
    saved = {name: sum(STEPS - n for n in replay(config, target, history=history).steps_run.values())
             for name, history in (("built-in", None), ("steady", steady))}
    assert saved["steady"] > saved["built-in"], saved  # early ranks that hold: it stops sooner
    turned = [sweep(np.random.default_rng(100 + k), late_turn=True) for k in range(10)]
    early, kept = {}, {}
    for name, history in (("steady", steady), ("turning", turning)):
        results = [(replay(config, t, history=history), t) for t in turned]
        early[name] = sum(step < 0.65 * STEPS for result, _ in results for step in result.stopped_at.values())
        finals = [{run: np.mean([v for _, v in curve[-4:]]) for run, curve in t.items()} for _, t in results]
        kept[name] = sum(max(f, key=f.get) not in result.stopped_at for (result, _), f in zip(results, finals))
    # sweeps whose early ranks say nothing: a prior that learned that stops fewer seeds before the turn, and keeps
    # the best seed more often, than one that learned ranks hold
    assert early["turning"] < early["steady"] and kept["turning"] > kept["steady"], (early, kept)
    assert "prior from 40 finished sweeps" in make_policy(config, history=steady).describe()
    stops = replay(config, target, history=steady).decisions
    assert stops and all(d.details["prior"] == "prior from 40 finished sweeps of this project" for d in stops)


def test_a_learned_table_near_the_end_keeps_the_finals_own_noise():
    """Near its end a seed's level is its final, so the drift to the final is about 0; the worth (the final without
    noise) still differs from it by the final's noise, and the learned table keeps that spread: at 90-95 % of the
    run its 5 %-95 % width (the history's alone: no built-in weight) is at least 2 x 1.645 x (the final's standard
    error over the scale), the spread of the worth around the final (before: 0.80 against 0.92)."""
    rng = np.random.default_rng(5)
    noise, seeds = 0.05, 6
    history = []
    for _ in range(60):
        levels = 0.3 + 0.05 * np.arange(seeds)
        history.append({k: [(s, float(levels[k] + rng.normal(0, noise))) for s in range(1, STEPS + 1)]
                        for k in range(seeds)})
    table = prior.learn(history, strength=1e-9)
    lo, hi = PROBS.index(0.05), PROBS.index(0.95)
    scale = np.sqrt(noise ** 2 / 4 + np.std(0.05 * np.arange(seeds)) ** 2)  # (window 4 of 40 steps)
    floor = 2 * 1.645 * (noise / 2) / scale  # the final's se: sd / sqrt(4)
    knots = table.at(0.97, 0.0)
    assert knots[hi] - knots[lo] >= floor
