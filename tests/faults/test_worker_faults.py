"""Faults injected into a running stack (real Redis, real Celery workers, real training processes): the broker
down during a launch or restarted mid-run, a worker SIGKILLed mid-step or while it writes a checkpoint. Each
case ends with the run succeeded with every step stored once, and no training process left."""
from __future__ import annotations

import os
import signal
import time

import pytest

from tests.faults.conftest import launch, process_alive, status, wait_until
from webapp.projects.models import AuditEvent
from webapp.runs.models import Checkpoint, MetricPoint, Run, RunStatus

pytestmark = pytest.mark.django_db(transaction=True)

RUN_TIMEOUT = 240


def assert_done_with_every_step_once(run: Run, steps: int) -> Run:
    wait_until(lambda: status(run) in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.LOST), RUN_TIMEOUT,
               f"run {run.pk} to end")
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    stored = list(MetricPoint.objects.filter(run=run, key="reward/mean").order_by("step").values_list("step", flat=True))
    assert stored == list(range(1, steps + 1))  # no step lost, none twice (one point per run, key and step)
    assert not process_alive(run.pid)
    return run


def test_a_launch_while_redis_is_down_trains_once_redis_is_back(stack):
    stack.redis.stop()
    started = time.monotonic()
    run = launch(total_steps=6)  # answers: the run waits for the queue
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and run.dispatch_note.startswith("waiting for the queue")
    time.sleep(2)
    stack.redis.start()
    wait_until(lambda: status(run) != RunStatus.QUEUED, 60, "the reconciler to send the run once Redis is back")
    recovered_s = time.monotonic() - started
    run = assert_done_with_every_step_once(run, 6)
    assert run.dispatched_at is not None and run.dispatch_note == ""
    for worker in stack.workers:  # the workers lived through the outage
        assert worker.proc.poll() is None, worker.log()[-3000:]
    print(f"\nfault: redis down at launch -> run started {recovered_s:.1f} s after the launch (redis back after 2 s)")


def test_redis_restarted_mid_run_the_run_goes_on(stack):
    run = launch(total_steps=30)
    wait_until(lambda: Run.objects.get(pk=run.pk).last_step >= 3, RUN_TIMEOUT, "step 3")
    stack.redis.stop()
    time.sleep(2)
    stack.redis.start()
    run = assert_done_with_every_step_once(run, 30)
    assert run.restarts == 0 and run.attempts == 1  # the training process never noticed
    for worker in stack.workers:
        assert worker.proc.poll() is None, worker.log()[-3000:]


def test_a_worker_killed_mid_step_is_recovered_from_its_checkpoint_automatically(stack):
    run = launch(total_steps=60, max_restarts=2)
    wait_until(lambda: Checkpoint.objects.filter(run=run, step__gte=4).exists(), RUN_TIMEOUT, "a checkpoint at step 4")
    child = Run.objects.get(pk=run.pk).pid
    killed_at = time.monotonic()
    stack.kill(stack.worker)  # its slot and the training child with it
    wait_until(lambda: not process_alive(child), 10, "the training child to die with its worker")
    stack.start_worker()  # what ./seedbed up's supervisor (or compose's restart policy) does
    wait_until(lambda: Run.objects.get(pk=run.pk).restarts == 1, 60, "the automatic restart")
    wait_until(lambda: Run.objects.get(pk=run.pk).attempts == 2, 60, "the restarted run to start")
    recovered_s = time.monotonic() - killed_at
    run = assert_done_with_every_step_once(run, 60)
    event = AuditEvent.objects.get(action="run.restart", target_id=run.pk)
    assert event.actor_name == "reconciler" and event.detail["from_step"] >= 4
    assert "worker lost" in event.detail["reason"]
    print(f"\nfault: worker SIGKILLed at step ~{event.detail['from_step']} -> running again {recovered_s:.1f} s "
          f"later (lost after 4 s, restart after 1 s), resumed from step {event.detail['from_step']}")


def test_a_worker_killed_while_writing_a_checkpoint_resumes_from_the_previous_one(stack):
    run = launch(total_steps=40, checkpoint_every=1, max_restarts=2)
    wait_until(lambda: Checkpoint.objects.filter(run=run, step__gte=2).exists(), RUN_TIMEOUT, "two checkpoints")
    checkpoints = stack.run_folder(run) / "checkpoints"
    # kill the moment a checkpoint is being written (its temporary folder exists, not yet renamed)
    child = Run.objects.get(pk=run.pk).pid
    writing = wait_until(lambda: next(iter(checkpoints.glob("step_*.tmp")), None), RUN_TIMEOUT,
                         "a checkpoint being written", every=0.002)
    os.kill(child, signal.SIGKILL)  # the training process itself, mid-write (a slot's death would only SIGTERM it)
    stack.kill(stack.worker)
    half = int(writing.name[len("step_"):-len(".tmp")])
    # the write may have finished between the sight of its folder and the kill: then it was renamed and recorded
    recorded = max(Checkpoint.objects.filter(run=run).values_list("step", flat=True))
    assert recorded in (half - 1, half)
    stack.start_worker()
    run = assert_done_with_every_step_once(run, 40)
    event = AuditEvent.objects.get(action="run.restart", target_id=run.pk)
    assert event.detail["from_step"] == recorded  # the last whole, recorded checkpoint: never a half-written one
    print(f"\nfault: worker SIGKILLed while writing checkpoint {half} (recorded before the kill: {recorded}) -> "
          f"resumed from step {recorded}")
    assert not list(checkpoints.glob("*.tmp"))  # rewritten whole when the resumed run reached that step again


def test_a_worker_killed_under_a_trl_run_takes_torchrun_with_it_and_the_run_resumes(stack):
    """engine trl: the worker's death stops the training child, which stops torchrun and its ranks (stop file,
    then signals); the run is declared lost and restarted from its last TRL checkpoint."""
    run = launch(engine="trl", total_steps=300, max_restarts=2)
    wait_until(lambda: Checkpoint.objects.filter(run=run, step__gte=4).exists(), RUN_TIMEOUT, "a checkpoint at step 4")
    child = Run.objects.get(pk=run.pk).pid
    pgid = int((stack.run_folder(run) / "engine.pid").read_text())
    stack.kill(stack.worker)
    wait_until(lambda: not process_alive(child), 30, "the training child to die with its worker")
    wait_until(lambda: not process_alive(pgid), 30, "torchrun to die with the training child")
    stack.start_worker()
    wait_until(lambda: Run.objects.get(pk=run.pk).attempts == 2, 90, "the restarted run to start")
    run = assert_done_with_every_step_once(run, 300)
    event = AuditEvent.objects.get(action="run.restart", target_id=run.pk)
    assert event.detail["from_step"] >= 4 and run.engine_config.get("engine") == "trl"
    assert "resuming at step %d" % event.detail["from_step"] in (stack.run_folder(run) / "worker.log").read_text()
