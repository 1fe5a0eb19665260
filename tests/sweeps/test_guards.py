"""Health guards: per-run stop rules on entropy, truncation, zero-variance groups and reward drops that
compose with any ranking policy. Pure Python: the policies' own objects, no database (the database path is in
test_policy_check.py's random sweeps and test_guard_sweep below)."""
from __future__ import annotations

import pytest

from training.fields import FieldErrors
from webapp.sweeps.policies import STOP, make_policy, replay, stored_config
from webapp.sweeps.policies.guards import GuardFold, GuardParams, parse_guards

MAX = 40


def feed(policy, series: dict, steps=range(1, MAX + 1)):
    """Feed {run: {metric: f(step)}} step by step, deciding after each step; returns every decision."""
    decisions = []
    for step in steps:
        for run_id, metrics in series.items():
            for metric, f in metrics.items():
                policy.observe(run_id, step, f(step), metric)
        decisions += policy.decide()
    return decisions


def healthy(step):
    return 0.8


@pytest.mark.parametrize("kind,metric,bad,reason", [
    ("entropy_collapse", "entropy", lambda s: 0.01 if s >= 12 else 0.7, "has stopped exploring"),
    ("length_at_cap", "length/clipped_frac", lambda s: 1.0 if s >= 12 else 0.1, "cut at max_new_tokens"),
    ("zero_std", "frac_zero_std_groups", lambda s: 1.0 if s >= 12 else 0.3, "no learning signal"),
    ("reward_drop", "reward/mean", lambda s: 0.7 if s < 12 else 0.1, "below its best"),
])
def test_each_guard_stops_the_broken_run_alone_with_its_own_reason(kind, metric, bad, reason):
    policy = make_policy({"name": "manual", "max_steps": MAX, "guards": [{"kind": kind, "for_steps": 5}]})
    decisions = feed(policy, {"broken": {metric: bad}, "fine": {metric: (lambda s: 0.5) if kind != "zero_std"
                                                               and kind != "length_at_cap" else (lambda s: 0.1)}})
    assert [(d.run_id, d.action, d.rule) for d in decisions] == [("broken", STOP, f"guard:{kind}")]
    d = decisions[0]
    assert reason in d.reason and f"guard {kind}" in d.reason
    # the breach starts once the smoothed value crosses (a step or two after the raw one), and must hold 5 steps
    assert d.details["breach_from"] >= 12 and d.step == d.details["breach_from"] + 4
    assert d.details["metric"] == metric


def test_a_breach_shorter_than_for_steps_never_stops_a_run():
    policy = make_policy({"name": "manual", "max_steps": MAX,
                          "guards": [{"kind": "entropy_collapse", "below": 0.1, "for_steps": 6, "smoothing_weight": 0}]})
    blip = lambda s: 0.01 if s % 10 in (1, 2, 3, 4, 5) else 0.5  # 5 bad steps in a row, then recovery
    assert feed(policy, {"a": {"entropy": blip}}) == []
    policy = make_policy({"name": "manual", "max_steps": MAX,
                          "guards": [{"kind": "entropy_collapse", "below": 0.1, "for_steps": 5, "smoothing_weight": 0}]})
    assert [d.step for d in feed(policy, {"a": {"entropy": blip}})] == [15]  # the 11..15 breach, past grace 8


def test_guards_wait_for_the_grace_period_and_never_judge_the_final_step():
    config = {"name": "manual", "max_steps": MAX, "grace_steps": 20,
              "guards": [{"kind": "zero_std", "for_steps": 2, "smoothing_weight": 0}]}
    decisions = feed(make_policy(config), {"a": {"frac_zero_std_groups": lambda s: 1.0}})
    assert [d.step for d in decisions] == [20]
    late = feed(make_policy(config), {"a": {"frac_zero_std_groups": lambda s: 1.0 if s >= MAX - 1 else 0.0}})
    assert late == []  # breached for 2 steps only at the final step: stopping then saves nothing


def test_guards_compose_with_a_ranking_policy_each_run_stopped_once_by_whichever_acts_first():
    config = {"name": "median", "metric": "reward/mean", "max_steps": MAX, "grace_steps": 5, "min_peers": 2,
              "min_delta": 0.05, "guards": [{"kind": "entropy_collapse", "below": 0.1, "for_steps": 3}]}
    policy = make_policy(config)
    series = {
        "collapsed-but-top": {"reward/mean": lambda s: 0.9, "entropy": lambda s: 0.0 if s >= 6 else 0.8},
        "good": {"reward/mean": lambda s: 0.8, "entropy": lambda s: 0.6},
        "also-good": {"reward/mean": lambda s: 0.8, "entropy": lambda s: 0.6},
        "good-too": {"reward/mean": lambda s: 0.8, "entropy": lambda s: 0.6},
        "poor": {"reward/mean": lambda s: 0.2, "entropy": lambda s: 0.6},
    }
    decisions = feed(policy, series)
    by_run = {d.run_id: d for d in decisions}
    assert len(decisions) == len(by_run)  # at most one stop per run
    assert by_run["collapsed-but-top"].rule == "guard:entropy_collapse"  # the ranking alone would keep the leader
    assert by_run["poor"].rule == "median"
    assert not {"good", "also-good", "good-too"} & set(by_run)
    assert "guards: entropy_collapse (entropy < 0.1 for 3 steps)" in policy.describe()
    assert policy.metrics() == ["reward/mean", "entropy"] and policy.reads_curves


def test_replay_feeds_the_guards_their_own_metrics():
    curves = {i: [(s, 0.5) for s in range(1, MAX + 1)] for i in range(3)}
    entropy = {0: [(s, 0.0 if s > 10 else 0.8) for s in range(1, MAX + 1)], 1: [(s, 0.8) for s in range(1, MAX + 1)]}
    result = replay({"name": "median", "metric": "reward/mean", "max_steps": MAX, "min_peers": 1,
                     "guards": [{"kind": "entropy_collapse", "for_steps": 4}]}, curves,
                    other_metrics={"entropy": entropy, "unread": entropy})
    assert list(result.stopped_at) == [0] and 16 <= result.stopped_at[0] <= 20
    assert result.compute_saved > 0.15


@pytest.mark.parametrize("guards,key,fragment", [
    ({"kind": "entropy_collapse"}, "guards", "expected a list"),
    ([{"kind": "entropy_colapse"}], "guards.0.kind", "must be one of entropy_collapse"),
    ([{"below": 0.1}], "guards.0.kind", "is required"),
    ([{"kind": "zero_std", "below": 0.1}], "guards.0.below", "zero_std reads 'above'"),
    ([{"kind": "zero_std", "above": 1.5}], "guards.0.above", "must lie in (0, 1)"),
    ([{"kind": "reward_drop", "drop": -1}], "guards.0.drop", "must be > 0"),
    ([{"kind": "reward_drop", "for_steps": 0}], "guards.0.for_steps", "must lie in [1, 100000]"),
    ([{"kind": "reward_drop", "for_steps": "nan"}], "guards.0.for_steps", "expected an integer"),
    ([{"kind": "reward_drop", "eval": "os.system"}], "guards.0.eval", "unknown key"),
    ([{"kind": "reward_drop"}, {"kind": "reward_drop"}], "guards", "at most once"),
    ([{"kind": "reward_drop"}] * 9, "guards", "at most 8"),
])
def test_bad_guards_get_field_errors_that_name_them(guards, key, fragment):
    with pytest.raises(FieldErrors) as caught:
        make_policy({"name": "median", "metric": "reward/mean", "max_steps": MAX, "guards": guards})
    assert key in caught.value.errors and fragment in caught.value.errors[key], caught.value.errors


def test_a_manual_sweep_keeps_its_guards_and_needs_max_steps_for_them():
    config = {"name": "manual", "max_steps": MAX, "guards": [{"kind": "zero_std"}], "min_peers": 9}
    policy = make_policy(config)
    assert stored_config(policy, config) == {"name": "manual", "max_steps": MAX, "guards": [{"kind": "zero_std"}]}
    assert policy.reads_curves and policy.next_check(3, MAX) == 8
    assert make_policy({}).reads_curves is False and stored_config(make_policy({}), {}) == {}
    with pytest.raises(FieldErrors) as caught:
        make_policy({"name": "manual", "guards": [{"kind": "zero_std"}]})
    assert "max_steps" in caught.value.errors


def test_a_fold_ignores_repeated_steps():
    fold = GuardFold(GuardParams(kind="reward_drop", drop=0.1, for_steps=2))
    for step, value in [(1, 0.5), (2, 0.9), (2, 0.0), (3, 0.2), (4, 0.2)]:
        fold.add(step, value)
    assert fold.breached_for() == 2 and fold.breach_from == 3 and fold.last_step == 4
    assert parse_guards(None) == () and parse_guards([]) == ()
