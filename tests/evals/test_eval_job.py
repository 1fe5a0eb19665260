"""An evaluation job end to end: real Redis, a real celery worker subprocess, the real tiny model and a real
checkpoint made by a real training run."""
from __future__ import annotations

import pytest

from tests.conftest import tiny_config, wait_for
from training.passk import pass_at_k_curve
from webapp.evals import selectors, services
from webapp.evals.models import EvalJob, EvalResult, EvalStatus
from webapp.runs import services as run_services
from webapp.runs.models import Run, RunStatus
from webapp.projects.services import default_project

pytestmark = [pytest.mark.django_db(transaction=True)]
TIMEOUT = 300  # two shared cores: generous


def wait_job(job_id: int, *statuses: str) -> EvalJob:
    wait_for(lambda: EvalJob.objects.get(pk=job_id).status in statuses, timeout=TIMEOUT,
             what=f"eval {job_id} to be one of {statuses}")
    return EvalJob.objects.get(pk=job_id)


def test_an_eval_job_scores_the_base_model_and_a_checkpoint(celery_worker, tiny_model_dir):
    run = run_services.run_create(config=tiny_config(total_steps=2, seed=11), name="to evaluate")
    wait_for(lambda: Run.objects.get(pk=run.pk).is_ended, timeout=TIMEOUT, what="the training run to end")
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    ckpt = run.checkpoints.get(step=2)

    job = services.eval_create(run=run, models=["base", f"ckpt:{ckpt.pk}"], task="arithmetic", problems=6, n=4,
                               ks=[1, 4], keep_completions=2)
    job = wait_job(job.pk, EvalStatus.SUCCEEDED, EvalStatus.FAILED)
    assert job.status == EvalStatus.SUCCEEDED, job.error
    assert (job.done_units, job.total_units, job.attempts) == (12, 12, 1)
    assert job.started_at <= job.ended_at and job.worker

    base, checkpoint = job.models.order_by("position")
    assert base.path == tiny_model_dir and checkpoint.path == ckpt.path
    for model in (base, checkpoint):
        results = list(EvalResult.objects.filter(model=model).order_by("index"))
        assert [r.index for r in results] == list(range(6))
        assert all(r.n == 4 and 0 <= r.c <= 4 and len(r.samples) == 2 for r in results)
        # the verdicts kept agree with the verifier: "exact" accepts a completion equal to the answer
        for r in results:
            for s in r.samples:
                assert s["correct"] == (s["completion"].strip() == r.answer)
        assert model.seconds > 0
    # the curves are recomputed from the stored (n, c)
    curves = {c.model.pk: c.curve for c in selectors.job_curves(job=job)}
    counts = list(EvalResult.objects.filter(model=base).values_list("n", "c"))
    assert curves[base.pk] == pytest.approx(pass_at_k_curve(counts, [1, 2, 4]))

    # the broker delivers the task again: a finished job is left as it is
    from workers.eval_tasks import eval_job

    eval_job.apply_async(args=[job.pk], queue="cpu")
    wait_for(lambda: f"eval {job.pk}: nothing to do" in celery_worker.log(), timeout=60,
             what="the worker to receive the re-delivered task")
    again = EvalJob.objects.get(pk=job.pk)
    assert (again.status, again.attempts, again.ended_at) == (EvalStatus.SUCCEEDED, 1, job.ended_at)
    assert EvalResult.objects.filter(model__job=job).count() == 12


def test_a_checkpoint_removed_after_the_job_was_queued_fails_it_visibly(celery_worker, tiny_model_dir, tmp_path):
    import shutil

    from webapp.runs.models import Checkpoint

    run = Run.objects.create(project=default_project(), config=tiny_config(model_path=tiny_model_dir), seed=0, status=RunStatus.SUCCEEDED)
    copy = shutil.copytree(tiny_model_dir, tmp_path / "step_000001")
    ckpt = Checkpoint.objects.create(run=run, step=1, path=str(copy))
    from django.db import transaction

    with transaction.atomic():  # the task is sent on commit: after the folder is gone
        job = services.eval_create(run=run, models=[f"ckpt:{ckpt.pk}"], task="arithmetic", problems=2, n=2)
        shutil.rmtree(copy)  # deleted while the job waited in the queue
    job = wait_job(job.pk, EvalStatus.SUCCEEDED, EvalStatus.FAILED)
    assert job.status == EvalStatus.FAILED and str(copy) in job.error
