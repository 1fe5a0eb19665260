"""What the Slurm tests share: launching a run on the queue ``slurm`` and waiting for it, its curve, what squeue
says of a job, and the maintenance beat the test session's workers do not run."""
from __future__ import annotations

import subprocess

from tests.conftest import tiny_config, wait_for
from webapp.runs.models import ENDED_STATUSES, MetricPoint, Run, RunStatus


def squeue(env, job_id: str) -> str:
    return subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], env=env, capture_output=True,
                          text=True).stdout.strip()


def launch(api, **config) -> Run:
    made = api.post("/runs", {"queue": "slurm", "config": tiny_config(**config)})
    assert made.status_code == 201, made.content
    return Run.objects.get(pk=made.json()["id"])


def running_at(run: Run, step: int, timeout: float = 120) -> Run:
    return wait_for(lambda: Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING, last_step__gte=step).first(),
                    timeout=timeout, what=f"run {run.pk} running past step {step}")


def ended(run: Run, timeout: float = 240) -> Run:
    return wait_for(lambda: Run.objects.filter(pk=run.pk, status__in=ENDED_STATUSES).first(), timeout=timeout,
                    what=f"run {run.pk}'s end")


def curve(run: Run, key: str = "reward/mean") -> list[tuple[int, float]]:
    return list(MetricPoint.objects.filter(run=run, key=key).order_by("step").values_list("step", "value"))


def beating_until_ended(run: Run, timeout: float) -> Run:
    """The maintenance pass every 2 s, as celery beat runs it in ``./seedbed up`` (the test session's workers
    have no beat), until the run ended: it sends again what waited for the controller and reads the jobs."""
    from workers.tasks import maintenance

    def beat():
        maintenance()
        return Run.objects.filter(pk=run.pk, status__in=ENDED_STATUSES).first()

    return wait_for(beat, timeout=timeout, what=f"run {run.pk}'s end", every=2)
