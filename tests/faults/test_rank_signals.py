"""A rank of a 2-rank DDP run SIGKILLed mid-run (what the out-of-memory killer does) is a lost attempt, as a
one-process run's training process is (real Redis, real Celery workers, torchrun, gloo, the tiny model): the run
restarts from its last checkpoint under ``max_restarts``, naming the rank, and finishes with every step's metrics
once. (With no restart left it ends lost: tests/workers/test_distributed_runs.py.)"""
from __future__ import annotations

import os
import signal
import time

import pytest

from tests.faults.conftest import launch, process_alive, status, wait_until
from tests.workers.test_train_run import assert_every_step_complete
from webapp.projects.models import AuditEvent
from webapp.runs.models import Checkpoint, Run, RunStatus

pytestmark = pytest.mark.django_db(transaction=True)

RUN_TIMEOUT = 300
STEPS = 16


def test_a_sigkilled_rank_restarts_the_run_from_its_checkpoint_and_it_finishes(stack):
    run = launch(total_steps=STEPS, max_restarts=2, nproc_per_node=2, strategy="ddp", seed=31)
    run = wait_until(lambda: Checkpoint.objects.filter(run=run, step__gte=4).exists()
                     and Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).exclude(ranks=[]).first(),
                     RUN_TIMEOUT, "a checkpoint at step 4 and the ranks stored")
    rank1 = {r["rank"]: r["pid"] for r in run.ranks}[1]
    os.kill(rank1, signal.SIGKILL)
    killed_at = time.monotonic()
    wait_until(lambda: not process_alive(rank1), 30, "rank 1 to die")
    wait_until(lambda: Run.objects.get(pk=run.pk).attempts == 2, 120, "the restarted attempt to start")
    recovered_s = time.monotonic() - killed_at
    wait_until(lambda: status(run) in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.LOST), RUN_TIMEOUT,
               f"run {run.pk} to end")
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error[:1000]
    assert run.restarts == 1 and run.attempts == 2 and run.error == ""
    assert_every_step_complete(run.pk, STEPS)  # every step's metrics, each once
    event = AuditEvent.objects.get(action="run.restart", target_id=run.pk)
    assert event.actor_name.startswith("worker:")  # the worker whose training process saw its rank die
    assert event.detail["reason"].startswith("rank 1 killed by SIGKILL ("), event.detail
    assert event.detail["from_step"] >= 4 and event.detail["restart"] == 1
    log = (stack.run_folder(run) / "worker.log").read_text()
    assert f"resuming at step {event.detail['from_step']}:" in log
    assert stack.worker.proc.poll() is None
    print(f"\nfault: rank 1 of 2 SIGKILLed at step ~{event.detail['from_step']} -> training again "
          f"{recovered_s:.1f} s later (restart backoff 1 s), succeeded")
