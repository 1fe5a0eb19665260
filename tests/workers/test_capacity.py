"""A real training worker reports its capacity (cores, memory, GPUs, queues, slots) when it starts, the web app
caps configs by it, and the report goes when the worker stops (workers.capacity, webapp.runs.capacity)."""
from __future__ import annotations

import os

import pytest
from django.test import override_settings

from tests.conftest import WorkerProcess, tiny_config, wait_for
from training.fields import FieldErrors
from webapp.runs import services
from webapp.runs.models import Run, WorkerCapacity

pytestmark = [pytest.mark.django_db(transaction=True)]


def memory_mb() -> int:
    with open("/proc/meminfo") as fh:
        return next(int(line.split()[1]) // 1024 for line in fh if line.startswith("MemTotal:"))


def test_a_worker_reports_its_capacity_and_launches_are_capped_by_it(worker_env):
    env, home = worker_env
    worker = WorkerProcess(env, home, concurrency=1, queues="capq,maintenance", pool="solo", name="cap")
    try:
        row = wait_for(lambda: WorkerCapacity.objects.filter(worker__startswith="test-cap-").first(), timeout=30,
                       what="the worker's capacity report")
        cores = len(os.sched_getaffinity(0))
        assert (row.queues, row.slots, row.cores, row.gpus) == (["capq"], 1, cores, 0)  # maintenance: not a slot
        assert row.memory_mb == memory_mb()
        assert row.worker in worker.log()  # its Celery node name
        with override_settings(SEEDBED_AUTO_QUEUE="capq"):
            with pytest.raises(FieldErrors) as exc:
                services.run_create(config=tiny_config(device="auto", nproc_per_node=cores + 1, strategy="ddp",
                                                       prompts_per_step=4 * (cores + 1)))
            assert exc.value.errors["nproc_per_node"].startswith(f"at most {cores} on queue capq (its largest worker "
                                                                 f"has {cores} core")
            assert not Run.objects.exists()
    finally:
        worker.stop()
    assert not WorkerCapacity.objects.filter(worker=row.worker).exists()  # gone with its worker


def test_the_session_workers_report_and_the_cpu_queue_is_capped_by_them(celery_worker):
    prefix = celery_worker.name.split("@")[0] + "@"
    row = wait_for(lambda: WorkerCapacity.objects.filter(worker__startswith=prefix).first(), timeout=60,
                   what="the cpu worker's capacity report")
    assert (row.queues, row.slots, row.cores) == (["cpu"], 2, len(os.sched_getaffinity(0)))
    maintenance = celery_worker.maintenance.name.split("@")[0] + "@"
    assert not WorkerCapacity.objects.filter(worker__startswith=maintenance).exists()  # it trains nothing
    cores = row.cores
    with pytest.raises(FieldErrors) as exc:
        services.run_create(config=tiny_config(nproc_per_node=cores + 1, strategy="ddp",
                                               prompts_per_step=4 * (cores + 1)))
    assert exc.value.errors == {"nproc_per_node": f"at most {cores} on queue cpu (its largest worker has {cores} "
                                                  f"core{'s' if cores != 1 else ''}); got {cores + 1}"}
