"""Evaluation jobs on worker slots: ``eval_job(job_id)`` (same queues and slot rules as training runs).

The task is thin and idempotent: ``services.eval_start`` decides whether there is anything to do (a finished
or cancelled job, or one a live slot holds, is left alone), then each model is sampled problem chunk by
problem chunk with ``training.evaluate.evaluate_examples``. Every chunk's (n, c) is stored before the next
starts, so a re-delivered task resumes where the last one stopped, and the stored count is the progress.
Cancelling is cooperative: the task reads the flag between chunks.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
import traceback

from workers.celery_app import app, ensure_django

ensure_django()

from django.conf import settings  # noqa: E402
from django.db import close_old_connections, connection  # noqa: E402
from django.utils import timezone  # noqa: E402

from webapp.evals import services  # noqa: E402
from webapp.evals.models import EVAL_JOB, EvalJob, EvalModel, EvalResult, EvalStatus  # noqa: E402
from webapp.jobs import claimed  # noqa: E402

log = logging.getLogger("seedbed.workers")
# Samples generated per stored chunk: large enough to batch well, small enough that a chunk (and so a
# heartbeat and a cancel check) comes every few seconds on a CPU.
CHUNK_SAMPLES = 2048


class Cancelled(Exception):
    """The job's cancel flag was set, or it stopped being ``running`` (declared lost)."""


class Heartbeat(threading.Thread):
    """Refreshes the job's heartbeat every SEEDBED_HEARTBEAT_S while a chunk is being sampled, so a slow
    chunk (a big model on a CPU) is not mistaken for a dead worker."""

    def __init__(self, job_id: int):
        super().__init__(name=f"eval-{job_id}-heartbeat", daemon=True)
        self.job_id = job_id
        self.done = threading.Event()

    def run(self) -> None:
        try:
            while not self.done.wait(settings.SEEDBED_HEARTBEAT_S):
                EvalJob.objects.filter(pk=self.job_id, status=EvalStatus.RUNNING).update(heartbeat_at=timezone.now())
        finally:
            connection.close()  # this thread's own connection

    def __enter__(self) -> "Heartbeat":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.join()


def job_examples(job: EvalJob) -> list[dict]:
    """The job's held-out problems, in a fixed order (the same on every attempt)."""
    from training.data import is_file_task, make_prompt_source

    if is_file_task(job.task):  # a file: its rows, or a library dataset's held-out rows
        options = job.data_options or {}
        source = make_prompt_source(job.task, job.data_path, job.prompt_field, job.answer_field,
                                    data_fields=options.get("data_fields"),
                                    held_out_fraction=options.get("held_out_fraction", 0.0),
                                    split_seed=options.get("split_seed", 0))
        return source.eval_set(job.problems)
    return make_prompt_source(job.task).eval_set(job.problems)


def problem_chunks(todo: list[int], n: int) -> list[list[int]]:
    """Problem indices grouped so each chunk holds about CHUNK_SAMPLES samples (at least one problem).

    >>> problem_chunks([0, 1, 2, 3, 4], 1024)
    [[0, 1], [2, 3], [4]]
    """
    size = max(1, CHUNK_SAMPLES // n)
    return [todo[i:i + size] for i in range(0, len(todo), size)]


def evaluate_model(job: EvalJob, model_row: EvalModel, examples: list[dict], device: str) -> None:
    """Sample and verify the problems of ``examples`` this model has no stored result for."""
    import torch

    from training.config import default_tiny_model_dir
    from training.evaluate import evaluate_examples
    from training.loop import load_model
    from training.prompts import PromptTemplate
    from training.tiny import ensure_tiny_model

    done = set(EvalResult.objects.filter(model=model_row).values_list("index", flat=True))
    todo = [i for i in range(len(examples)) if i not in done]
    if not todo:
        return
    if model_row.path == default_tiny_model_dir():  # a fresh install builds it on first use
        ensure_tiny_model(model_row.path, log=lambda line: log.info("eval %s: %s", job.pk, line))
    model, tokenizer = load_model(model_row.path, torch.device(device))
    model.eval()
    for chunk in problem_chunks(todo, job.n):
        if not services.eval_heartbeat(job_id=job.pk):
            raise Cancelled()
        t0 = time.monotonic()
        # Seed by the chunk's first problem, not the attempt: a resumed job draws the same samples, and the
        # base and the checkpoints share random numbers on each problem (a fairer comparison).
        res = evaluate_examples(model, tokenizer, [examples[i] for i in chunk], n=job.n, ks=[1],
                                temperature=job.temperature, top_p=job.top_p, max_new_tokens=job.max_new_tokens,
                                rewards=job.rewards, seed=job.seed + chunk[0], keep_completions=job.keep_completions,
                                template=PromptTemplate.from_dict(job.prompt_template))
        rows = [{"index": i, "prompt": p["prompt"], "answer": p["answer"], "n": p["n"], "c": p["c"],
                 "samples": p["samples"]} for i, p in zip(chunk, res["problems"])]
        services.eval_results_add(model_id=model_row.pk, rows=rows, seconds=time.monotonic() - t0)
    del model


def run_job(job_id: int) -> str:
    """Evaluate every model of the job; returns the end status recorded."""
    import torch

    job = EvalJob.objects.get(pk=job_id)
    device = "cuda" if job.queue == "gpu" and torch.cuda.is_available() else "cpu"
    try:
        examples = job_examples(job)
        if len(examples) < job.problems:
            raise ValueError(f"data_path: {job.data_path} now has {len(examples)} rows; the job needs {job.problems}")
        for model_row in job.models.all():
            evaluate_model(job, model_row, examples, device)
    except Cancelled:
        job.refresh_from_db()
        if job.status != EvalStatus.RUNNING:
            return job.status  # declared lost meanwhile: leave it as it is
        services.eval_finish(job_id=job_id, status=EvalStatus.CANCELLED)
        return EvalStatus.CANCELLED
    except Exception:  # a bad model folder, a verifier that cannot judge...: the job fails, visibly
        services.eval_finish(job_id=job_id, status=EvalStatus.FAILED, error=traceback.format_exc()[-4000:])
        return EvalStatus.FAILED
    services.eval_finish(job_id=job_id, status=EvalStatus.SUCCEEDED)
    return EvalStatus.SUCCEEDED


@app.task(name="workers.eval_tasks.eval_job", acks_late=True, ignore_result=True)
def eval_job(job_id: int) -> str:
    """Run one evaluation job; safe to deliver twice (see services.eval_start)."""
    import torch

    close_old_connections()
    worker = f"{socket.gethostname()}:{os.getpid()}"
    action = claimed(EVAL_JOB, pk=job_id, take=lambda: services.eval_start(job_id=job_id, worker=worker))
    if action in ("missing", "skip"):
        return action
    # One slot, one job: as many threads as a training run's child gets.
    torch.set_num_threads(int(os.environ.get("SEEDBED_TORCH_THREADS", "1")))
    with Heartbeat(job_id):
        status = run_job(job_id)
    log.info("eval %s: ended %s", job_id, status)
    return status


@app.task(name="workers.eval_tasks.eval_maintenance", ignore_result=True)
def eval_maintenance() -> dict:
    """Jobs with a stale heartbeat are marked lost and, within an attempt cap, queued again to resume from their
    stored results. The maintenance beat runs this through the job core (workers.tasks.maintenance); the task
    stays for a message an older beat sent."""
    close_old_connections()
    return services.eval_jobs_recover()
