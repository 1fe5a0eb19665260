"""A run on the built-in model holds no worker slot while another process builds that model: the worker that takes
its message gives the slot back (``workers.tasks.train_run`` -> ``services.run_defer_for_build``), the run stays
queued saying what it waits for, and the reconciler's pass sends it again once the build is done. Before: the run
was claimed and its training waited for the build inside the slot, so a run on another model waited behind it.

A real Celery worker with one slot, on a queue of its own; the build is the test holding the model folder's lock
(training.tiny), as a building process does."""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import time

import pytest

from tests.conftest import WorkerProcess, tiny_config, wait_for
from webapp.runs import services
from webapp.runs.models import Run, RunStatus
from webapp.runs.waiting import queue_reasons

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]  # the reconciler pass locks rows: again on PostgreSQL

QUEUE = "buildwait"


def test_a_run_waiting_for_the_build_gives_its_slot_to_a_run_on_another_model_and_starts_after_the_build(
        worker_env, tiny_model_dir, tmp_path, monkeypatch, settings, user):
    env, home = worker_env
    building = tmp_path / "tiny"  # the built-in model's folder, its build under way: its lock held here
    monkeypatch.setenv("SEEDBED_TINY_MODEL", str(building))
    settings.SEEDBED_AUTO_QUEUE = QUEUE
    other_model = tmp_path / "other-model"
    shutil.copytree(tiny_model_dir, other_model)
    lock = open(f"{building}.lock", "a+")
    fcntl.flock(lock, fcntl.LOCK_EX)
    (tmp_path / "tiny.progress.json").write_text(json.dumps(
        {"step": 40, "pass1": 0.05, "target": 0.15, "started_at": time.time() - 20, "pid": os.getpid()}))
    worker = WorkerProcess({**env, "SEEDBED_TINY_MODEL": str(building)}, home, concurrency=1, queues=QUEUE,
                           name="buildwait")
    try:
        waits = services.run_create(config=tiny_config(device="auto", total_steps=3), name="on the built-in model")
        wait_for(lambda: Run.objects.get(pk=waits.pk).dispatch_note.startswith(services.WAITING_FOR_BUILD),
                 timeout=60, what="the worker to give the run's slot back")
        waits.refresh_from_db()
        assert (waits.status, waits.started_at, waits.dispatched_at) == (RunStatus.QUEUED, None, None)
        assert waits.retry_at is not None
        reason = queue_reasons(runs=[waits], viewer=user)[waits.pk]
        assert reason == ("the built-in model is being built (SFT step 40, pass@1 0.050 of 0.15); it holds no "
                          "worker slot meanwhile")

        # the one slot is free: a run on another model trains to its end while the build goes on
        other = services.run_create(config=tiny_config(device="auto", total_steps=3, model_path=str(other_model)),
                                    name="on another model")
        wait_for(lambda: Run.objects.get(pk=other.pk).status == RunStatus.SUCCEEDED, timeout=180,
                 what="the run on another model to finish in the slot")
        assert Run.objects.get(pk=waits.pk).status == RunStatus.QUEUED

        # the build is done: the reconciler's pass sends the waiting run again and it trains
        shutil.copytree(tiny_model_dir, building, dirs_exist_ok=True)
        fcntl.flock(lock, fcntl.LOCK_UN)
        wait_for(lambda: services.runs_redispatch() or Run.objects.get(pk=waits.pk).status != RunStatus.QUEUED,
                 timeout=30, what="the reconciler to send the run again", every=1.0)
        wait_for(lambda: Run.objects.get(pk=waits.pk).status == RunStatus.SUCCEEDED, timeout=180,
                 what="the run on the built-in model to finish once it is built")
    finally:
        lock.close()
        worker.stop()
