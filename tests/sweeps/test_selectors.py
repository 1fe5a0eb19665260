"""Dashboard reads: server-side downsampling keeps each bucket's min and max; live updates by run; the table."""
from __future__ import annotations

import pytest

from tests.sweeps.conftest import log_points, make_running
from webapp.runs import services as run_services
from webapp.sweeps import selectors, services

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

MEDIAN = {"name": "median", "metric": "reward/mean", "grace_steps": 4, "min_peers": 1, "eval_every": 3}


@pytest.fixture
def sweep(config, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        return services.sweep_create(config={**config, "total_steps": 10_000}, seeds=[0, 1], concurrency=2,
                                     policy=MEDIAN, grid={"lr": [1e-5]})


def test_long_series_are_bucketed_and_every_spike_and_dip_survives(sweep):
    calm, spiky = [make_running(r) for r in sweep.runs.order_by("pk")]
    log_points(calm, "reward/mean", [0.5] * 10_000)
    values = [0.5] * 10_000
    values[4_999] = 9.0     # step 5,000: one spike
    values[7_311] = -3.0    # step 7,312: one dip
    log_points(spiky, "reward/mean", values)

    series = selectors.sweep_series(sweep_id=sweep.pk, metric="reward/mean")
    assert series["width"] == 32  # 10,000 steps into at most 400 buckets, a width the metric tier tiles (4 x 8)
    s = series["runs"][spiky.pk]
    assert len(s["b"]) == 313 and s["b"][:3] == [0, 1, 2]
    assert (s["first"][0], s["last"][0]) == (1, 32) and (s["first"][-1], s["last"][-1]) == (9_985, 10_000)
    spike = s["last"].index(5_024)  # steps 4,993..5,024
    assert s["hi"][spike] == 9.0 and s["lo"][spike] == 0.5
    assert s["avg"][spike] == pytest.approx((31 * 0.5 + 9.0) / 32)
    dip = next(i for i, (a, b) in enumerate(zip(s["first"], s["last"])) if a <= 7_312 <= b)
    assert s["lo"][dip] == -3.0
    assert max(s["hi"]) == 9.0 and min(s["lo"]) == -3.0
    assert set(series["runs"][calm.pk]["hi"]) == {0.5}
    assert all(t is not None and t >= 0 for t in s["t"])


def test_live_updates_resend_from_each_runs_last_bucket_only(sweep):
    a, b = [make_running(r) for r in sweep.runs.order_by("pk")]
    log_points(a, "reward/mean", [float(i) for i in range(1, 11)])
    log_points(b, "reward/mean", [0.0] * 4)
    first = selectors.sweep_series(sweep_id=sweep.pk, metric="reward/mean", width=3)
    assert first["runs"][a.pk]["b"] == [0, 1, 2, 3] and first["runs"][a.pk]["hi"] == [3.0, 6.0, 9.0, 10.0]
    log_points(a, "reward/mean", [11.0, 12.0], start=11)
    # the client asks for each run after the first step of its last bucket (a: bucket 3 starts after step 9)
    update = selectors.sweep_series(sweep_id=sweep.pk, metric="reward/mean", width=3, since={a.pk: 9, b.pk: 3})
    assert update["runs"][a.pk] | {"t": None} == {"b": [3], "first": [10], "last": [12], "lo": [10.0], "hi": [12.0],
                                                  "tail": 12.0,
                                                  "avg": [11.0], "t": None}
    assert update["runs"][b.pk]["b"] == [1]


def test_null_values_are_gaps_not_zeros(sweep):
    a = make_running(sweep.runs.order_by("pk").first())
    run_services.run_metrics_append(run_id=a.pk, points=[(1, "kl", 0.2), (2, "kl", float("nan")), (3, "kl", 0.4)])
    s = selectors.sweep_series(sweep_id=sweep.pk, metric="kl")["runs"][a.pk]
    assert s["last"] == [1, 3] and s["avg"] == [0.2, 0.4]


def test_runs_table_and_each_curves_last_value_and_extremes(sweep):
    a, b = [make_running(r) for r in sweep.runs.order_by("pk")]
    log_points(a, "reward/mean", [0.1, 0.9, 0.3])
    run_services.run_kill(run_id=b.pk, killed_by="policy:median", reason="below the median")
    rows = {r["id"]: r for r in selectors.sweep_runs_table(sweep=sweep)}
    assert rows[a.pk]["knobs"] == {"lr": 1e-5} and rows[a.pk]["last_step"] == 3 and rows[a.pk]["seed"] == 0
    assert rows[b.pk]["killed_by"] == "policy:median" and rows[b.pk]["kill_reason"] == "below the median"
    assert rows[b.pk]["kill_requested"] and not rows[b.pk]["ended"]
    s = selectors.sweep_series(sweep_id=sweep.pk, metric="reward/mean", width=2)["runs"][a.pk]
    assert s["tail"] == 0.3 and max(s["hi"]) == 0.9 and min(s["lo"]) == 0.1
    assert selectors.metric_mode("reward/mean", sweep) == "max"
    assert selectors.metric_mode("loss/policy", sweep) == "min"  # smaller is better for a loss


def test_metric_keys_come_from_each_runs_first_and_last_step(sweep):
    a = make_running(sweep.runs.order_by("pk").first())
    log_points(a, "reward/mean", [0.1, 0.2, 0.3])
    log_points(a, "entropy", [0.1, 0.2, 0.3])
    assert selectors.sweep_metric_keys(sweep_id=sweep.pk) == ["entropy", "reward/mean"]


def test_next_decision_points_follow_the_policy(sweep):
    a, b = [make_running(r) for r in sweep.runs.order_by("pk")]
    log_points(a, "reward/mean", [0.5] * 5)
    table = selectors.sweep_runs_table(sweep=sweep)
    nxt = selectors.next_decision_points(sweep=sweep, runs=table)
    # median from the grace step 4, every 3 steps: 4, 7, 10 ...; a has done 5 steps, b none
    assert nxt["runs"] == {a.pk: 7, b.pk: 4}
    assert "every 3 steps from step 4" in nxt["summary"]
    sweep.policy = {"name": "asha", "metric": "reward/mean", "max_steps": 10_000, "min_steps": 100, "eta": 3,
                    "grace_steps": 50}
    nxt = selectors.next_decision_points(sweep=sweep, runs=table)
    assert nxt["runs"] == {a.pk: 100, b.pk: 100} and "100, 300, 900, 2700, 8100" in nxt["summary"]


def test_sweep_list_counts_runs_by_status(config, user):
    sweep = services.sweep_create(config=config, seeds=[0, 1, 2], concurrency=1)
    run_services.run_kill(run_id=sweep.runs.order_by("pk").last().pk, killed_by="user:ada")
    row = selectors.sweep_list(user=user).get(pk=sweep.pk)
    assert (row.n_runs, row.n_queued, row.n_killed, row.n_running) == (3, 2, 1, 0)


def test_the_runs_tables_last_and_best_come_from_every_point_even_after_a_resume(sweep):
    a, b = [make_running(r) for r in sweep.runs.order_by("pk")]
    values = [0.1 * (i % 7) for i in range(20_000)]
    values[12_345] = 3.0                     # the best of a, one step
    log_points(a, "reward/mean", values)
    log_points(b, "reward/mean", [0.2] * 50)
    got = selectors.sweep_run_values(sweep_id=sweep.pk, metric="reward/mean", mode="max")
    assert got[a.pk] == {"last": values[-1], "best": 3.0} and got[b.pk] == {"last": 0.2, "best": 0.2}
    assert selectors.sweep_run_values(sweep_id=sweep.pk, metric="reward/mean", mode="min")[a.pk]["best"] == 0.0
    # a resumed run forgets what it logged after its checkpoint: the spike is gone from its best
    run_services.run_discard_after(run_id=a.pk, step=10_000)
    log_points(a, "reward/mean", [0.5] * 10, start=10_001)
    assert selectors.sweep_run_values(sweep_id=sweep.pk, metric="reward/mean", mode="max")[a.pk] == {
        "last": 0.5, "best": pytest.approx(0.6)}
