"""A lost worker is noticed within seconds (its own liveness stamp, workers.recovery), its run's page says when
it restarts and from which step, and the restarts' backoff stops growing at SEEDBED_RESTART_BACKOFF_MAX_S."""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.conftest import logged_in
from webapp.runs import services
from webapp.runs.models import Checkpoint, Run, RunStatus

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def make_running(run, *, heartbeat_age_s=0.0, worker=""):
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=timezone.now(), worker=worker,
                                         heartbeat_at=timezone.now() - timedelta(seconds=heartbeat_age_s))
    run.refresh_from_db()
    return run


def test_the_restart_backoff_doubles_up_to_60_s(config):
    run = make_running(services.run_create(config={**config, "max_restarts": 7}), heartbeat_age_s=61)
    delays = []
    for _ in range(7):
        assert services.runs_mark_lost() == [run.pk]
        run.refresh_from_db()
        delays.append(round((run.retry_at - run.enqueued_at).total_seconds()))
        assert services.run_start(run_id=run.pk, worker="w2") == "start"
        run = make_running(run, heartbeat_age_s=61)
    assert delays == [10, 20, 40, 60, 60, 60, 60]


@pytest.fixture
def liveness():
    """The broker's liveness hash (this test session's Redis prefix), emptied before and after."""
    from workers import recovery

    client, prefix = recovery._client()
    key = f"{prefix}{recovery.ALIVE_KEY}"
    client.delete(key)

    def stamp_aged(worker: str, age_s: float) -> None:
        client.hset(key, worker, repr(recovery._now(client) - age_s))

    yield stamp_aged
    client.delete(key)


def test_a_run_whose_worker_stopped_stamping_is_lost_within_seconds_not_after_60(config, liveness):
    config = {**config, "max_restarts": 0}
    dead = make_running(services.run_create(config=config), heartbeat_age_s=15, worker="hostA:101")
    alive = make_running(services.run_create(config=config), heartbeat_age_s=15, worker="hostB:202")
    unknown = make_running(services.run_create(config=config), heartbeat_age_s=15, worker="hostC:303")
    just_beat = make_running(services.run_create(config=config), heartbeat_age_s=0, worker="hostD:404")
    liveness("hostA:101", 12)  # no stamp for 12 s: dead
    liveness("hostB:202", 1)
    liveness("hostD:404", 12)  # (its supervising loop heartbeat the run just now: not concluded yet)
    assert services.runs_mark_lost() == [dead.pk]
    dead.refresh_from_db()
    assert dead.status == RunStatus.LOST and "hostA:101 stopped reporting" in dead.error
    assert dead.failure_kind == "lost_worker"
    for run in (alive, unknown, just_beat):  # a worker never stamped is unknown: the 60 s rule alone
        assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING


def test_the_run_page_and_its_json_say_worker_lost_restarting_from_step_n_in_m_s(config, user, liveness):
    from webapp.api.selectors import run_detail

    run = services.run_create(config={**config, "max_restarts": 2}, user=user)
    run = make_running(run, heartbeat_age_s=15, worker="hostA:101")
    Checkpoint.objects.create(run=run, step=4, path="/x/step_000004")
    liveness("hostA:101", 12)
    assert services.runs_mark_lost() == [run.pk]
    run.refresh_from_db()
    found = re.fullmatch(r"worker lost, restarting from step 4 in (\d+) s", run.recovery_note)
    assert found and 1 <= int(found.group(1)) <= 10, run.recovery_note  # the first restart's 10 s, counting down
    assert run_detail(run)["recovery"] == run.recovery_note
    page = logged_in(user).get(f"/runs/{run.pk}/state/").content.decode()
    assert 'id="recovery-note"' in page and "worker lost, restarting from step 4 in " in page
    Run.objects.filter(pk=run.pk).update(retry_at=timezone.now() - timedelta(seconds=1))
    run.refresh_from_db()
    assert run.recovery_note == "worker lost, restarting from step 4 now"
    assert services.run_start(run_id=run.pk, worker="w2") == "start"
    run.refresh_from_db()
    assert run.recovery_note == "" and run_detail(run)["recovery"] == ""
