"""The ``bayes`` policy's risk level learned from the project's finished sweeps (policies/history_risk.py): the
conformal threshold over replays of the complete sweeps, and what a policy with it does."""
from __future__ import annotations

import random

from webapp.sweeps.policies import history_risk, make_policy, replay, risk_map
from webapp.sweeps.policies.history_risk import RiskFit

STEPS = 30
CONFIG = {"name": "bayes", "metric": "reward/mean", "mode": "max", "max_steps": STEPS, "risk": 0.2}


def steady(rng: random.Random, n_seeds: int = 6) -> dict:
    """Seeds whose order at the start is their order at the end (each a level plus noise)."""
    levels = [0.2 + 0.1 * k + rng.uniform(-0.02, 0.02) for k in range(n_seeds)]
    return {k: [(s, levels[k] + rng.gauss(0.0, 0.02)) for s in range(1, STEPS + 1)] for k in range(n_seeds)}


def late_bloomer(rng: random.Random, n_seeds: int = 6) -> dict:
    """One seed, any of them, flat at its level for two thirds of the run and then the best by far."""
    curves = steady(rng, n_seeds)
    k = rng.randrange(n_seeds)
    curves[k] = [(s, v if s <= 2 * STEPS // 3 else 1.5 + rng.gauss(0.0, 0.02)) for s, v in curves[k]]
    return curves


def history(make, n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    return [make(rng) for _ in range(n)]


def test_the_level_is_the_conformal_threshold_of_the_replays():
    past = history(steady, 24)
    fit = history_risk.fit(past, CONFIG, replay)
    assert fit.n == 24 and fit.risk == 0.2
    levels = [level for level, _ in fit.lost]
    assert levels == list(history_risk.GRID[:len(levels)])
    # recompute two levels' losses by hand: each sweep replayed at that model loss with a prior from the other half
    halves = [[s for j, s in enumerate(past) if j % 2 != k] for k in range(2)]
    for level, lost in fit.lost[:1] + fit.lost[-1:]:
        with risk_map.uncalibrated():
            again = sum(history_risk.near_best(s, 0.02) <= set(replay({**CONFIG, "risk": level}, s,
                                                                      history=halves[j % 2]).stopped_at)
                        for j, s in enumerate(past))
        assert again == lost
    ok = [level for level, lost in fit.lost if (lost + 1) / 25 <= 0.2]
    assert fit.level(0.2) == max(ok) and fit.level(0.2) > risk_map.model_risk(0.2, learned=True)


def test_a_history_that_surprises_the_model_gives_a_lower_level():
    steady_fit = history_risk.fit(history(steady, 24), CONFIG, replay)
    surprising = history_risk.fit(history(late_bloomer, 24), CONFIG, replay)
    assert surprising.level(0.2) < steady_fit.level(0.2)
    assert sum(lost for _, lost in surprising.lost) > sum(lost for _, lost in steady_fit.lost)


def test_a_risk_smaller_than_the_history_can_promise_leaves_the_built_in_map():
    past = history(steady, 24)
    small = {**CONFIG, "risk": 0.03}  # one lost sweep in 25 is already 0.04
    fit = history_risk.fit(past, small, replay)
    assert fit is not None and fit.level(0.03) is None and len(fit.lost) == 1  # the walk stopped at its first level
    policy = make_policy(small, history=past)
    assert "on the tuning sweeps" in policy.describe()


def test_too_few_complete_sweeps_give_no_fit():
    past = history(steady, history_risk.MIN_SWEEPS - 1)
    assert history_risk.fit(past, CONFIG, replay) is None
    cut = history(steady, history_risk.MIN_SWEEPS + 5, seed=1)
    for sweep in cut[:6]:
        sweep[0] = sweep[0][:10]  # a seed stopped early: the sweep cannot say what it would have become
    assert not history_risk.complete(cut[0]) and history_risk.complete(cut[-1])
    assert history_risk.fit(cut, CONFIG, replay) is None  # 19 complete sweeps


def test_a_policy_learns_its_level_from_the_history_and_says_so():
    past = history(steady, 24)
    current = steady(random.Random(99))
    learned = replay(CONFIG, current, history=past)
    fit = history_risk.learn(past, CONFIG, replay)
    stops = [d for d in learned.decisions if d.action == "stop"]
    assert stops and all(d.details["model_risk"] == fit.level(0.2) for d in stops)
    assert all(d.details["risk_source"] == "the 24 complete finished sweeps of this project" for d in stops)
    assert "on the 24 complete finished sweeps of this project" in make_policy(CONFIG, history=past).describe()
    # given the built-in map instead (the live check before its fit is stored), the tuning sweeps' level
    builtin = make_policy(CONFIG, history=past, risk_fit=None)
    assert "on the tuning sweeps" in builtin.describe()


def test_a_fit_answers_for_every_risk_up_to_its_own():
    fit = RiskFit(((0.01, 0), (0.02, 0), (0.05, 4)), 30, 0.1)
    assert fit.level(0.1) == 0.02 and fit.level(0.05) == 0.02
    assert fit.level(0.03) is None  # 1/31 > 0.03
