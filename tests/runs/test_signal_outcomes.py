"""A training process killed by a signal it did not ask for is a lost attempt (restarted under max_restarts),
not a failure; a kill requested on a run whose worker is gone ends killed, by whoever asked, in its Activity.
(The same with real workers and real training: tests/faults/test_signal_outcomes.py.)"""
from datetime import timedelta

import pytest
from django.utils import timezone

from webapp.projects.models import AuditEvent
from webapp.runs import services
from webapp.runs.models import Checkpoint, Run, RunStatus

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

SIGKILLED = ("training process killed by SIGKILL (out of memory? the kernel recorded 1 out-of-memory kill(s) "
             "(cgroup) while it ran; peak RSS 812 MB)\nstep 3 done")


def running(config, *, max_restarts, heartbeat_age_s=0.0):
    run = services.run_create(config={**config, "max_restarts": max_restarts})
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=timezone.now(), worker="w:1",
                                         heartbeat_at=timezone.now() - timedelta(seconds=heartbeat_age_s))
    run.refresh_from_db()
    return run


def test_a_signalled_training_process_restarts_from_its_checkpoint_under_max_restarts(config):
    run = running(config, max_restarts=2)
    Checkpoint.objects.create(run=run, step=3, path="/x/step_000003")
    status = services.run_record_exit(run_id=run.pk, outcome="signaled", detail=SIGKILLED, worker="w:1")
    run.refresh_from_db()
    assert status == run.status == RunStatus.QUEUED and run.restarts == 1 and run.worker == ""
    assert run.retry_at is not None and run.ended_at is None
    assert run.dispatch_note.startswith("restart 1 of 2 in ") and "from step 3: training process killed by SIGKILL " \
        "(out of memory?" in run.dispatch_note
    event = AuditEvent.objects.get(action="run.restart", target_id=run.pk)
    assert event.detail["from_step"] == 3 and event.detail["reason"].startswith("training process killed by SIGKILL")
    assert event.actor_name == "worker:w:1"  # the worker that saw its training process die restarted it
    assert "step 3 done" not in event.detail["reason"]  # the cause, one line
    assert run.recovery_note.startswith("training process killed by SIGKILL, restarting from step 3 in ")


def test_a_rank_killed_by_a_signal_restarts_the_run_naming_the_rank(config):
    run = running({**config, "nproc_per_node": 2, "strategy": "ddp"}, max_restarts=2)
    Checkpoint.objects.create(run=run, step=6, path="/x/step_000006")
    detail = "rank 1 killed by SIGKILL (out of memory? ...; peak RSS 900 MB)\n(local rank 1, pid 42; ...)"
    services.run_record_exit(run_id=run.pk, outcome="signaled", detail=detail, worker="w:1")
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and run.restarts == 1
    assert run.recovery_note.startswith("rank 1 killed by SIGKILL, restarting from step 6 in "), run.recovery_note
    event = AuditEvent.objects.get(action="run.restart", target_id=run.pk)
    assert event.detail["reason"].startswith("rank 1 killed by SIGKILL (") and "pid 42" not in event.detail["reason"]


def test_a_signalled_training_process_past_max_restarts_ends_lost_naming_the_signal(config):
    run = running(config, max_restarts=0)
    status = services.run_record_exit(run_id=run.pk, outcome="signaled", detail=SIGKILLED, worker="w:1")
    run.refresh_from_db()
    assert status == run.status == RunStatus.LOST and run.ended_at is not None
    assert run.error.startswith("training process killed by SIGKILL (out of memory?")
    assert run.error.endswith("step 3 done") and "gave up" not in run.error

    run = running(config, max_restarts=1)
    Run.objects.filter(pk=run.pk).update(restarts=1)
    services.run_record_exit(run_id=run.pk, outcome="signaled", detail="training process killed by SIGSEGV",
                             worker="w:1")
    run.refresh_from_db()
    assert run.status == RunStatus.LOST
    assert run.error == "training process killed by SIGSEGV; gave up after 1 automatic restart(s)"


def test_an_error_the_run_raised_itself_still_fails_it(config):
    run = running(config, max_restarts=2)
    services.run_record_exit(run_id=run.pk, outcome="failed", detail="training process exited with code 1")
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.restarts == 0


def test_a_signal_after_a_kill_request_ends_killed(config):
    run = running(config, max_restarts=2)
    services.run_kill(run_id=run.pk, killed_by="user:ada", reason="enough")
    services.run_record_exit(run_id=run.pk, outcome="signaled", detail=SIGKILLED, worker="w:1")
    run.refresh_from_db()
    assert run.status == RunStatus.KILLED and run.killed_by == "user:ada" and run.restarts == 0


def test_a_kill_requested_while_the_worker_is_gone_ends_killed_when_the_loss_is_seen(config, user):
    run = running(config, max_restarts=2, heartbeat_age_s=61)
    services.run_kill(run_id=run.pk, user=user, reason="worker looks dead")
    assert services.runs_mark_lost() == [run.pk]
    run.refresh_from_db()
    assert run.status == RunStatus.KILLED and run.ended_at is not None and run.restarts == 0
    assert run.killed_by == "user:ada" and run.kill_reason == "worker looks dead"
    assert "gave up" not in run.error and "no heartbeat" in run.error
    kill = AuditEvent.objects.get(action="run.kill", target_id=run.pk)
    assert kill.actor_name == "ada" and kill.detail["reason"] == "worker looks dead"
    assert not AuditEvent.objects.filter(action="run.restart", target_id=run.pk).exists()
