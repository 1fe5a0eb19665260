"""Evaluation services against the real database: validation (nothing created on bad input), claiming,
results and progress, cancel / lost / resume, and the selectors built on stored results."""
from __future__ import annotations

import shutil
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.evals.conftest import HAND_COUNTS, make_job_with_results, model_keys
from training.fields import FieldErrors
from webapp.evals import selectors, services
from webapp.evals.models import EvalJob, EvalResult, EvalStatus
from webapp.runs import selectors as run_selectors
from webapp.runs.models import Checkpoint, Run
from webapp.projects.services import default_project

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

GOOD = {"task": "arithmetic", "problems": 5, "n": 8}


def create_errors(run, django_capture_on_commit_callbacks, **overrides) -> dict[str, str]:
    """Try eval_create with GOOD inputs changed by ``overrides``; returns the field errors and checks that
    nothing was created and nothing enqueued."""
    inputs = {"models": model_keys(run), **GOOD, **overrides}
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        with pytest.raises(FieldErrors) as info:
            services.eval_create(run=run, **inputs)
    assert EvalJob.objects.count() == 0 and callbacks == []
    return info.value.errors


def test_a_valid_request_creates_a_queued_job_and_enqueues_it_on_commit(run_with_checkpoints,
                                                                        django_capture_on_commit_callbacks):
    run = run_with_checkpoints
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        job = services.eval_create(run=run, models=model_keys(run), task="arithmetic", problems=5, n=8,
                                   temperature=0.7, top_p=0.9)
    assert len(callbacks) == 1
    assert (job.status, job.n, job.problems, job.total_units, job.queue) == (EvalStatus.QUEUED, 8, 5, 15, "cpu")
    assert job.ks == [1, 2, 4, 8]  # blank k: 1, 2, 4, … n
    assert job.rewards == [{"name": "exact", "weight": 1.0}]  # the task's own verifier
    models = list(job.models.all())
    assert [m.label for m in models] == ["base", "step 2", "step 4"]
    assert models[0].is_base and models[0].path == run.config["model_path"]
    assert [m.step for m in models] == [None, 2, 4] and models[2].run_id == run.pk


def test_a_job_asks_its_questions_as_the_run_did(run_with_checkpoints):
    """The run's prompt template goes with the job, its stop strings included, so checkpoints are sampled as
    they were trained."""
    run = run_with_checkpoints
    run.config = {**run.config, "answer_instruction": "Answer in <answer></answer>.", "stop": ["</answer>"]}
    run.save()
    job = services.eval_create(run=run, models=["base"], **GOOD)
    assert job.prompt_template["instruction"] == "Answer in <answer></answer>."
    assert job.prompt_template["stop"] == ["</answer>"]


@pytest.mark.parametrize("overrides, field, words", [
    ({"n": 4, "ks": [1, 8]}, "k", "every k must lie in 1..n (n = 4)"),
    ({"n": 0}, "n", "must lie in 1..1024"),
    ({"n": 2048}, "n", "must lie in 1..1024"),
    ({"problems": 0}, "problems", "empty dataset"),
    ({"temperature": 0}, "temperature", "> 0"),
    ({"top_p": 1.5}, "top_p", "(0, 1]"),
    ({"models": []}, "models", "at least one model"),
    ({"models": ["ckpt:999999"]}, "models", "checkpoint 999999 no longer exists"),
    ({"rewards": [{"name": "no-such-verifier"}]}, "rewards", "unknown verifier 'no-such-verifier'"),
    ({"task": "file"}, "data_path", "required when task is 'file'"),
])
def test_bad_input_names_the_field_and_creates_nothing(run_with_checkpoints, django_capture_on_commit_callbacks,
                                                       overrides, field, words):
    errors = create_errors(run_with_checkpoints, django_capture_on_commit_callbacks, **overrides)
    assert words in errors[field]


def test_a_checkpoint_deleted_since_the_page_was_drawn_is_refused(run_with_checkpoints,
                                                                 django_capture_on_commit_callbacks):
    run = run_with_checkpoints
    keys = model_keys(run)
    gone = run.checkpoints.get(step=2)
    shutil.rmtree(gone.path)  # the folder is gone, the row is still there
    errors = create_errors(run, django_capture_on_commit_callbacks, models=keys)
    assert "step 2: its folder no longer exists" in errors["models"] and gone.path in errors["models"]
    gone_id = gone.pk
    gone.delete()  # now the row is gone too
    errors = create_errors(run, django_capture_on_commit_callbacks, models=keys)
    assert f"checkpoint {gone_id} no longer exists" in errors["models"]


def test_an_empty_or_broken_data_file_is_refused(run_with_checkpoints, django_capture_on_commit_callbacks, tmp_path):
    empty = tmp_path / "held_out.jsonl"
    empty.write_text("\n")
    errors = create_errors(run_with_checkpoints, django_capture_on_commit_callbacks, task="file",
                           data_path=str(empty), problems=0)
    assert "the dataset is empty" in errors["data_path"]
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"prompt": "1+1=", "answer": "2"}\n{"prompt": \n')
    errors = create_errors(run_with_checkpoints, django_capture_on_commit_callbacks, task="file",
                           data_path=str(broken), problems=0)
    assert f"{broken}:2: not valid JSON" in errors["data_path"]
    errors = create_errors(run_with_checkpoints, django_capture_on_commit_callbacks, task="file",
                           data_path=str(tmp_path / "missing.jsonl"), problems=0)
    assert "no such file" in errors["data_path"]


def test_a_data_file_sets_the_problem_count(run_with_checkpoints, tmp_path):
    data = tmp_path / "held_out.jsonl"
    data.write_text("".join(f'{{"q": "{i}+1=", "a": "{i + 1}"}}\n' for i in range(7)))
    job = services.eval_create(run=run_with_checkpoints, models=["base"], task="file", data_path=str(data),
                               prompt_field="q", answer_field="a", problems=0, n=2)
    assert job.problems == 7 and job.total_units == 7
    assert job.rewards == [{"name": "math", "weight": 1.0}]
    job = services.eval_create(run=run_with_checkpoints, models=["base"], task="file", data_path=str(data),
                               prompt_field="q", answer_field="a", problems=3, n=2)
    assert job.problems == 3


def test_claiming_is_idempotent_and_a_stale_job_is_taken_over(run_with_checkpoints):
    job = services.eval_create(run=run_with_checkpoints, models=["base"], **GOOD)
    assert services.eval_start(job_id=job.pk, worker="w1") == "start"
    assert services.eval_start(job_id=job.pk, worker="w2") == "skip"  # a live slot holds it
    EvalJob.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert services.eval_start(job_id=job.pk, worker="w2") == "resume"
    job.refresh_from_db()
    assert (job.worker, job.attempts, job.status) == ("w2", 2, EvalStatus.RUNNING)
    services.eval_finish(job_id=job.pk, status=EvalStatus.SUCCEEDED)
    assert services.eval_start(job_id=job.pk, worker="w3") == "skip"
    with pytest.raises(services.EvalTransitionError, match="succeeded"):
        services.eval_finish(job_id=job.pk, status=EvalStatus.FAILED)


def test_results_count_as_progress_and_a_rerun_chunk_replaces_its_rows(run_with_checkpoints):
    job = services.eval_create(run=run_with_checkpoints, models=model_keys(run_with_checkpoints)[:2], **GOOD)
    services.eval_start(job_id=job.pk, worker="w")
    model = job.models.first()
    rows = [{"index": i, "prompt": f"{i}+1=", "answer": str(i + 1), "n": 8, "c": i, "samples": []} for i in range(3)]
    assert services.eval_results_add(model_id=model.pk, rows=rows) == 3
    assert services.eval_results_add(model_id=model.pk, rows=rows[:2]) == 0  # same chunk again: replaced
    job.refresh_from_db()
    assert (job.done_units, job.total_units) == (3, 10)
    assert sorted(EvalResult.objects.filter(model=model).values_list("index", "c")) == [(0, 0), (1, 1), (2, 2)]


def test_cancel_and_lost_and_resume(run_with_checkpoints, django_capture_on_commit_callbacks):
    queued = services.eval_create(run=run_with_checkpoints, models=["base"], **GOOD)
    assert services.eval_cancel(job_id=queued.pk).status == EvalStatus.CANCELLED
    with pytest.raises(services.EvalTransitionError, match="already ended"):
        services.eval_cancel(job_id=queued.pk)

    running = services.eval_create(run=run_with_checkpoints, models=["base"], **GOOD)
    services.eval_start(job_id=running.pk, worker="w")
    assert services.eval_cancel(job_id=running.pk).status == EvalStatus.RUNNING  # the task stops it between chunks
    assert services.eval_heartbeat(job_id=running.pk) is False

    stale = services.eval_create(run=run_with_checkpoints, models=["base"], **GOOD)
    services.eval_start(job_id=stale.pk, worker="w")
    EvalJob.objects.filter(pk=stale.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=120))
    assert services.eval_jobs_mark_lost() == [stale.pk]
    stale.refresh_from_db()
    assert stale.status == EvalStatus.LOST and "no heartbeat" in stale.error
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.eval_resume(job_id=stale.pk)
    assert len(callbacks) == 1 and EvalJob.objects.get(pk=stale.pk).status == EvalStatus.QUEUED


def test_curves_and_coverage_from_stored_results(run_with_checkpoints):
    job = make_job_with_results(run_with_checkpoints)
    curves = selectors.job_curves(job=job)
    base, ckpt = curves
    assert (base.problems, base.solved, ckpt.solved) == (5, 2, 3)
    # pass@1 = mean c/n; pass@4 with n = 4 is the share of problems solved at least once
    assert base.curve[1] == pytest.approx(sum(c[0] for c in HAND_COUNTS.values()) / 4 / 5)
    assert ckpt.curve[1] == pytest.approx(sum(c[1] for c in HAND_COUNTS.values()) / 4 / 5)
    assert (base.curve[4], ckpt.curve[4]) == (pytest.approx(2 / 5), pytest.approx(3 / 5))
    cov = selectors.job_coverage(job=job, a=base.model, b=ckpt.model)
    assert cov["counts"] == {"a_only": 1, "b_only": 2, "both": 1, "neither": 1}
    assert cov["problems"] == {"a_only": [0], "b_only": [1, 2], "both": [3], "neither": [4]}
    payload = selectors.export_payload(job=job)
    assert [m["label"] for m in payload["models"]] == ["base", "step 4"]
    assert payload["models"][1]["per_problem"][1] == {"index": 1, "n": 4, "c": 4}


def test_lineage_is_the_chain_of_parents_oldest_first(run_with_checkpoints):
    root = run_with_checkpoints
    child = Run.objects.create(project=default_project(), name="child", config=root.config, seed=1, parent_run=root, parent_step=4)
    Checkpoint.objects.create(run=child, step=3, path="/nowhere")
    grandchild = Run.objects.create(project=default_project(), name="grandchild", config=root.config, seed=2, parent_run=child, parent_step=3)
    chain = selectors.run_ancestry(run=grandchild)
    assert [(link.run.pk, link.step) for link in chain] == [(root.pk, 4), (child.pk, 3), (grandchild.pk, None)]
    assert list(selectors.run_children(run=root)) == [child]
    ckpt, config = run_selectors.new_run_prefill(checkpoint_id=root.checkpoints.get(step=4).pk)
    assert config["model_path"] == ckpt.path and config["preset"] == "dapo" and config["seed"] == 7


def test_run_page_eval_chart_lists_configured_and_stored_eval_keys(run_with_checkpoints):
    run = run_with_checkpoints
    assert selectors.run_eval_metric_keys(run=run) == []
    run.config = {**run.config, "eval_every": 5, "eval_k": [1, 4]}
    run.save()
    from webapp.runs.services import run_metrics_append

    run_metrics_append(run_id=run.pk, points=[(5, "eval/pass@16", 0.5), (5, "reward/mean", 0.1)])
    assert selectors.run_eval_metric_keys(run=run) == ["eval/pass@1", "eval/pass@4", "eval/pass@16"]


def test_lost_jobs_are_requeued_until_the_attempt_cap(run_with_checkpoints, django_capture_on_commit_callbacks):
    jobs = []
    for attempts in (1, 3):
        job = services.eval_create(run=run_with_checkpoints, models=["base"], **GOOD)
        services.eval_start(job_id=job.pk, worker="w")
        EvalJob.objects.filter(pk=job.pk).update(attempts=attempts,
                                                 heartbeat_at=timezone.now() - timedelta(seconds=300))
        jobs.append(job.pk)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        outcome = services.eval_jobs_recover(max_attempts=3)
    assert outcome == {"lost": jobs, "resumed": [jobs[0]], "redispatched": []} and len(callbacks) == 1
    assert [EvalJob.objects.get(pk=j).status for j in jobs] == [EvalStatus.QUEUED, EvalStatus.LOST]
    # a job whose task the broker never took (it was down) is sent again by the next pass
    EvalJob.objects.filter(pk=jobs[0]).update(enqueued_at=timezone.now() - timedelta(seconds=60))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert services.eval_jobs_recover(max_attempts=3)["redispatched"] == [jobs[0]]
    assert len(callbacks) == 1

