"""The one-shot ``cut`` rule and the ``auto`` policy that chooses between it and ``bayes`` on the project's own
finished sweeps (policies/stopping_rules.py: cut_stops, policies/auto.py, policies/history_risk.py: RiskFit.choose)."""
from __future__ import annotations

import math
import random

import pytest

from training.fields import FieldErrors
from webapp.sweeps.policies import history_risk, make_policy, parse_config, replay, rule_list
from webapp.sweeps.policies.smoothing import debiased_ema

from .test_history_risk import STEPS, history, late_bloomer, steady

METRIC = "reward/mean"
AUTO = {"name": "auto", "metric": METRIC, "mode": "max", "max_steps": STEPS, "risk": 0.2}


def offline_cut(curves: dict, at: float, keep: float) -> set:
    """The cut by hand: every seed's debiased EMA (weight 0.8) at step ceil(at * T); the top round(keep * n) go on."""
    step = max(math.ceil(at * STEPS), 1)
    level = {r: debiased_ema([v for s, v in c if s <= step], 0.8)[-1] for r, c in curves.items()}
    ranked = sorted(curves, key=lambda r: -level[r])
    return set(ranked[max(1, round(keep * len(curves))):])


@pytest.mark.parametrize("at,keep", [(0.3, 0.375), (0.5, 0.5), (0.7, 0.25)])
def test_a_cut_with_every_seed_at_once_stops_the_seeds_outside_the_top_share_at_its_step(at, keep):
    curves = {k: [(s, 0.3 + 0.01 * ((k * 7) % 8) + random.Random(k).gauss(0, 0.03) * (s % 3)) for s in
                  range(1, STEPS + 1)] for k in range(8)}
    result = replay({"name": "cut", "metric": METRIC, "max_steps": STEPS, "at": at, "keep": keep}, curves)
    assert set(result.stopped_at) == offline_cut(curves, at, keep)
    assert set(result.stopped_at.values()) == {math.ceil(at * STEPS)}
    assert all(d.rule == "cut" and f"only the top {max(1, round(keep * 8))}" in d.reason for d in result.decisions)


def test_a_seed_that_reaches_the_cut_later_is_judged_against_every_value_recorded_there():
    curves = {k: [(s, 0.1 * k) for s in range(1, STEPS + 1)] for k in range(8)}  # seed k's level 0.1 k
    result = replay({"name": "cut", "metric": METRIC, "max_steps": STEPS, "at": 0.5, "keep": 0.5}, curves,
                    concurrency=4)
    # seeds 0-3 run first: the cut keeps 2 of their 4; then 4-7 arrive and each beats every recorded value
    assert set(result.stopped_at) == {0, 1}


@pytest.mark.parametrize("config,field,words", [
    ({"at": 1.0}, "at", "must lie"), ({"keep": 0}, "keep", "must lie"), ({"risk": 0.1}, "risk", "only bayes"),
    ({"at": 0.97}, "at", "must come before max_steps"),
])
def test_a_bad_cut_config_names_its_field(config, field, words):
    with pytest.raises(FieldErrors) as caught:
        parse_config({"name": "cut", "metric": METRIC, "max_steps": STEPS, **config})
    assert words in caught.value.errors[field], caught.value.errors


def test_the_rule_list_offers_both_from_the_one_registry():
    listed = {rule["name"]: rule for rule in rule_list()}
    assert {"cut", "auto"} <= set(listed)
    assert {p["name"] for p in listed["cut"]["params"]} >= {"at", "keep"}
    assert "risk" in {p["name"] for p in listed["auto"]["params"]}


def test_auto_without_a_history_is_bayes_and_says_so():
    current = steady(random.Random(5), 8)
    auto = replay({**AUTO}, current)
    bayes = replay({**AUTO, "name": "bayes"}, current)
    assert auto.stopped_at == bayes.stopped_at and auto.stopped_at
    assert "no choice learned" in make_policy(AUTO).describe()


def by_hand(past: list, risk: float) -> tuple:
    """The candidates replayed on ``past`` one by one, as the choice is defined: (rule, its keys) of the most saved
    with (lost + 1) / (n + 1) <= risk."""
    fit = history_risk.learn(past, AUTO, replay)  # (the fit the policy learned: its replays are recomputed by hand below)
    n, total = fit.n, sum(len(c) for s in past for c in s.values())
    options = []
    level = fit.level(risk)
    if level is not None:
        options.append((fit.saved[[lv for lv, _ in fit.lost].index(level)], ("bayes", level)))
    for at in history_risk.CUT_AT:
        for keep in history_risk.CUT_KEEP:
            runs = [replay({"name": "cut", "metric": METRIC, "mode": "max", "max_steps": STEPS, "at": at,
                            "keep": keep}, s) for s in past]
            lost = sum(history_risk.near_best(s, 0.02) <= set(r.stopped_at) for s, r in zip(past, runs))
            saved = sum(r.total_steps - sum(r.steps_run.values()) for r in runs) / total
            if (lost + 1) / (n + 1) <= risk:
                options.append((saved, ("cut", at, keep)))
    return max(options, key=lambda o: o[0])[1]


def test_on_steady_sweeps_auto_runs_the_cut_that_saved_most_within_the_risk_and_bayes_keeps_to_bayes():
    past = history(lambda rng: steady(rng, 8), 24)
    chosen = make_policy(AUTO, history=past)
    assert chosen.choice is not None and chosen.choice.rule == "cut"
    assert by_hand(past, 0.2) == ("cut", chosen.choice.at, chosen.choice.keep)
    assert chosen.choice.saved > 0.5  # the seeds' order never changes: an early, deep cut is safe
    current = steady(random.Random(77), 8)
    auto = replay(AUTO, current, history=past)
    cut = replay({"name": "cut", "metric": METRIC, "max_steps": STEPS, "at": chosen.choice.at,
                  "keep": chosen.choice.keep}, current)
    assert auto.stopped_at == cut.stopped_at and {d.rule for d in auto.decisions} == {"cut"}
    assert "auto on reward/mean (max) chose the cut at" in chosen.describe()
    # the rule a user picked is never swapped: bayes with the same history is bayes
    assert {d.rule for d in replay({**AUTO, "name": "bayes"}, current, history=past).decisions} == {"bayes"}


def test_on_late_bloomers_only_shallow_cuts_qualify_and_auto_saves_less():
    steady_fit = history_risk.fit(history(lambda rng: steady(rng, 8), 24), AUTO, replay)
    fit = history_risk.fit(history(lambda rng: late_bloomer(rng, 8), 24), AUTO, replay)
    qualifies = lambda f: {(at, keep) for at, keep, lost, _ in f.cuts if (lost + 1) / (f.n + 1) <= 0.2}
    # any seed may bloom after two thirds of the run: a cut before it that keeps half of them loses it half the time
    before = {(at, keep) for at, keep in qualifies(fit) if at * STEPS <= 2 * STEPS // 3}
    assert before and all(keep >= 0.75 for _, keep in before)
    assert any(keep <= 0.25 for _, keep in qualifies(steady_fit))
    assert fit.choose(0.2).saved < steady_fit.choose(0.2).saved
