"""The train_run task end to end: real Redis, a real celery worker subprocess, real training on the tiny task."""
from __future__ import annotations

import os
import signal
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.conftest import tiny_config, wait_for
from webapp.runs import services
from webapp.runs.models import Checkpoint, MetricPoint, Run, RunStatus, Sample
from webapp.sweeps import services as sweep_services
from webapp.projects.services import default_project

pytestmark = [pytest.mark.django_db(transaction=True)]
RUN_TIMEOUT = 240  # generous: the test machine has 2 cores shared with other work


def status_of(run_id: int) -> str:
    return Run.objects.values_list("status", flat=True).get(pk=run_id)


def wait_status(run_id: int, *statuses: str, timeout: float = RUN_TIMEOUT) -> Run:
    wait_for(lambda: status_of(run_id) in statuses, timeout=timeout, what=f"run {run_id} to be {statuses}")
    return Run.objects.get(pk=run_id)


def steps_of(run_id: int, key: str = "reward/mean") -> list[int]:
    return list(MetricPoint.objects.filter(run_id=run_id, key=key).order_by("step").values_list("step", flat=True))


def assert_every_step_complete(run_id: int, last: int) -> None:
    """Steps 1..last are all stored, each with the same full set of metric keys."""
    assert steps_of(run_id) == list(range(1, last + 1))
    per_step = {}
    # (system/* metrics are sampled in time by the supervising worker, not logged by every step)
    for step, key in MetricPoint.objects.filter(run_id=run_id).exclude(key__startswith="system/").values_list("step", "key"):
        per_step.setdefault(step, set()).add(key)
    keys = per_step[1]
    assert {"reward/mean", "accuracy", "entropy", "length/mean", "clip/low_frac", "clip/high_frac"} <= keys
    assert all(per_step[s] == keys for s in range(1, last + 1))


def test_a_run_goes_queued_running_succeeded_with_its_metrics(celery_worker):
    run = services.run_create(config=tiny_config(total_steps=5, seed=3))
    assert run.status == RunStatus.QUEUED
    wait_status(run.pk, RunStatus.RUNNING, RunStatus.SUCCEEDED)
    run = wait_status(run.pk, RunStatus.SUCCEEDED, RunStatus.FAILED)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.last_step == 5 and run.attempts == 1 and run.worker and run.heartbeat_at is not None
    assert run.started_at <= run.ended_at
    assert_every_step_complete(run.pk, 5)
    assert Sample.objects.filter(run=run).exists()
    assert Checkpoint.objects.filter(run=run, step=5).exists()

    # the broker delivers the same task again: a finished run is left exactly as it is
    metrics_before = MetricPoint.objects.filter(run=run).count()
    from workers.tasks import train_run

    train_run.apply_async(args=[run.pk], queue="cpu")
    wait_for(lambda: f"run {run.pk}: nothing to do" in celery_worker.log(), timeout=60,
             what="the worker to receive the re-delivered task")
    again = Run.objects.get(pk=run.pk)
    assert (again.status, again.attempts, again.ended_at) == (RunStatus.SUCCEEDED, 1, run.ended_at)
    assert MetricPoint.objects.filter(run=run).count() == metrics_before


def test_kill_stops_the_run_cleanly_and_keeps_every_metric_up_to_the_kill(celery_worker):
    run = services.run_create(config=tiny_config(total_steps=500, seed=4))
    wait_for(lambda: Run.objects.get(pk=run.pk).last_step >= 3, timeout=RUN_TIMEOUT, what="3 steps")
    services.run_kill(run_id=run.pk, killed_by="user:test", reason="testing kill")
    run = wait_status(run.pk, RunStatus.KILLED, RunStatus.FAILED, timeout=60)
    assert run.status == RunStatus.KILLED and run.killed_by == "user:test" and run.kill_reason == "testing kill"
    assert run.error == ""  # stopped by the loop itself, not terminated after the grace period
    assert 3 <= run.last_step < 500
    assert_every_step_complete(run.pk, run.last_step)
    # the loop saved a checkpoint at the step it stopped at: nothing it emitted before was lost
    assert Checkpoint.objects.filter(run=run).order_by("-step").first().step == run.last_step


def test_a_kill_of_a_stopped_training_process_ends_killed_within_a_few_seconds(celery_worker):
    import time

    run = services.run_create(config=tiny_config(total_steps=500, seed=5))
    run = wait_for(lambda: Run.objects.filter(pk=run.pk, last_step__gte=1, pid__isnull=False).first(),
                   timeout=RUN_TIMEOUT, what="the first step")
    os.kill(run.pid, signal.SIGSTOP)  # a frozen training process never reaches should_stop()
    services.run_kill(run_id=run.pk, killed_by="user:test", reason="frozen")
    asked = time.monotonic()
    # not the grace period (8 s here, 30 s by default) then SIGTERM's 5 s: the worker sees the process stopped
    # (1 s after the kill), continues it with SIGTERM, and SIGKILLs it 3 s later if it has not stopped by then
    run = wait_status(run.pk, RunStatus.KILLED, RunStatus.FAILED, timeout=60)
    took = time.monotonic() - asked
    assert run.status == RunStatus.KILLED and "is stopped (SIGSTOP)" in run.error and str(run.pid) in run.error
    assert took < 7.0, f"a stopped run took {took:.1f} s to end killed"
    assert (run.killed_by, run.kill_reason) == ("user:test", "frozen")
    with pytest.raises(ProcessLookupError):
        os.kill(run.pid, 0)
    print(f"\nkill of a SIGSTOPped training process: killed {took:.1f} s after the request")


def test_a_stale_heartbeat_marks_the_run_lost(celery_worker):
    now = timezone.now()
    stale = Run.objects.create(project=default_project(), config=tiny_config(), seed=0, status=RunStatus.RUNNING, started_at=now,
                               heartbeat_at=now - timedelta(seconds=61))
    fresh = Run.objects.create(project=default_project(), config=tiny_config(), seed=1, status=RunStatus.RUNNING, started_at=now,
                               heartbeat_at=now - timedelta(seconds=30))
    from workers.tasks import maintenance

    maintenance.apply_async(queue="maintenance")
    lost = wait_status(stale.pk, RunStatus.LOST, timeout=60)
    assert "no heartbeat" in lost.error and lost.ended_at is not None
    assert status_of(fresh.pk) == RunStatus.RUNNING


def test_a_sweep_starts_its_next_queued_run_when_one_ends(celery_worker):
    sweep = sweep_services.sweep_create(config=tiny_config(total_steps=3), seeds=[0, 1, 2], concurrency=1,
                                        name="chain")

    def at_most_one_running() -> bool:
        running = sweep.runs.filter(status=RunStatus.RUNNING).count()
        assert running <= 1, "concurrency 1, yet two runs of the sweep were running"
        return not sweep.runs.exclude(status__in=[RunStatus.SUCCEEDED, RunStatus.FAILED]).exists()

    wait_for(at_most_one_running, timeout=3 * RUN_TIMEOUT, what="the three runs to end", every=0.05)
    runs = list(sweep.runs.order_by("enqueued_at"))
    assert [r.status for r in runs] == [RunStatus.SUCCEEDED] * 3
    assert [r.seed for r in runs] == [0, 1, 2]
    # concurrency 1: each run was sent only when the previous one ended. Compared on stamps one transaction wrote
    # (the ending run's ended_at, the next one's enqueued_at), not on started_at, which another process stamps.
    for before, after in zip(runs, runs[1:]):
        assert before.ended_at <= after.enqueued_at <= after.started_at + timedelta(seconds=1)


def test_a_run_never_resumes_from_a_checkpoint_it_did_not_record(celery_worker, worker_env):
    """A run's folder holding another run's checkpoint (a run that had the same id before the database was
    reset) is not resumed from: the run trains from step 1 and the stranger is removed."""
    _, home = worker_env
    cfg = services.as_config(tiny_config(total_steps=4, seed=8)).to_dict()
    run = Run.objects.create(project=default_project(), config=cfg, seed=8, queue="cpu")
    stranger = home / "runs" / str(run.uid) / "checkpoints" / "step_000003"
    stranger.mkdir(parents=True)
    (stranger / "trainer_state.pt").write_bytes(b"not this run's")
    services.run_dispatch(run=run)
    run = wait_status(run.pk, RunStatus.SUCCEEDED, RunStatus.FAILED)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert_every_step_complete(run.pk, 4) and not stranger.exists()


def test_a_run_never_trains_in_another_runs_folder(celery_worker, worker_env):
    """A folder that says it belongs to another run (its run.json) is refused: the run fails saying so, and
    nothing in the folder is read, changed or removed."""
    import json as json_module
    import uuid

    _, home = worker_env
    cfg = services.as_config(tiny_config(total_steps=2, seed=9)).to_dict()
    run = Run.objects.create(project=default_project(), config=cfg, seed=9, queue="cpu")
    folder = home / "runs" / str(run.uid)
    theirs = folder / "checkpoints" / "step_000005"
    theirs.mkdir(parents=True)
    (theirs / "trainer_state.pt").write_bytes(b"another run's")
    other = str(uuid.uuid4())
    (folder / "run.json").write_text(json_module.dumps({"run_uid": other, "run_id": 1}))
    services.run_dispatch(run=run)
    run = wait_status(run.pk, RunStatus.SUCCEEDED, RunStatus.FAILED)
    assert run.status == RunStatus.FAILED and f"belongs to run {other}, not to this run ({run.uid})" in run.error
    assert (theirs / "trainer_state.pt").read_bytes() == b"another run's"
    assert json_module.loads((folder / "run.json").read_text())["run_uid"] == other
