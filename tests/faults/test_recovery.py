"""Recovery at the deployment's own thresholds (a 5 s heartbeat, a run lost after 60 s without one, maintenance
every 5 s): a SIGKILLed worker is noticed through its own liveness stamp within seconds, the run page says when
and from where the run restarts, the run resumes on another worker with every step stored once, and the dead
worker's message leaves the broker. A broker outage's errors reach errors.log."""
from __future__ import annotations

import json
import time

import pytest

from tests.conftest import tiny_config
from tests.faults.conftest import process_alive, running_stack, wait_until
from webapp.runs import services
from webapp.runs.models import Checkpoint, MetricPoint, Run, RunStatus

pytestmark = pytest.mark.django_db(transaction=True)

RUN_TIMEOUT = 240


@pytest.fixture
def stack(worker_env, tmp_path, monkeypatch, django_db_blocker):
    """The faults' stack at the default thresholds (only the restart backoff shortened)."""
    thresholds = {"SEEDBED_HEARTBEAT_S": "5", "SEEDBED_LOST_AFTER_S": "60", "SEEDBED_RESTART_BACKOFF_S": "5",
                  "SEEDBED_MAINTENANCE_EVERY_S": "5"}
    with running_stack(worker_env, tmp_path, monkeypatch, django_db_blocker, thresholds) as stack:
        yield stack


def unacked_for(run_id: int) -> list[dict]:
    """The messages of ``run_id`` delivered and not acknowledged, as kombu's Redis transport keeps them."""
    from workers import recovery

    client, prefix = recovery._client()
    found = []
    for value in client.hvals(f"{prefix}unacked"):
        message = json.loads(value)[0]
        if recovery._names_run(message, {run_id}) is not None:
            found.append(message)
    return found


def test_a_sigkilled_worker_is_noticed_within_seconds_and_its_run_resumes_elsewhere_once(stack):
    run = services.run_create(config=tiny_config(total_steps=40, checkpoint_every=2, max_restarts=2))
    wait_until(lambda: Checkpoint.objects.filter(run=run, step__gte=4).exists(), RUN_TIMEOUT, "a checkpoint at step 4")
    assert len(unacked_for(run.pk)) == 1  # acknowledged late: the worker holds the message while it trains
    child = Run.objects.get(pk=run.pk).pid
    killed_at = time.monotonic()
    stack.kill(stack.worker)  # its whole process group: the worker, its slot; the training child follows
    wait_until(lambda: not process_alive(child), 30, "the training child to die with its worker")
    stack.start_worker()
    restarting = wait_until(lambda: Run.objects.filter(pk=run.pk, restarts=1, status=RunStatus.QUEUED).first(),
                            90, "the run to be declared lost and restarting")
    noticed_s = time.monotonic() - killed_at
    assert noticed_s < 20, f"noticed {noticed_s:.1f} s after the kill"
    note = restarting.recovery_note
    step = restarting.checkpoints.order_by("-step").values_list("step", flat=True).first()
    assert note.startswith(f"worker lost, restarting from step {step} in ") and note.endswith(" s"), note
    assert "stopped reporting" in restarting.dispatch_note  # its liveness, not the 60 s heartbeat rule
    # the dead worker's message left the broker before the run is sent again
    wait_until(lambda: not unacked_for(run.pk), 10, "the dead worker's unacknowledged message to be removed")
    wait_until(lambda: Run.objects.get(pk=run.pk).attempts == 2, 90, "the restarted run to start")
    resumed_s = time.monotonic() - killed_at
    wait_until(lambda: Run.objects.values_list("status", flat=True).get(pk=run.pk) in (
        RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.LOST), RUN_TIMEOUT, "the run to end")
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    stored = list(MetricPoint.objects.filter(run=run, key="reward/mean").order_by("step").values_list("step", flat=True))
    assert stored == list(range(1, 41))  # every step once
    assert not unacked_for(run.pk)  # the second worker acknowledged its own message
    print(f"\nrecovery: worker SIGKILLed -> declared lost, restarting from step {step}, {noticed_s:.1f} s later "
          f"(heartbeat rule: 60 s); training again {resumed_s:.1f} s after the kill (backoff 5 s)")


def test_a_broker_outage_seen_by_the_workers_is_in_errors_log(stack):
    errors = stack.home / "logs" / "errors.log"
    stack.redis.stop()
    try:
        # the worker's consumer (celery.worker.consumer) and the beat (celery.beat) log their lost connection
        wait_until(lambda: errors.exists() and "Cannot connect to redis://" in errors.read_text(), 90,
                   "the broker error in errors.log")
    finally:
        stack.redis.start()
    text = errors.read_text()
    assert "celery.worker.consumer" in text or "celery.beat" in text, text[-2000:]
    for worker in stack.workers:  # they lived through it
        assert worker.proc.poll() is None, worker.log()[-3000:]
