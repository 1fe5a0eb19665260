"""Signals are outcomes, kill means killed (real Redis, real Celery workers, real training on the tiny model):

- a training process SIGKILLed (what the out-of-memory killer does) is a lost attempt: the run restarts from
  its last checkpoint under ``max_restarts`` and succeeds with every step's metrics once; with no restart
  allowed it ends lost, the error naming the signal first and carrying no progress bars;
- a kill asked for while the run's worker is dead ends ``killed`` by whoever asked, with their reason, as soon
  as the loss is seen, and the kill is in the run's Activity."""
from __future__ import annotations

import os
import signal
import time

import pytest

from tests.conftest import logged_in
from tests.faults.conftest import launch, process_alive, status, wait_until
from tests.workers.test_train_run import assert_every_step_complete
from webapp.projects.models import AuditEvent
from webapp.runs.models import Checkpoint, Run, RunStatus

pytestmark = pytest.mark.django_db(transaction=True)

RUN_TIMEOUT = 240


def sigkill_the_training_process(run: Run, after_checkpoint: int) -> int:
    """SIGKILL the run's training child (its pid: Run.pid) once a checkpoint at ``after_checkpoint`` is recorded
    and a peak RSS reported; returns the pid."""
    wait_until(lambda: Checkpoint.objects.filter(run=run, step__gte=after_checkpoint).exists()
               and run.metrics.filter(key="system/rss_mb").exists(), RUN_TIMEOUT,
               f"a checkpoint at step {after_checkpoint} and a memory sample")
    child = Run.objects.get(pk=run.pk).pid
    os.kill(child, signal.SIGKILL)
    wait_until(lambda: not process_alive(child), 30, "the training process to die")
    return child


def test_a_sigkilled_training_process_restarts_from_its_checkpoint_and_succeeds(stack):
    run = launch(total_steps=30, max_restarts=2)
    sigkill_the_training_process(run, 4)
    killed_at = time.monotonic()
    wait_until(lambda: Run.objects.get(pk=run.pk).attempts == 2, 120, "the restarted attempt to start")
    recovered_s = time.monotonic() - killed_at
    wait_until(lambda: status(run) in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.LOST), RUN_TIMEOUT,
               f"run {run.pk} to end")
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.restarts == 1 and run.attempts == 2 and run.error == ""
    assert_every_step_complete(run.pk, 30)  # every step's metrics, each once
    event = AuditEvent.objects.get(action="run.restart", target_id=run.pk)
    assert event.detail["from_step"] >= 4 and event.detail["restart"] == 1 and event.detail["of"] == 2
    assert event.actor_name.startswith("worker:")  # the worker that saw its training process die
    assert event.detail["reason"].startswith("training process killed by SIGKILL (") and "peak RSS" in \
        event.detail["reason"], event.detail
    assert f"resuming at step {event.detail['from_step']}:" in (stack.run_folder(run) / "worker.log").read_text()
    assert stack.worker.proc.poll() is None  # the worker's slot lived on: only its child was killed
    print(f"\nfault: training process SIGKILLed at step ~{event.detail['from_step']} -> training again "
          f"{recovered_s:.1f} s later (restart backoff 1 s), resumed from step {event.detail['from_step']}")


def test_a_sigkilled_training_process_with_no_restart_left_ends_lost_naming_the_signal(stack):
    run = launch(total_steps=300, max_restarts=0)
    sigkill_the_training_process(run, 2)
    killed_at = time.monotonic()
    wait_until(lambda: status(run) != RunStatus.RUNNING, 60, "the run to end")
    ended_s = time.monotonic() - killed_at
    run.refresh_from_db()
    assert run.status == RunStatus.LOST and run.restarts == 0 and run.failure_kind == "signal", (run.status, run.error)
    first, *rest = run.error.splitlines()
    assert first.startswith("training process killed by SIGKILL (") and "peak RSS" in first, run.error
    assert "gave up" not in first  # (no restart was allowed)
    assert not any("%|" in line or "it/s]" in line for line in rest), run.error  # no progress bars
    assert any("training in" in line for line in rest), run.error  # the log's meaningful lines follow
    lost = AuditEvent.objects.get(action="run.lost", target_id=run.pk)  # its Activity records the end, and why
    assert lost.detail["reason"] == first and lost.actor_name.startswith("worker:"), lost.detail
    assert stack.worker.proc.poll() is None
    print(f"\nfault: training process SIGKILLed, max_restarts 0 -> lost {ended_s:.1f} s later: {first}")


def test_a_kill_asked_while_the_worker_is_dead_ends_killed_by_that_user_in_the_activity(stack, user):
    run = launch(total_steps=300, max_restarts=2)
    run = wait_until(lambda: Run.objects.filter(pk=run.pk, last_step__gte=2, pid__isnull=False).first(),
                     RUN_TIMEOUT, "step 2")
    stack.kill(stack.worker)  # the worker and its training process are gone
    client = logged_in(user)
    answer = client.post(f"/runs/{run.pk}/kill/", {"reason": "the worker looks dead"})
    assert answer.status_code == 302
    asked_at = time.monotonic()
    assert status(run) == RunStatus.RUNNING  # nobody has seen the loss yet
    wait_until(lambda: status(run) != RunStatus.RUNNING, 60, "the loss to be seen")
    ended_s = time.monotonic() - asked_at
    run.refresh_from_db()
    assert run.status == RunStatus.KILLED, (run.status, run.error)
    assert (run.killed_by, run.kill_reason) == ("user:ada", "the worker looks dead")
    assert "gave up" not in run.error and run.restarts == 0 and run.ended_at is not None
    kill = AuditEvent.objects.get(action="run.kill", target_id=run.pk)
    assert kill.actor_name == "ada" and kill.detail["reason"] == "the worker looks dead"
    page = client.get(f"/runs/{run.pk}/").content.decode()
    activity = page[page.index('id="audit"'):]
    assert 'data-action="run.kill"' in activity and "the worker looks dead" in activity
    assert not AuditEvent.objects.filter(action="run.restart", target_id=run.pk).exists()
    assert not process_alive(run.pid)
    print(f"\nfault: kill asked while the worker was dead -> killed {ended_s:.1f} s later (lost after 4 s)")
