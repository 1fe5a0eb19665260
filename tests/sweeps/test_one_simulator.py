"""One simulator (docs/architecture.md, "Early stopping"): the same curves give the same decisions through the live
check (stored points, ``policy_check``), the offline replay (``policies.replay``: the what-if replay and the
feasibility check use it) and the benchmark's path (``bench/early_stopping.py``'s ``seedbed_method``), and the
sweep dashboard's forecasts show the numbers of the bayes policy the simulator fed the same curves."""
from __future__ import annotations

import os
import sys

import pytest

from webapp.runs import services as run_services
from webapp.runs.models import RunStatus
from webapp.sweeps import policy_check as check_module
from webapp.sweeps import services
from webapp.sweeps.models import SweepPlan
from webapp.sweeps.forecasts import sweep_forecast
from webapp.sweeps.policies import STOP, make_policy, replay
from webapp.sweeps.policies.bayes import policy_numbers
from webapp.sweeps.policies.simulator import Simulator, feed_by_step

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench"))
import early_stopping  # noqa: E402

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

METRIC = "reward/mean"
STEPS = 24
POLICIES = {
    "median": {"name": "median", "grace_steps": 6, "min_peers": 2},
    "asha": {"name": "asha", "min_steps": 4, "eta": 2, "min_peers": 1},
    "threshold": {"name": "threshold", "lower_bound": 0.3, "patience": 6, "min_peers": 0},
    "bayes": {"name": "bayes", "grace_steps": 6, "min_peers": 2, "risk": 0.2},
}


@pytest.fixture(scope="module")
def curves():
    """Six seeds of the benchmark's synthetic sweeps (saturating, collapsing, plateauing, late-blooming curves)."""
    [sweep] = early_stopping.synthetic_sweeps(seed=7, n_sweeps=1, n_seeds=6, steps=STEPS)
    return sweep


def comparable(decision, index: dict) -> tuple:
    """A decision with run ids as seed indexes (also among a bayes stop's peers and levels)."""
    details = dict(decision.details)
    for key in ("peers", "levels"):
        if key in details:
            details[key] = [[index[run_id], *rest] for run_id, *rest in details[key]]
    return (index[decision.run_id], decision.action, decision.rule, decision.step, decision.value,
            decision.threshold, decision.n_peers, decision.extra_steps, decision.reason, details)


def live_check_decisions(config, policy: dict, curves: dict) -> list[tuple]:
    """Every seed runs at once and has logged its whole curve; one check of the stored points decides."""
    sweep = services.sweep_create(config={**config, "total_steps": STEPS}, seeds=range(len(curves)),
                                  concurrency=len(curves), policy={**policy, "metric": METRIC})
    runs = list(sweep.runs.order_by("pk"))
    for run, points in zip(runs, curves.values()):
        run_services.run_start(run_id=run.pk, worker="test:1")
        run_services.run_metrics_append(run_id=run.pk, points=[(step, METRIC, value) for step, value in points])
    check = check_module.policy_check(sweep=sweep, plan=SweepPlan.objects.get(sweep=sweep))
    index = {run.pk: i for i, run in enumerate(runs)}
    return [comparable(d, index) for d in check.decisions]


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_the_live_check_the_replay_and_the_bench_decide_the_same_on_the_same_curves(config, curves, name):
    policy = POLICIES[name]
    index = {run_id: i for i, run_id in enumerate(curves)}
    replayed = replay({**policy, "metric": METRIC, "mode": "max", "max_steps": STEPS}, curves)
    from_replay = [comparable(d, index) for d in replayed.decisions]
    assert from_replay, f"{name} decided nothing on these curves: the comparison would prove nothing"
    assert live_check_decisions(config, policy, curves) == from_replay
    # the bench's path: the stopped seeds and the points each ran
    bench = early_stopping.seedbed_method(policy)(curves)
    assert bench == {run_id: step for run_id, step in replayed.stopped_at.items()}
    assert {index[run_id] for run_id in bench} == {i for i, action, *_ in from_replay if action == STOP}


def test_the_dashboards_forecasts_are_the_numbers_of_the_policy_the_simulator_fed_the_same_curves(config, curves):
    """A bayes sweep whose six seeds logged 16 of 24 steps and whose live check stopped two or more: the dashboard's
    forecast worth, interval and P(near-best) of every run are those of the policy the simulator fed the same
    points in the live check's order, the stopped ones those of their stop (its decision's, frozen), all within the
    reward's [0, 1]."""
    policy = {**POLICIES["bayes"], "metric": METRIC}
    seen = {run_id: points[:16] for run_id, points in curves.items()}
    sweep = services.sweep_create(config={**config, "total_steps": STEPS}, seeds=range(len(seen)),
                                  concurrency=len(seen), policy=policy)
    runs = list(sweep.runs.order_by("pk"))
    for run, points in zip(runs, seen.values()):
        run_services.run_start(run_id=run.pk, worker="test:1")
        run_services.run_metrics_append(run_id=run.pk, points=[(step, METRIC, value) for step, value in points])
    services.sweep_apply_policy(sweep_id=sweep.pk)
    assert sweep.decisions.filter(action=STOP).count() >= 2  # frozen predictions are part of what is compared

    simulator = Simulator(make_policy({**policy, "mode": "max", "max_steps": STEPS}))
    points = sorted((run.pk, step, value, None) for run, curve in zip(runs, seen.values()) for step, value in curve)
    feed_by_step(simulator, sorted(points, key=lambda p: (p[1], p[0])), decide_from=0)
    assert sorted((d.run_id, d.step) for d in simulator.decisions) == sorted(
        sweep.decisions.values_list("run_id", "step"))
    numbers = policy_numbers(simulator.policy)
    shown = sweep_forecast(sweep=sweep, metric=METRIC, mode="max")["runs"]
    assert set(numbers.p) == {run.pk for run in runs} == set(shown)
    stops = {d.run_id: d for d in simulator.decisions}
    clip = lambda x: min(max(x, 0.0), 1.0)  # noqa: E731 (reward/mean of the task's verifier: in [0, 1])
    for run_id, p in numbers.p.items():
        mid, low, high = numbers.interval(run_id, 1.0)
        if run_id in stops:
            d = stops[run_id].details
            p, mid, low, high = d["probability"], d["forecast"], d["ci_low"], d["ci_high"]
            assert shown[run_id]["at_stop"] == stops[run_id].step
        assert shown[run_id]["p"] == pytest.approx(p, rel=1e-5, abs=1e-9)
        assert shown[run_id]["final"] == pytest.approx(clip(mid), rel=1e-5, abs=1e-9)
        assert shown[run_id]["ci"] == pytest.approx([clip(low), clip(high)], rel=1e-5, abs=1e-9)


LONG = 2_400  # the sweep's charts read 8-step buckets from this length on (selectors.bucket_width)
WIDTH = 8


def bucket_means(points: list, width: int) -> list:
    """The chart tier's buckets of a curve, computed here from the raw points: (last step, mean) per bucket of
    ``width`` steps, bucket b holding steps (b*width, (b+1)*width]."""
    buckets: dict[int, list] = {}
    for step, value in points:
        buckets.setdefault((step - 1) // width, []).append((step, value))
    return [(max(s for s, _ in b), sum(v for _, v in b) / len(b)) for _, b in sorted(buckets.items())]


@pytest.mark.parametrize("policy", [{"name": "median", "grace_steps": 240, "min_peers": 2},
                                    {"name": "asha", "min_steps": 240, "eta": 2, "min_peers": 1}],
                         ids=["median", "asha"])
def test_a_sweep_of_long_runs_is_checked_on_the_chart_tier_as_the_replay_decides_on_its_buckets(config, policy):
    [curves] = early_stopping.synthetic_sweeps(seed=11, n_sweeps=1, n_seeds=4, steps=LONG)
    sweep = services.sweep_create(config={**config, "total_steps": LONG}, seeds=range(4), concurrency=4,
                                  policy={**policy, "metric": METRIC})
    runs = list(sweep.runs.order_by("pk"))
    assert check_module.tier_width({run.pk: run for run in runs}) == WIDTH
    for run in runs:
        run_services.run_start(run_id=run.pk, worker="test:1")

    def log(first: int, last: int) -> None:
        for run, points in zip(runs, curves.values()):
            run_services.run_metrics_append(run_id=run.pk, points=[(s, METRIC, v) for s, v in points[first - 1:last]])

    log(1, 1_203)  # the last bucket (1,201-1,208) is not complete yet: it is not read
    first = check_module.policy_check(sweep=sweep, plan=SweepPlan.objects.get(sweep=sweep))
    assert first.points_read == 4 * 1_200 // WIDTH  # buckets, not points
    services.sweep_apply_policy(sweep_id=sweep.pk)
    log(1_204, LONG)
    assert check_module.policy_check(sweep=sweep, plan=SweepPlan.objects.get(sweep=sweep)).points_read == \
        4 * LONG // WIDTH  # every bucket again: nothing is kept between checks
    services.sweep_apply_policy(sweep_id=sweep.pk)
    index = {run.pk: i for i, run in enumerate(runs)}
    live = [(index[d.run_id], d.action, d.rule, d.step, d.n_peers, d.value, d.threshold)
            for d in sweep.decisions.order_by("pk")]
    replayed = replay({**policy, "metric": METRIC, "mode": "max", "max_steps": LONG},
                      {i: bucket_means(points, WIDTH) for i, points in enumerate(curves.values())})
    expected = [(d.run_id, d.action, d.rule, d.step, d.n_peers, d.value, d.threshold) for d in replayed.decisions]
    assert expected, "the replay decided nothing: the comparison would prove nothing"
    assert [row[:5] for row in live] == [row[:5] for row in expected]
    assert [x for row in live for x in row[5:]] == pytest.approx([x for row in expected for x in row[5:]], rel=1e-9)


def test_bayes_on_the_chart_tier_counts_its_final_window_in_buckets_and_decides_as_on_every_point(config):
    """A bayes sweep of long runs is checked on 8-step buckets: its level (the mean of the final window, 240 steps)
    is the mean of 30 buckets, not of 240 (the whole run so far), so it stops the seeds the replay of every raw
    point stops, at the same steps, with the same forecast worths (to 1e-3)."""
    [curves] = early_stopping.synthetic_sweeps(seed=12, n_sweeps=1, n_seeds=4, steps=LONG)
    policy = {"name": "bayes", "min_peers": 2, "risk": 0.3, "metric": METRIC}
    sweep = services.sweep_create(config={**config, "total_steps": LONG}, seeds=range(4), concurrency=4,
                                  policy=policy)
    runs = list(sweep.runs.order_by("pk"))
    assert check_module.tier_width({run.pk: run for run in runs}) == WIDTH
    for run, points in zip(runs, curves.values()):
        run_services.run_start(run_id=run.pk, worker="test:1")
        run_services.run_metrics_append(run_id=run.pk, points=[(s, METRIC, v) for s, v in points[:1_200]])
    check = check_module.policy_check(sweep=sweep, plan=SweepPlan.objects.get(sweep=sweep))
    index = {run.pk: i for i, run in enumerate(runs)}
    raw = replay({**policy, "mode": "max", "max_steps": LONG},
                 {i: points[:1_200] for i, points in enumerate(curves.values())})
    assert len(raw.decisions) == 2, "the raw replay should stop two seeds here: the comparison would prove little"
    assert [(index[d.run_id], d.step) for d in check.decisions] == [(d.run_id, d.step) for d in raw.decisions]
    assert [d.details["forecast"] for d in check.decisions] == pytest.approx(
        [d.details["forecast"] for d in raw.decisions], abs=1e-3)


def test_a_run_that_ended_within_a_bucket_and_runs_again_is_fed_that_bucket_whole_once_it_is_complete(config):
    [curves] = early_stopping.synthetic_sweeps(seed=12, n_sweeps=1, n_seeds=3, steps=LONG)
    points = list(curves.values())
    policy = {"name": "median", "grace_steps": 240, "min_peers": 1, "metric": METRIC}
    sweep = services.sweep_create(config={**config, "total_steps": LONG}, seeds=range(3), concurrency=3,
                                  policy=policy)
    runs = list(sweep.runs.order_by("pk"))
    for run, curve, last in zip(runs, points, (1_203, 1_600, 1_600)):
        run_services.run_start(run_id=run.pk, worker="test:1")
        run_services.run_metrics_append(run_id=run.pk, points=[(s, METRIC, v) for s, v in curve[:last]])
    run_services.run_finish(run_id=runs[0].pk, status=RunStatus.KILLED)  # at step 1,203: its last bucket unfinished
    ended = check_module.policy_check(sweep=sweep, plan=SweepPlan.objects.get(sweep=sweep))
    assert ended.points_read == 1_200 // WIDTH + 1 + 2 * 1_600 // WIDTH  # an ended run's last bucket as it is
    run_services.run_resume(run_id=runs[0].pk)  # resumed from its last step: nothing is discarded
    run_services.run_start(run_id=runs[0].pk, worker="test:1")
    run_services.run_metrics_append(run_id=runs[0].pk, points=[(s, METRIC, v) for s, v in points[0][1_203:1_216]])
    check = check_module.policy_check(sweep=sweep, plan=SweepPlan.objects.get(sweep=sweep))
    assert check.points_read == 1_216 // WIDTH + 2 * 1_600 // WIDTH  # its bucket 1,201-1,208 whole, 8 steps
    replayed = replay({**policy, "mode": "max", "max_steps": LONG},
                      {run.pk: bucket_means(curve[:last], WIDTH) for run, curve, last in zip(runs, points,
                                                                                         (1_216, 1_600, 1_600))})
    assert [(d.run_id, d.step, d.rule) for d in check.decisions] == [(d.run_id, d.step, d.rule)
                                                                   for d in replayed.decisions]
