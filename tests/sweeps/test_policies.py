"""Early-stopping policies on hand-made curves: who is stopped, at which step, and with which numbers."""
import dataclasses
import math
import subprocess
import sys

import pytest

from training.fields import FieldErrors
from webapp.sweeps.policies import (Decision, debiased_ema, make_policy, replay,
                                    running_mean, smooth, stored_config)
from webapp.sweeps.policies import risk_map


def constant_curves(levels: dict, steps: int) -> dict:
    return {run_id: [(t, level) for t in range(1, steps + 1)] for run_id, level in levels.items()}


def stops(result) -> dict:
    return {d.run_id: d for d in result.decisions if d.action == "stop"}


# --- import and config ------------------------------------------------------------------------------

def test_module_imports_without_django():
    code = "import sys, webapp.sweeps.policies; assert 'django' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True, env={"PATH": "/usr/bin:/bin"}, cwd=".")


@pytest.mark.parametrize("config, key", [
    ({"name": "median", "metric": "m", "max_steps": 10, "grase_steps": 2}, "grase_steps"),
    ({"name": "median", "metric": "m", "max_steps": 10, "mode": "maximize"}, "mode"),
    ({"name": "median", "max_steps": 10}, "metric"),
    ({"name": "median", "metric": "m"}, "max_steps"),
    ({"name": "median", "metric": "m", "max_steps": 10, "smoothing_weight": 1.0}, "smoothing_weight"),
    ({"name": "median", "metric": "m", "max_steps": 10, "smoothing": "gaussian"}, "smoothing"),
    ({"name": "median", "metric": "m", "max_steps": 10, "grace_steps": 10}, "grace_steps"),
    ({"name": "median", "metric": "m", "max_steps": 10, "min_peers": 0}, "min_peers"),
    ({"name": "median", "metric": "m", "max_steps": "ten"}, "max_steps"),
    ({"name": "asha", "metric": "m", "max_steps": 10, "eta": 1}, "eta"),
    ({"name": "asha", "metric": "m", "max_steps": 10, "min_steps": 0}, "min_steps"),
    ({"name": "threshold", "metric": "m", "max_steps": 10}, "lower_bound"),
    ({"name": "threshold", "metric": "m", "max_steps": 10, "patience": 0}, "patience"),
    ({"name": "threshold", "metric": "m", "max_steps": 10, "lower_bound": 0.5, "upper_bound": 0.1}, "upper_bound"),
    ({"name": "threshold", "metric": "m", "max_steps": 10, "lower_bound": True}, "lower_bound"),
    ({"name": "manual", "metric": "m", "max_steps": 10, "eta": 2}, "eta"),
    ({"name": "hyperband", "metric": "m", "max_steps": 10}, "name"),
    ({"name": "bayes", "metric": "m", "max_steps": 10, "risk": 0.0}, "risk"),
    ({"name": "bayes", "metric": "m", "max_steps": 10, "risk": 0.51}, "risk"),
    ({"name": "bayes", "metric": "m", "max_steps": 10, "risk": float("nan")}, "risk"),
    ({"name": "bayes", "metric": "m", "max_steps": 10, "p_stop": 0.05}, "p_stop"),  # the earlier model's keys
    ({"name": "bayes", "metric": "m", "max_steps": 10, "criterion": "needed"}, "criterion"),
    ({"name": "bayes", "metric": "m", "max_steps": 10, "drift": 0.1}, "drift"),
    ({"name": "bayes", "metric": "m", "max_steps": 10, "tolerance": -0.1}, "tolerance"),
    ({"name": "bayes", "metric": "m", "max_steps": 10, "half_life": 0}, "half_life"),
    ({"name": "bayes", "metric": "m", "max_steps": 10, "final_points": 11}, "final_points"),
    ({"name": "bayes", "metric": "m", "max_steps": 10, "min_peers": 0}, "min_peers"),
    ({"name": ["median"], "metric": "m", "max_steps": 10}, "name"),
])
def test_invalid_config_names_the_key(config, key):
    with pytest.raises(ValueError, match=key) as info:
        make_policy(config)
    assert isinstance(info.value, FieldErrors)
    assert key in info.value.errors


def test_defaults_fill_every_other_parameter():
    policy = make_policy({"name": "asha", "metric": "reward/mean", "mode": "max", "max_steps": 40})
    assert policy.params.grace() == 8           # 20 % of max_steps
    assert policy.rung_steps == [10, 20]        # first rung at 25 % of max_steps; 40 is the final step
    assert policy.params.min_peers == 3 and policy.params.smoothing == "ema"
    assert policy.params.smoothing_weight == 0.8 and policy.params.extend_survivors_by == 0
    median = make_policy({"name": "median", "metric": "reward/mean", "max_steps": 40})
    assert (median.params.mode, median.params.min_delta, median.params.eval_every) == ("max", 0.05, 1)


def test_observe_rejects_bad_points():
    policy = make_policy({"name": "median", "metric": "m", "max_steps": 10})
    with pytest.raises(ValueError, match="value"):
        policy.observe("a", 1, math.nan)
    with pytest.raises(ValueError, match="step"):
        policy.observe("a", -1, 0.5)


# --- smoothing --------------------------------------------------------------------------------------

def test_debiased_ema_starts_at_the_first_value_and_follows_the_formula():
    # m1 = 0.5*0 + 0.5*0 = 0 -> 0/(1-0.5) = 0; m2 = 0.5*0 + 0.5*1 = 0.5 -> 0.5/(1-0.25) = 2/3
    assert debiased_ema([0.0, 1.0], 0.5) == pytest.approx([0.0, 2 / 3])
    assert debiased_ema([0.4, 0.4, 0.4], 0.9) == pytest.approx([0.4, 0.4, 0.4])
    assert running_mean([1, 2, 3, 4, 5], 3) == pytest.approx([1, 1.5, 2, 3, 4])
    assert smooth([1, 5], kind="none") == [1, 5]


# --- median rule ------------------------------------------------------------------------------------

MEDIAN = {"name": "median", "metric": "reward/mean", "mode": "max", "max_steps": 10, "smoothing": "none",
          "grace_steps": 3, "min_peers": 3, "min_delta": 0.0}


def test_median_stops_runs_below_the_peer_median_at_the_grace_step():
    curves = constant_curves({"a": 0.5, "b": 0.6, "c": 0.7, "d": 0.8, "e": 0.2}, steps=10)
    result = replay(MEDIAN, curves)
    stopped = stops(result)
    assert sorted(stopped) == ["a", "e"]
    e = stopped["e"]
    assert (e.step, e.rule, e.value, e.n_peers) == (3, "median", 0.2, 4)
    assert e.threshold == pytest.approx(0.65)      # median of 0.5, 0.6, 0.7, 0.8
    assert e.reason == ("median rule: smoothed reward/mean 0.2 at step 3 is below the median 0.65 of 4 peers "
                        "at that step")
    assert stopped["a"].threshold == pytest.approx(0.65)
    # b equals the median of its peers (0.2, 0.5, 0.7, 0.8 -> 0.6): not worse, kept. At step 4 only b, c, d
    # reached the step, so b has 2 peers < min_peers: nothing more is decided.
    assert result.stopped_at == {"a": 3, "e": 3}
    assert result.steps_run == {"a": 3, "b": 10, "c": 10, "d": 10, "e": 3}     # steps 1, 2, 3 for a and e
    assert result.compute_saved == pytest.approx(1 - 36 / 50)


def test_median_grace_period_keeps_a_bad_run_until_the_grace_step():
    curves = constant_curves({"a": 0.5, "b": 0.6, "c": 0.7, "d": 0.8, "e": 0.0}, steps=10)
    for grace in (1, 6):
        result = replay({**MEDIAN, "grace_steps": grace}, curves)
        assert result.stopped_at["e"] == grace


def test_median_needs_min_peers():
    curves = constant_curves({"a": 0.5, "b": 0.6, "e": 0.0}, steps=10)
    assert replay(MEDIAN, curves).decisions == []                         # 2 peers < 3
    assert replay({**MEDIAN, "min_peers": 2}, curves).stopped_at == {"e": 3}


def test_median_mode_min_stops_the_highest_loss():
    curves = constant_curves({"a": 1.0, "b": 1.1, "c": 1.2, "d": 3.0}, steps=10)
    result = replay({**MEDIAN, "metric": "loss", "mode": "min"}, curves)
    # d's peers 1.0, 1.1, 1.2 -> median 1.1; c's peers 1.0, 1.1, 3.0 -> median 1.1 too
    assert result.stopped_at == {"c": 3, "d": 3}
    assert stops(result)["d"].reason == ("median rule: smoothed loss 3 at step 3 is above the median 1.1 of 3 "
                                         "peers at that step")
    assert replay({**MEDIAN, "metric": "loss", "mode": "max"}, curves).stopped_at == {"a": 3, "b": 3}


def test_one_noisy_batch_does_not_kill_a_seed_with_smoothing():
    # "a" is the best seed (0.8); its batch at step 8, the first judged step, scores 0.2. Peers: 0.5, 0.55, 0.6.
    curves = constant_curves({"a": 0.8, "b": 0.5, "c": 0.55, "d": 0.6}, steps=12)
    curves["a"][7] = (8, 0.2)
    smoothed = {**MEDIAN, "grace_steps": 8, "smoothing": "ema", "smoothing_weight": 0.8}
    # debiased EMA at step 8 (8 points): the last point weighs 0.2 / (1 - 0.8**8) = 0.240 -> 0.656 > 0.55
    assert smooth([0.8] * 7 + [0.2], weight=0.8)[-1] == pytest.approx(0.8 - 0.6 * 0.2 / (1 - 0.8 ** 8))
    assert "a" not in replay(smoothed, curves).stopped_at
    # The same batch without smoothing does kill it: the smoothing is what saves the seed.
    assert replay({**MEDIAN, "grace_steps": 8}, curves).stopped_at["a"] == 8


def test_median_judges_later_seeds_against_earlier_ones_when_run_one_at_a_time():
    curves = constant_curves({"a": 0.5, "b": 0.6, "c": 0.7, "d": 0.2}, steps=10)
    result = replay(MEDIAN, curves, parallel=False)
    # a, b and c ran alone to the end (too few peers); d meets three finished peers at step 3.
    assert result.stopped_at == {"d": 3}
    assert stops(result)["d"].threshold == pytest.approx(0.6)


def test_median_min_delta_margin():
    curves = constant_curves({"a": 0.5, "b": 0.6, "c": 0.7, "d": 0.8, "e": 0.2}, steps=10)
    result = replay({**MEDIAN, "min_delta": 0.2}, curves)
    assert result.stopped_at == {"e": 3}       # a is only 0.15 below 0.65
    assert "by more than 0.2" in stops(result)["e"].reason


# --- ASHA ---------------------------------------------------------------------------------------------

ASHA = {"name": "asha", "metric": "accuracy", "max_steps": 20, "smoothing": "none", "grace_steps": 0,
        "min_steps": 4, "eta": 2, "min_peers": 3}


def test_asha_keeps_the_top_half_at_each_rung():
    levels = {f"s{i}": 0.1 * i for i in range(8)}              # s7 best
    result = replay(ASHA, constant_curves(levels, steps=20))
    assert make_policy(ASHA).rung_steps == [4, 8, 16]
    # rung 4: 8 runs, keep 4 (s4..s7); rung 8: 4 runs, keep 2 (s6, s7); rung 16: 2 runs < min_peers + 1.
    assert result.stopped_at == {"s0": 4, "s1": 4, "s2": 4, "s3": 4, "s4": 8, "s5": 8}
    s3 = stops(result)["s3"]
    assert (s3.rule, s3.value, s3.threshold, s3.n_peers) == ("asha", 0.30000000000000004, 0.4, 7)
    assert s3.reason == ("asha rung 0 (step 4): smoothed accuracy 0.3 ranks 5 of 8; only the top 4 (1/2) continue, "
                         "cut-off 0.4")
    assert stops(result)["s4"].reason.startswith("asha rung 1 (step 8): smoothed accuracy 0.4 ranks 4 of 4; only the top 2")


def test_asha_is_asynchronous_and_waits_for_enough_runs_at_a_rung():
    levels = {"a": 0.9, "b": 0.1, "c": 0.5, "d": 0.3}
    # Two slots: a and b run first and finish alone (no rung ever has 4 values while they run); c and d start
    # later and are judged at rung 4 against everything recorded there: keep max(1, 4 // 2) = 2 -> a and c.
    result = replay(ASHA, constant_curves(levels, steps=20), concurrency=2)
    assert result.stopped_at == {"d": 4}
    assert stops(result)["d"].reason.endswith("ranks 3 of 4; only the top 2 (1/2) continue, cut-off 0.5")
    # min_peers=1: a run is judged as soon as one other run reached the rung: b (rank 2 of 2, keep 1) stops at
    # step 4 and its slot goes to c at once; c meets a and b at rung 4 (n=3, keep 1: only a) and stops; then d
    # meets a, b, c (n=4, keep 2: a and c) and stops too.
    result = replay({**ASHA, "min_peers": 1}, constant_curves(levels, steps=20), concurrency=2)
    assert result.stopped_at == {"b": 4, "c": 4, "d": 4}
    assert stops(result)["c"].reason.endswith("ranks 2 of 3; only the top 1 (1/2) continue, cut-off 0.9")


def test_asha_mode_min():
    levels = {f"s{i}": 0.1 * i for i in range(4)}
    result = replay({**ASHA, "mode": "min"}, constant_curves(levels, steps=20))
    assert result.stopped_at == {"s2": 4, "s3": 4}


def test_asha_grace_skips_early_rungs():
    assert make_policy({**ASHA, "grace_steps": 6}).rung_steps == [8, 16]


# --- threshold / patience -----------------------------------------------------------------------------

THRESHOLD = {"name": "threshold", "metric": "entropy", "max_steps": 20, "smoothing": "none", "grace_steps": 2}


def test_threshold_stops_when_entropy_collapses_below_the_bound():
    collapsing = [(t, 1.0 - 0.1 * t) for t in range(1, 21)]       # 0.45 would be crossed after step 5
    healthy = [(t, 0.9) for t in range(1, 21)]
    result = replay({**THRESHOLD, "lower_bound": 0.45}, {"x": collapsing, "y": healthy})
    assert result.stopped_at == {"x": 6}
    d = stops(result)["x"]
    assert (d.rule, d.threshold, d.n_peers) == ("threshold", 0.45, 1)
    assert d.value == pytest.approx(0.4)
    assert d.reason == "threshold: smoothed entropy 0.4 at step 6 fell below the lower bound 0.45"


def test_threshold_upper_bound():
    result = replay({**THRESHOLD, "metric": "length", "upper_bound": 7.5},
                    {"x": [(t, float(t)) for t in range(1, 21)]})
    assert result.stopped_at == {"x": 8}
    assert "rose above the upper bound 7.5" in stops(result)["x"].reason


def test_patience_stops_a_run_that_stopped_improving():
    improving_then_flat = [(t, min(t, 5) * 0.1) for t in range(1, 21)]   # best 0.5 from step 5 on
    result = replay({**THRESHOLD, "metric": "accuracy", "patience": 4}, {"x": improving_then_flat})
    assert result.stopped_at == {"x": 9}
    d = stops(result)["x"]
    assert (d.rule, d.threshold) == ("patience", 0.5)
    assert d.reason == ("patience: smoothed accuracy 0.5 at step 9 has not improved on the best 0.5 (step 5) by "
                        "more than 0 for 4 steps (patience 4)")


def test_patience_in_mode_min_and_min_delta():
    # loss falls by 0.01 a step after step 3: improvements smaller than min_delta=0.05 do not count.
    loss = [(t, 1.0 - 0.2 * min(t, 3) - 0.01 * max(0, t - 3)) for t in range(1, 21)]
    result = replay({**THRESHOLD, "metric": "loss", "mode": "min", "patience": 3, "min_delta": 0.05},
                    {"x": loss})
    assert result.stopped_at == {"x": 6}
    assert replay({**THRESHOLD, "metric": "loss", "mode": "min", "patience": 3}, {"x": loss}).decisions == []


def test_threshold_respects_grace_and_min_peers():
    dead = [(t, 0.0) for t in range(1, 21)]
    assert replay({**THRESHOLD, "lower_bound": 0.1, "grace_steps": 7}, {"x": dead}).stopped_at == {"x": 7}
    assert replay({**THRESHOLD, "lower_bound": 0.1, "min_peers": 1}, {"x": dead}).decisions == []


# --- once per run, manual, extensions, the decision record --------------------------------------------

def test_a_run_is_stopped_once_and_later_points_are_ignored():
    policy = make_policy({**MEDIAN, "grace_steps": 0})
    for run_id, level in {"a": 0.1, "b": 0.6, "c": 0.6, "d": 0.7}.items():
        policy.observe(run_id, 0, level)
    first = policy.decide()
    assert [d.run_id for d in first] == ["a"]
    assert policy.decide() == []
    for step in (1, 2):   # the stopped run keeps logging while it winds down; the others go on
        for run_id, level in {"a": 0.0, "b": 0.6, "c": 0.6, "d": 0.7}.items():
            policy.observe(run_id, step, level)
        assert all(d.run_id != "a" for d in policy.decide())
    assert policy.curves["a"].last_step == 0


def test_runs_ended_elsewhere_get_no_decision_but_still_count_as_peers():
    policy = make_policy({**MEDIAN, "grace_steps": 0})
    policy.mark_stopped("a")                                   # killed by a user before the policy saw it
    for run_id, level in {"a": 0.0, "b": 0.6, "c": 0.6, "d": 0.7, "e": 0.1}.items():
        policy.observe(run_id, 1, level)
    decisions = policy.decide()
    assert [d.run_id for d in decisions] == ["e"]             # a gets no decision
    assert decisions[0].n_peers == 4 and decisions[0].threshold == pytest.approx(0.6)   # a's 0.0 is a peer


def test_repeated_points_are_ignored():
    policy = make_policy({**MEDIAN, "grace_steps": 0})
    policy.observe("a", 3, 0.5)
    policy.observe("a", 3, 0.9)
    policy.observe("a", 2, 0.9)
    assert policy.curves["a"].steps == [3] and policy.curves["a"].smoothed == [0.5]


def test_manual_never_decides():
    curves = constant_curves({"a": 0.0, "b": 0.5, "c": 0.9, "d": 1.0}, steps=10)
    result = replay({"name": "manual", "metric": "m", "max_steps": 10}, curves)
    assert result.decisions == [] and result.compute_saved == 0.0


def test_no_decision_at_the_final_step():
    policy = make_policy({**MEDIAN, "grace_steps": 0})
    for run_id, level in {"a": 0.1, "b": 0.5, "c": 0.6, "d": 0.7}.items():
        policy.observe(run_id, 10, level)                         # step 10 is the last of max_steps=10
    assert policy.decide() == []
    one_before = make_policy({**MEDIAN, "grace_steps": 0})
    for run_id, level in {"a": 0.1, "b": 0.6, "c": 0.6, "d": 0.7}.items():
        one_before.observe(run_id, 9, level)
    assert [d.run_id for d in one_before.decide()] == ["a"]


def test_extend_proposes_the_best_survivor_once_per_freed_slot():
    curves = constant_curves({"a": 0.5, "b": 0.6, "c": 0.7, "d": 0.8, "e": 0.2}, steps=10)
    result = replay({**MEDIAN, "extend_survivors_by": 5}, curves)
    extends = [d for d in result.decisions if d.action == "extend"]
    # two stops at step 3 free two slots: d (0.8) then c (0.7) get 5 more steps each
    assert [(d.run_id, d.step, d.extra_steps) for d in extends] == [("d", 3, 5), ("c", 3, 5)]
    assert extends[0].reason == ("best live run: smoothed reward/mean 0.8 at step 3; a stopped run freed a slot, "
                                 "so it gets 5 more steps (until step 15)")
    assert result.stopped_at == {"a": 3, "e": 3}


def test_decision_record_has_the_structured_fields():
    d = Decision(run_id=7, action="stop", reason="r", rule="median", step=3, value=0.2, threshold=0.65, n_peers=4)
    assert d.to_dict() == {"run_id": 7, "action": "stop", "reason": "r", "rule": "median", "step": 3,
                           "value": 0.2, "threshold": 0.65, "n_peers": 4, "extra_steps": 0, "details": {}}


@pytest.mark.parametrize("config, described, checks", [
    ({}, "manual: runs are stopped only from the dashboard", {0: None, 9: None}),
    ({"name": "median", "metric": "m", "max_steps": 20, "grace_steps": 4, "eval_every": 3},
     "median on m (max): every 3 steps from step 4", {0: 4, 4: 7, 5: 7, 15: 16, 16: 19, 18: 19, 19: None}),
    ({"name": "asha", "metric": "m", "max_steps": 40, "mode": "min"},
     "asha on m (min): rungs at steps 10, 20", {0: 10, 10: 20, 19: 20, 20: None}),
    ({"name": "threshold", "metric": "entropy", "max_steps": 10, "lower_bound": 0.05, "patience": 3},
     "threshold on entropy: every step from 2, stop when below 0.05 or no improvement for 3 steps",
     {0: 2, 5: 6, 9: None}),
    ({"name": "bayes", "metric": "m", "max_steps": 40, "grace_steps": 6},
     "bayes on m (max): every step from 6, the seeds least likely to end within 0.02 of the best seed stop while "
     "the model's P(every near-best seed is stopped) <= " f"{risk_map.model_risk(0.05):.3g}, the level that kept "
     "the realized loss within risk 0.05 on the tuning sweeps", {0: 6, 6: 7, 38: 39, 39: None}),
])
def test_each_policy_says_what_it_does_and_when_it_looks_next(config, described, checks):
    """The dashboard and the form ask the policy; no caller tests which kind of policy it is."""
    policy = make_policy(config)
    assert policy.describe().startswith(described)
    total = config.get("max_steps", 10)
    assert {last: policy.next_check(last, total) for last in checks} == checks
    assert policy.reads_curves == bool(config)
    assert stored_config(policy, config) == config  # manual keeps nothing: {} stays {}


def test_an_empty_config_is_manual_and_a_manual_config_is_stored_as_empty():
    assert make_policy({}).decide() == []
    manual = make_policy({"name": "manual", "metric": "m", "max_steps": 10})
    assert stored_config(manual, {"name": "manual", "metric": "m", "max_steps": 10}) == {}


# --- bayes: a promised risk ---------------------------------------------------------------------------------

BAYES = {"name": "bayes", "metric": "reward/mean", "mode": "max", "max_steps": 40, "grace_steps": 8}


def noisy_curves(levels: dict, steps: int, noise: float, seed: int = 0) -> dict:
    """Saturating curves 0.1 + (level - 0.1) * t / (t + 6) plus Gaussian noise of sd ``noise`` (fixed seed)."""
    import random
    rng = random.Random(seed)
    return {run_id: [(t, 0.1 + (level - 0.1) * t / (t + 6) + rng.gauss(0, noise)) for t in range(1, steps + 1)]
            for run_id, level in levels.items()}


@pytest.mark.parametrize("name", ["median", "asha", "threshold", "manual"])
def test_only_bayes_takes_a_risk(name):
    config = {"name": name, "metric": "m", "max_steps": 10, "risk": 0.05, "lower_bound": 0.1}
    if name != "threshold":
        config.pop("lower_bound")
    with pytest.raises(FieldErrors) as caught:
        make_policy(config)
    assert caught.value.errors == {"risk": caught.value.errors["risk"]}  # the one error, not "unknown key"
    assert caught.value.errors["risk"].startswith("only bayes has a probability model")
    assert make_policy({"name": "bayes", "metric": "m", "max_steps": 10, "risk": 0.5}).params.risk == 0.5


def test_bayes_stops_a_clearly_worse_low_noise_seed_and_keeps_its_risk():
    curves = noisy_curves({"a": 0.7, "b": 0.7, "c": 0.7, "d": 0.7, "bad": 0.4}, steps=40, noise=0.01)
    result = replay(BAYES, curves)
    # a seed far below its peers early may still bloom late (the drift table learned late bloomers): it stops once
    # the run is far enough along that so late a bloom is unlikely
    assert list(result.stopped_at) == ["bad"] and result.stopped_at["bad"] < 30
    (decision,) = result.decisions
    details = decision.details
    # lost only if it alone is near-best; the model's loss within the map's level for the risk, below the risk
    assert details["loss"] <= details["probability"] and details["risk"] == 0.05
    assert details["loss"] <= details["model_risk"] == risk_map.model_risk(0.05) < 0.05
    assert details["ci_low"] <= details["forecast"] == decision.value <= details["ci_high"]
    assert decision.value < decision.threshold and type(decision.value) is float
    assert decision.n_peers == 4 and sorted(r for r, _ in details["peers"]) == ["a", "b", "c", "d"]
    assert decision.reason.startswith(f"bayes: P(near-best) = {details['probability']:.3f}; with it stopped "
                                      f"P(every near-best seed is stopped) = {details['loss']:.3f} <= "
                                      f"{details['model_risk']:.3f} (the model's level for risk 0.05)")


def test_bayes_stops_seeds_that_end_alike_only_down_to_some_that_are_near_best():
    # four seeds end alike (every one near-best), "close" 0.03 below; a point's noise is 0.1
    curves = noisy_curves({"a": 0.6, "b": 0.6, "c": 0.6, "d": 0.6, "close": 0.57}, steps=40, noise=0.1, seed=3)
    result = replay(BAYES, curves)
    assert set(result.survivors) & {"a", "b", "c", "d"}
    assert all(d.details["loss"] <= 0.05 for d in result.decisions)


def test_bayes_stops_more_with_a_higher_risk():
    curves = noisy_curves({f"s{i}": 0.5 + 0.03 * i for i in range(8)}, steps=40, noise=0.03, seed=2)
    saved = [replay({**BAYES, "risk": risk}, curves).compute_saved for risk in (0.02, 0.2, 0.5)]
    assert saved == sorted(saved) and saved[-1] > saved[0]
    stops = [d for d in replay({**BAYES, "risk": 0.2}, curves).decisions]
    assert all(d.details["loss"] <= 0.2 for d in stops)
    assert "s7" not in {d.run_id for d in stops}


def test_bayes_mode_min_stops_the_highest_loss():
    curves = noisy_curves({"a": 0.7, "b": 0.7, "c": 0.7, "d": 0.7, "bad": 0.4}, steps=40, noise=0.01)
    losses = {run_id: [(t, 1.0 - v) for t, v in points] for run_id, points in curves.items()}
    min_result = replay({**BAYES, "mode": "min"}, losses)
    assert list(min_result.stopped_at) == ["bad"]
    (decision,) = min_result.decisions
    assert decision.details["ci_low"] <= decision.value <= decision.details["ci_high"] and decision.value > 0.4
    # read as rewards to maximise, the same curves make "bad" the one best run
    assert "bad" not in replay(BAYES, losses).stopped_at


def test_bayes_greedy_choice_stops_the_least_likely_first_and_always_keeps_one():
    import numpy as np
    from webapp.sweeps.policies.calibrated import choose_stops, loss, p_near_best
    # three seeds: 0 always best, 1 near it in half the draws, 2 never near
    worths = np.array([[1.0, 0.99, 0.5], [1.0, 0.9, 0.5]] * 50)
    assert list(p_near_best(worths, 0.02)) == [1.0, 0.5, 0.0]
    assert choose_stops(worths, 0.02, 0.05, [0, 1, 2], []) == [(2, 0.0, 0.0), (1, 0.5, 0.0)]
    assert choose_stops(worths, 0.02, 0.05, [0, 1, 2], [1, 2]) == []  # never the last one
    assert loss(worths, 0.02, [0]) == 0.5 and loss(worths, 0.02, [0, 1]) == 1.0 and loss(worths, 0.02, [1, 2]) == 0.0


def test_a_told_bayes_stop_is_frozen_at_its_prediction_and_an_old_one_is_out_of_the_race():
    curves = noisy_curves({"a": 0.7, "b": 0.68, "c": 0.66, "d": 0.64, "bad": 0.4}, steps=40, noise=0.02, seed=4)
    whole = replay(BAYES, curves)
    first = next(d for d in whole.decisions if d.action == "stop")
    policy = make_policy(BAYES)
    policy.tell_stop(first)
    assert first.run_id in policy.stopped and policy.frozen[first.run_id][0].level == \
        first.details["prediction"]["level"]
    old = make_policy(BAYES)
    old.tell_stop(dataclasses.replace(first, details={"probability": 0.01, "p_stop": 0.02}))
    assert old.stopped == {first.run_id: None} and old.frozen == {}
    median = make_policy({"name": "median", "metric": "reward", "max_steps": 40})
    median.tell_stop(first)
    assert median.stopped == {}  # the other rules decide afresh, as before


def test_feasibility_finds_the_policies_that_can_never_act_and_what_would():
    from webapp.sweeps.policies.feasibility import policy_cannot_act, stops_a_run

    median = {"name": "median", "metric": "m", "max_steps": 40}
    assert stops_a_run(median, 8, 4) and not stops_a_run(median, 3, 3)
    assert "min_peers 2 or 4 runs" in policy_cannot_act(median, 3, 3)
    assert policy_cannot_act({**median, "min_peers": 1}, 2, 2) is None
    assert policy_cannot_act({"name": "asha", "metric": "m", "max_steps": 40}, 2, 1).startswith("the asha policy")
    assert policy_cannot_act({"name": "threshold", "metric": "m", "max_steps": 40, "lower_bound": 0.5}, 1, 1) is None
