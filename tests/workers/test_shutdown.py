"""A worker's warm shutdown (Ctrl-C on ./seedbed up, docker stop): its runs checkpoint, go back to the queue,
and the next worker resumes them where they stopped."""
from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from django.utils import timezone

from tests.conftest import REPO, WorkerProcess, tiny_config, wait_for
from webapp.runs import services
from webapp.runs.models import Checkpoint, MetricPoint, Run, RunStatus
from webapp.projects.services import default_project

pytestmark = pytest.mark.django_db(transaction=True)


def test_shutdown_requeues_running_runs_and_the_next_worker_resumes_them(worker_env, tmp_path):
    env, _ = worker_env
    # its own queue namespace: only the workers started here see these tasks
    env = {**env, "SEEDBED_BROKER_PREFIX": f"seedbed-test-shutdown-{uuid.uuid4().hex[:8]}:"}
    cfg = services.as_config(tiny_config(total_steps=40, seed=9)).to_dict()
    run = Run.objects.create(project=default_project(), config=cfg, seed=9, queue="cpu", enqueued_at=timezone.now())
    send = f"from workers.tasks import train_run; train_run.apply_async(args=[{run.pk}], queue='cpu')"

    (tmp_path / "w1").mkdir()
    first = WorkerProcess(env, tmp_path / "w1", concurrency=1)
    subprocess.run([sys.executable, "-c", send], cwd=REPO, env=env, check=True, timeout=120)
    wait_for(lambda: Run.objects.get(pk=run.pk).last_step >= 3, timeout=240, what="3 steps")
    first.stop()  # SIGTERM: warm shutdown

    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and "worker shut down" in run.error
    stopped_at = run.last_step
    assert 3 <= stopped_at < 40
    assert Checkpoint.objects.filter(run=run).order_by("-step").first().step == stopped_at

    (tmp_path / "w2").mkdir()
    second = WorkerProcess(env, tmp_path / "w2", concurrency=1)
    try:
        wait_for(lambda: Run.objects.get(pk=run.pk).status in (RunStatus.SUCCEEDED, RunStatus.FAILED),
                 timeout=240, what="the resumed run to finish")
    finally:
        second.stop()
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.attempts == 2 and run.last_step == 40
    steps = list(MetricPoint.objects.filter(run=run, key="reward/mean").order_by("step").values_list("step", flat=True))
    assert steps == list(range(1, 41)), f"first worker:\n{first.log()[-4000:]}\nsecond:\n{second.log()[-4000:]}"
