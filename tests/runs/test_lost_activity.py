"""A run that ends lost is in its Activity (``run.lost``) with its cause's one line, whichever path ends it: the
reconciler (its worker lost, no restart left) or its worker (a signal killed its training process past
``max_restarts``); a restart's Activity names the signal, not the last line of the log that follows it."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.conftest import logged_in, tiny_config
from webapp.projects.models import AuditEvent
from webapp.runs import services
from webapp.runs.models import Run, RunStatus

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

# what workers.tasks.signal_detail sends: the signal's line, then the log's last meaningful lines
SIGNAL_DETAIL = ("training process killed by SIGKILL (out of memory? peak RSS 812 MB)\n"
                 "run 1: training in /tmp/x\nTraceback (most recent call last):\nRuntimeError: DataLoader worker died")


def running(max_restarts: int, **fields) -> Run:
    run = services.run_create(config=tiny_config(total_steps=50, max_restarts=max_restarts))
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=timezone.now(), worker="host:7",
                                         last_step=12, **fields)
    run.refresh_from_db()
    return run


def test_a_run_the_reconciler_gives_up_on_is_lost_in_its_activity(user):
    run = running(0, heartbeat_at=timezone.now() - timedelta(seconds=120))
    assert services.runs_mark_lost() == [run.pk]
    run.refresh_from_db()
    assert run.status == RunStatus.LOST
    event = AuditEvent.objects.get(action="run.lost", target_type="run", target_id=run.pk)
    assert event.actor_name == "reconciler" and event.detail["reason"].startswith("worker lost: no heartbeat since")
    assert (event.detail["at_step"], event.detail["restarts"], event.detail["of"]) == (12, 0, 0)
    activity = logged_in(user).get(f"/runs/{run.pk}/").content.decode()
    activity = activity[activity.index('id="audit"'):]
    assert 'data-action="run.lost"' in activity and "worker lost: no heartbeat since" in activity


def test_a_run_a_signal_ends_past_its_restarts_is_lost_in_its_activity_naming_the_signal():
    run = running(1, heartbeat_at=timezone.now())
    # the first signal: a restart, whose reason is the signal's line (the log's lines stay in the error)
    assert services.run_record_exit(run_id=run.pk, outcome="signaled", detail=SIGNAL_DETAIL) == RunStatus.QUEUED
    restart = AuditEvent.objects.get(action="run.restart", target_id=run.pk)
    assert restart.detail["reason"] == "training process killed by SIGKILL (out of memory? peak RSS 812 MB)"
    assert not AuditEvent.objects.filter(action="run.lost", target_id=run.pk).exists()
    assert services.run_start(run_id=run.pk, worker="host:8") == "start"
    # the second, with no restart left: lost, in the Activity with the signal and the restarts it had
    assert services.run_record_exit(run_id=run.pk, outcome="signaled", detail=SIGNAL_DETAIL) == RunStatus.LOST
    event = AuditEvent.objects.get(action="run.lost", target_id=run.pk)
    assert event.actor_name == "worker:host:8"
    assert event.detail["reason"] == ("training process killed by SIGKILL (out of memory? peak RSS 812 MB); gave up "
                                      "after 1 automatic restart(s)")
    assert "DataLoader" not in event.detail["reason"] and event.detail["restarts"] == 1 and event.detail["of"] == 1
