"""Decisions with few slots: a seed is compared with the curves its peers had at the same step, finished and
stopped peers included, so a sweep whose seeds run one at a time is decided; where no decision can be made the
run's row on the dashboard says why; the "can never act" note counts the slots actually free."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.sweeps.conftest import log_points, make_running
from webapp.runs import services as run_services
from webapp.runs.models import Run, RunStatus, WorkerCapacity
from webapp.sweeps import selectors, services
from webapp.sweeps.models import SweepPlan
from webapp.sweeps.policies import make_policy

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("no_worker_reports")]

METRIC = "reward/mean"


def curve(level: float, steps: int = 40) -> list[tuple[int, float]]:
    return [(s, level + 0.01 * (s % 2)) for s in range(1, steps + 1)]


def test_asha_compares_a_seed_that_runs_alone_with_the_rung_values_of_the_seeds_that_ran_before_it():
    # what the live check feeds with concurrency 1: seeds 0-2 ended (two finished, one killed at step 15, each
    # told with mark_stopped), seed 3 runs; its value at rung 10 is compared with theirs there (the median rule
    # already read ended peers' values at the same step: tests/sweeps/test_policy_check.py, the late run)
    policy = make_policy({"name": "asha", "metric": METRIC, "max_steps": 40, "min_peers": 3, "smoothing": "none"})
    for run_id, (level, last) in {"s0": (0.5, 40), "s1": (0.6, 40), "s2": (0.55, 15)}.items():
        for step, value in curve(level, last):
            policy.observe(run_id, step, value)
        policy.mark_stopped(run_id)
    for step, value in curve(0.2, 12):
        policy.observe("s3", step, value)
    [stop] = policy.decide()
    assert (stop.run_id, stop.action, stop.n_peers) == ("s3", "stop", 3)
    # rung 10's values: 0.5, 0.6, the killed seed's 0.55 and its own 0.2; the top 2 continue (cut-off 0.55)
    assert stop.threshold == pytest.approx(0.55) and stop.step == 12
    assert "rung 0 (step 10)" in stop.reason and "ranks 4 of 4" in stop.reason


def test_the_policy_says_why_it_cannot_decide_about_a_run_yet():
    median = make_policy({"name": "median", "metric": METRIC, "max_steps": 40, "min_peers": 3, "grace_steps": 8})
    peers = [(40, False), (40, False), (12, True)]  # two finished, one stopped at step 12
    assert median.waiting(5, peers) == "judged from step 8"
    assert median.waiting(0, [], queued=True) == "queued; judged from step 8 once it runs"
    assert median.waiting(12, peers) is None  # three peers reached step 12
    assert median.waiting(20, peers) == "waiting for peers at step 20: 2 of 3"
    every_5 = make_policy({"name": "median", "metric": METRIC, "max_steps": 40, "min_peers": 3, "eval_every": 5})
    assert every_5.waiting(22, [(40, False)]) == "waiting for peers at step 18: 1 of 3"  # judged at 8, 13, 18, 23
    asha = make_policy({"name": "asha", "metric": METRIC, "max_steps": 40, "min_peers": 3})
    assert asha.waiting(25, [(40, False), (9, True), (30, False)]) == "waiting for peers at step 10: 2 of 3"
    # bayes compares forecast finals: every seed in the race counts, whatever step it stands at, but not one
    # killed before its end
    bayes = make_policy({"name": "bayes", "metric": METRIC, "max_steps": 40, "min_peers": 2})
    assert bayes.waiting(20, [(12, False), (30, True)]) == \
        "waiting for peers in the race: 1 of 2 (a run killed or failed before its end is not one)"
    assert bayes.waiting(20, [(12, False), (5, False)]) is None
    assert make_policy({}).waiting(20, []) is None  # manual never decides


def started(run: Run) -> Run:
    run = make_running(run)
    Run.objects.filter(pk=run.pk).update(enqueued_at=timezone.now())
    return run


@pytest.mark.django_db
def test_each_run_row_of_a_sweep_run_one_at_a_time_says_why_it_is_not_decided(
        config, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        sweep = services.sweep_create(config={**config, "total_steps": 40}, seeds=[0, 1, 2, 3], concurrency=1,
                                      policy={"name": "median", "metric": METRIC, "min_peers": 2, "grace_steps": 8})
    first, second, third, fourth = sweep.runs.order_by("pk")
    first = make_running(first)
    log_points(first, METRIC, [0.5] * 5)

    def waiting() -> dict[int, str]:
        panel = selectors.sweep_panel(sweep=sweep, metric=METRIC)
        return {row["id"]: row["waiting"] for row in panel["runs"]}

    assert waiting() == {first.pk: "judged from step 8",
                         **{r.pk: "queued; judged from step 8 once it runs"
                            for r in (second, third, fourth)}}
    log_points(first, METRIC, [0.5] * 35, start=6)
    Run.objects.filter(pk=first.pk).update(status=RunStatus.SUCCEEDED, ended_at=timezone.now())
    second = make_running(second)
    log_points(second, METRIC, [0.5] * 20)
    assert waiting()[second.pk] == "waiting for peers at step 20: 1 of 2"
    html = selectors.sweep_panel(sweep=sweep, metric=METRIC)
    assert first.pk not in {row["id"] for row in html["runs"] if row["waiting"]}  # it ended: nothing to wait for


@pytest.mark.django_db
def test_the_can_never_act_note_counts_the_slots_other_runs_hold_at_launch_and_at_each_check(
        config, django_capture_on_commit_callbacks, client_in):
    WorkerCapacity.objects.create(worker="w1@test", queues=["cpu"], slots=2, cores=2, memory_mb=4096,
                                  updated_at=timezone.now())
    with django_capture_on_commit_callbacks(execute=False):
        other = started(run_services.run_create(config={**config, "total_steps": 40}))
        policy = {"name": "median", "metric": METRIC, "min_peers": 3}
        sweep = services.sweep_create(config={**config, "total_steps": 40}, seeds=[0, 1, 2], concurrency=2,
                                      policy=policy)
    assert SweepPlan.objects.get(sweep=sweep).warnings == []  # computed by a task after the launch, not in it
    services.sweep_update_policy_note(sweep_id=sweep.pk)  # what the first check does
    [note] = SweepPlan.objects.get(sweep=sweep).warnings
    assert note.startswith("the median policy can never stop a run of this sweep (3 runs, 1 at a time)")
    assert "only 1 of its 2 slots is free: the workers of queue cpu have 2, and 1 other run holds 1" in note
    assert "(3 runs, 1 at a time)" in client_in.get(f"/sweeps/{sweep.pk}/").content.decode()

    # the other run ends: at the next check the note counts both slots
    Run.objects.filter(pk=other.pk).update(status=RunStatus.SUCCEEDED, ended_at=timezone.now())
    services.sweep_apply_policy(sweep_id=sweep.pk)
    [note] = SweepPlan.objects.get(sweep=sweep).warnings
    assert note.startswith("the median policy can never stop a run of this sweep (3 runs, 2 at a time)")
    assert "free:" not in note
    # the open page's live tables bring the new note along (out of band, with the runs table)
    panel = client_in.get(f"/sweeps/{sweep.pk}/panel/").content.decode()
    assert '<div id="policy-warnings" hx-swap-oob="true">' in panel and "(3 runs, 2 at a time)" in panel
    # a worker report gone stale (the worker was killed) counts for nothing: the configured concurrency again
    WorkerCapacity.objects.update(updated_at=timezone.now() - timedelta(hours=1))
    assert services.slots_free(queue="cpu", concurrency=2) == (2, "")
