"""The runs' maintenance pass (webapp/runs/services/recover.py: runs_recover, the run job kind's recover) in one
pass: a run whose worker stopped heartbeating is marked lost and a queued run whose message never reached the
broker is sent again; a fresh run and a run already sent are left alone, and a second pass finds nothing to do."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from webapp.runs import services
from webapp.runs.models import Run, RunStatus
from webapp.runs.services import runs_recover as reconcile

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def messages(callbacks) -> int:
    """How many of the on-commit callbacks send a task (workers.dispatch.send_on_commit's)."""
    return sum(1 for c in callbacks if c.__qualname__.startswith("send_on_commit."))


@pytest.fixture
def config(model_dir):
    return {"preset": "grpo", "model_path": model_dir, "total_steps": 6, "prompts_per_step": 4, "group_size": 4,
            "max_restarts": 0}


def test_one_pass_marks_lost_runs_and_sends_unsent_ones_again_then_finds_nothing(
        config, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):  # their first sends never reach a broker
        stale, fresh, unsent, dispatched = (services.run_create(config=config) for _ in range(4))
    now = timezone.now()
    Run.objects.filter(pk=stale.pk).update(status=RunStatus.RUNNING, started_at=now,
                                           heartbeat_at=now - timedelta(seconds=61))
    Run.objects.filter(pk=fresh.pk).update(status=RunStatus.RUNNING, started_at=now, heartbeat_at=now)
    Run.objects.filter(pk=unsent.pk).update(enqueued_at=now - timedelta(seconds=30), dispatched_at=None)
    Run.objects.filter(pk=dispatched.pk).update(enqueued_at=now - timedelta(seconds=30), dispatched_at=now)

    with django_capture_on_commit_callbacks(execute=False) as sends:
        assert reconcile() == {"lost": [stale.pk], "redispatched": [unsent.pk], "disk_restarted": []}
    assert messages(sends) == 1  # the unsent run's, once (the lost run's folder clean-up is another callback)
    assert Run.objects.get(pk=stale.pk).status == RunStatus.LOST
    assert Run.objects.get(pk=fresh.pk).status == RunStatus.RUNNING

    Run.objects.filter(pk=unsent.pk).update(dispatched_at=timezone.now())  # the broker took it this time
    with django_capture_on_commit_callbacks(execute=False) as sends:
        assert reconcile() == {"lost": [], "redispatched": [], "disk_restarted": []}
    assert messages(sends) == 0
