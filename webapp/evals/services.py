"""Every write to evaluation jobs: keyword-only, atomic, status checked before it changes.

``eval_create`` validates everything first and creates nothing when any input is wrong: ``FieldErrors``
maps each bad field to a message. The task is enqueued on commit with the job's id only.
"""
from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from training.config import TrainConfig
from training.data import DATASET, DatasetError, check_file_dataset, default_rewards, is_file_task, task_error
from training.fields import FieldErrors, require_no_control_characters
from training.prompts import PromptTemplate
from training.passk import MAX_N, doubling_ks
from training.verifiers import check_reward_spec
from webapp import jobs
from webapp.datasets.selectors import dataset_for_task
from webapp.projects.models import Role
from webapp.projects.services import audit, default_project, require_role
from webapp.runs.models import Checkpoint, Run
from webapp.projects.paths import allowed_path
from webapp.runs.services.config import queue_for
from webapp.sweeps.models import Sweep

from .models import EVAL_JOB, EvalJob, EvalModel, EvalResult, EvalStatus

log = logging.getLogger("seedbed.evals")

MAX_PROBLEMS = 10_000
MAX_KEEP_COMPLETIONS = 16
MAX_SEED = 2**32 - 1  # as a run's seed (TrainConfig.seed)
BASE_KEY = "base"


EvalTransitionError = jobs.TransitionError  # (the job core's, shared with runs: one name callers may catch)


@dataclass(frozen=True)
class ModelChoice:
    """A model the user may evaluate from a run's or sweep's page: its base model or one of its checkpoints."""

    key: str                 # "base" or "ckpt:<Checkpoint id>"
    label: str
    path: str
    run_id: int | None = None
    step: int | None = None
    checkpoint_id: int | None = None


def origin_config(*, run: Run | None, sweep: Sweep | None) -> dict:
    if (run is None) == (sweep is None):
        raise ValueError("give exactly one of run or sweep")
    return run.config if run is not None else sweep.config


def prompt_template_of(origin) -> dict:
    """The prompt template of the run (or sweep) evaluated: its checkpoints answer questions as they were asked
    in training."""
    if origin is None:
        return {}
    config = origin.config
    return PromptTemplate(chat=config.get("chat_template", "auto"), system_prompt=config.get("system_prompt", ""),
                          instruction=config.get("answer_instruction", ""),
                          stop=tuple(config.get("stop") or ())).to_dict()


def base_model_path(config: dict) -> str:
    """The model a run started from (its model_path, or the built-in tiny model when empty)."""
    return TrainConfig.from_dict(config, check_paths=False).resolved_model_path()


def checkpoint_label(ckpt: Checkpoint, *, with_run: bool) -> str:
    return f"{ckpt.run.display_name} step {ckpt.step}" if with_run else f"step {ckpt.step}"


def model_choices(*, run: Run | None = None, sweep: Sweep | None = None) -> list[ModelChoice]:
    """Base model first, then every checkpoint of the run (or of each run of the sweep), oldest first."""
    config = origin_config(run=run, sweep=sweep)
    base = ModelChoice(BASE_KEY, "base", base_model_path(config))
    ckpts = (Checkpoint.objects.filter(run=run) if run is not None else Checkpoint.objects.filter(run__sweep=sweep))
    return [base] + [ModelChoice(f"ckpt:{c.pk}", checkpoint_label(c, with_run=sweep is not None), c.path,
                                 run_id=c.run_id, step=c.step, checkpoint_id=c.pk)
                     for c in ckpts.select_related("run").order_by("run_id", "step")]


# --- validation -----------------------------------------------------------------------------------------------

def _is_model_folder(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "config.json"))


def _resolve_models(keys: list[str], *, run: Run | None, sweep: Sweep | None, errors: dict) -> list[ModelChoice]:
    if not keys:
        errors["models"] = "choose at least one model (the base model or a checkpoint)"
        return []
    if len(set(keys)) != len(keys):
        errors["models"] = f"a model is listed twice: {keys}"
        return []
    available = {c.key: c for c in model_choices(run=run, sweep=sweep)}
    chosen, problems = [], []
    for key in keys:
        choice = available.get(key)
        if choice is None:
            problems.append(f"checkpoint {key.removeprefix('ckpt:')} no longer exists"
                            if key.startswith("ckpt:") else f"unknown model {key!r}")
        elif not _is_model_folder(choice.path):
            problems.append(f"{choice.label}: its folder no longer exists (or has no config.json): {choice.path}")
        else:
            chosen.append(choice)
    if problems:
        errors["models"] = "; ".join(problems)
    return chosen


def _check_rewards(rewards, errors: dict) -> None:
    """A sample is correct when every verifier accepts it: at least one, each checked like a run's rewards."""
    if isinstance(rewards, list) and not rewards:
        errors["rewards"] = "must name at least one verifier"
        return
    problem = check_reward_spec(rewards)
    if problem:
        errors["rewards"] = problem


def _check_dataset(*, task: str, data_path: str, prompt_field: str, answer_field: str, problems: int, user=None,
                   errors: dict, options: dict | None = None) -> int:
    """Checks the dataset can be read and is not empty; returns the number of problems the job will use."""
    if task_error(task):
        errors["task"] = task_error(task)
        return 0
    if not is_file_task(task):  # generated (built-in, reasoning-gym) or shipped by a package (humaneval, ifbench)
        if not 1 <= problems <= MAX_PROBLEMS:
            errors["problems"] = (f"must be at least 1 (an empty dataset has nothing to evaluate); got {problems}"
                                  if problems < 1 else f"must be at most {MAX_PROBLEMS}; got {problems}")
            return 0
        return problems
    if not data_path:
        errors["data_path"] = "required when task is 'file' (a .jsonl, .parquet or .csv file of held-out problems)"
        return 0
    if problems < 0:
        errors["problems"] = f"must be 0 (all rows) or more; got {problems}"
        return 0
    try:
        data_path = allowed_path(user=user, value=data_path, field="data_path", missing="give the data file")
    except FieldErrors as exc:
        errors.update(exc.errors)
        return 0
    try:
        count = check_file_dataset(data_path, prompt_field or "prompt", answer_field,
                                   fields=(options or {}).get("data_fields"))
        fraction = (options or {}).get("held_out_fraction") or 0
        if fraction:  # a library dataset with a split: its held-out rows
            from training.data import held_out_size

            count = held_out_size(count, fraction)
    except DatasetError as exc:
        errors["data_path"] = str(exc).removeprefix("data_path: ")
        return 0
    return min(problems, count) if problems else count


@dataclass(frozen=True)
class EvalInput:
    """Validated inputs of one job."""

    models: list[ModelChoice]
    task: str
    data_path: str
    prompt_field: str
    answer_field: str
    problems: int
    n: int
    ks: list[int]
    temperature: float
    top_p: float
    max_new_tokens: int
    rewards: list
    seed: int
    keep_completions: int
    data_options: dict  # a library dataset's mapping and split: {data_fields, held_out_fraction, split_seed}


def validate_eval_input(*, run: Run | None, sweep: Sweep | None, models: list[str], task: str, data_path: str = "", user=None,
                        prompt_field: str = "prompt", answer_field: str = "answer", problems: int, n: int,
                        ks: list[int] | None = None, temperature: float = 1.0, top_p: float = 1.0,
                        max_new_tokens: int = 8, rewards: list | None = None, seed: int = 0,
                        keep_completions: int = 4) -> EvalInput:
    """Every check of an evaluation request; raises FieldErrors naming each bad field."""
    errors: dict[str, str] = {}
    chosen = _resolve_models(list(models), run=run, sweep=sweep, errors=errors)
    if not 1 <= n <= MAX_N:
        errors["n"] = f"must lie in 1..{MAX_N} (samples per problem); got {n}"
    ks = sorted(set(ks)) if ks else (doubling_ks(n) if 1 <= n <= MAX_N else [])
    if "n" not in errors:
        bad = [k for k in ks if not 1 <= k <= n]
        if bad:
            errors["k"] = f"every k must lie in 1..n (n = {n}); got {bad}"
    if not (math.isfinite(temperature) and temperature > 0):
        errors["temperature"] = f"must be a finite number > 0; got {temperature}"
    if not 0 < top_p <= 1:
        errors["top_p"] = f"must lie in (0, 1]; got {top_p}"
    if not 1 <= max_new_tokens <= 8192:
        errors["max_new_tokens"] = f"must lie in 1..8192; got {max_new_tokens}"
    if not 0 <= keep_completions <= MAX_KEEP_COMPLETIONS:
        errors["keep_completions"] = f"must lie in 0..{MAX_KEEP_COMPLETIONS}; got {keep_completions}"
    if not 0 <= seed <= MAX_SEED:
        errors["seed"] = f"must lie in 0..{MAX_SEED}; got {seed}"
    options: dict = {}
    answer_field = answer_field or "answer"  # (a library dataset may have none: its own mapping says so)
    if isinstance(task, str) and task.startswith(DATASET) and not data_path:  # a library dataset: its held-out rows
        origin = run if run is not None else sweep
        try:
            entry = dataset_for_task(user=user, task=task, project=origin.project if origin is not None else None)
            values = entry.config_values()
            data_path, prompt_field, answer_field = values["data_path"], values["prompt_field"], values["answer_field"]
            options = {k: values[k] for k in ("data_fields", "held_out_fraction", "split_seed")}
        except FieldErrors as exc:
            errors.update(exc.errors)
    count = 0 if "task" in errors else _check_dataset(
        task=task, data_path=data_path, prompt_field=prompt_field, answer_field=answer_field, user=user,
        problems=problems, errors=errors, options=options)
    rewards = list(rewards) if rewards else (default_rewards(task) if not task_error(task) else [])
    _check_rewards(rewards, errors)
    if errors:
        raise FieldErrors(errors)
    return EvalInput(chosen, task, data_path, prompt_field or "prompt", answer_field, count, n, ks,
                     float(temperature), float(top_p), max_new_tokens, rewards, seed, keep_completions, options)


# --- creating and dispatching ---------------------------------------------------------------------------------

def _queue_of(config: dict) -> str:
    """Same slot kinds as training runs: the origin run's device decides cpu or gpu."""
    try:
        return queue_for(TrainConfig.from_dict(config, check_paths=False))
    except FieldErrors:
        return settings.SEEDBED_AUTO_QUEUE


@transaction.atomic
def eval_create(*, run: Run | None = None, sweep: Sweep | None = None, models: list[str], name: str = "",
                user=None, **inputs) -> EvalJob:
    """Validate, create a queued job with its models, and enqueue it once the transaction commits.

    ``inputs`` are those of ``validate_eval_input`` (task, data_path, problems, n, ks, temperature, ...). The
    job belongs to its origin's project, where ``user`` must be a member."""
    require_no_control_characters(name=name)
    origin = run if run is not None else sweep
    project_id = origin.project_id if origin is not None else default_project().pk
    if user is not None:
        require_role(user, project_id, Role.MEMBER)
    valid = validate_eval_input(run=run, sweep=sweep, models=models, user=user, **inputs)
    job = EvalJob.objects.create(
        name=name, project_id=project_id, run=run, sweep=sweep, task=valid.task, data_path=valid.data_path,
        prompt_field=valid.prompt_field, answer_field=valid.answer_field, problems=valid.problems, n=valid.n,
        ks=valid.ks, temperature=valid.temperature, top_p=valid.top_p, max_new_tokens=valid.max_new_tokens,
        rewards=valid.rewards, seed=valid.seed, keep_completions=valid.keep_completions,
        data_options=valid.data_options,
        queue=_queue_of(origin_config(run=run, sweep=sweep)), created_by=user,
        total_units=valid.problems * len(valid.models), prompt_template=prompt_template_of(origin))
    EvalModel.objects.bulk_create([
        EvalModel(job=job, position=i, label=m.label, path=m.path, is_base=m.key == BASE_KEY,
                  checkpoint_id=m.checkpoint_id, run_id=m.run_id, step=m.step)
        for i, m in enumerate(valid.models)])
    audit(project=project_id, user=user, action="eval.launch", target_type="eval", target_id=job.pk,
          models=len(valid.models), problems=valid.problems, n=valid.n)
    _dispatch(job)
    return job


def _dispatch(job: EvalJob) -> None:
    job.enqueued_at, job.dispatched_at = timezone.now(), None
    job.save(update_fields=["enqueued_at", "dispatched_at"])
    _send_job(job.pk, job.queue)


def _send_job(job_id: int, queue: str) -> None:
    """Send the job's task on commit; the broker taking it is recorded (``eval_jobs_redispatch`` retries the
    others), a broker that is down fails nothing."""
    from workers.port import send_on_commit

    def sent() -> None:
        EvalJob.objects.filter(pk=job_id, dispatched_at__isnull=True).update(dispatched_at=timezone.now())

    send_on_commit("workers.eval_tasks.eval_job", args=[job_id], queue=queue, sent=sent)


def eval_jobs_redispatch(*, older_than_s: float = 5.0) -> list[int]:
    """Queued jobs whose task the broker never took are sent again (the job core's pass, webapp.jobs.passes; a
    duplicate finds the job claimed)."""
    return jobs.send_again(EVAL_JOB, jobs.never_taken(EVAL_JOB, older_than_s=older_than_s), _send_job)


# --- the worker's side ----------------------------------------------------------------------------------------

def _move(job: EvalJob, new_status: str) -> None:
    EVAL_JOB.move(job, new_status)


def eval_start(*, job_id: int, worker: str) -> str:
    """Claim a job for a worker slot (the job core's claim, webapp.jobs.claims): "start" (queued), "resume" (lost,
    or running with a stale heartbeat: the results already stored are kept) or "skip" (ended, held by a live slot,
    or cancelled)."""
    return jobs.claim(EVAL_JOB, pk=job_id, worker=worker, prepare=_reopen)


def _reopen(job: EvalJob, now) -> None:
    job.ended_at = None  # (a lost job resumed by its redelivered task had ended)


def eval_heartbeat(*, job_id: int) -> bool:
    """Record that the job is alive; False when it should stop (cancel requested, or no longer running)."""
    return jobs.heartbeat(EVAL_JOB, pk=job_id, also={"cancel_requested_at__isnull": True})


@transaction.atomic
def eval_results_add(*, model_id: int, rows: list[dict], seconds: float = 0.0) -> int:
    """Store one chunk of per-problem results of a model (a re-run chunk replaces what was there) and count
    them into the job's progress. ``rows``: {"index", "prompt", "answer", "n", "c", "samples"}."""
    model = EvalModel.objects.select_related("job").get(pk=model_id)
    indices = [r["index"] for r in rows]
    replaced = EvalResult.objects.filter(model=model, index__in=indices).delete()[0]
    EvalResult.objects.bulk_create([
        EvalResult(model=model, index=r["index"], prompt=r["prompt"], answer=str(r.get("answer") or ""), n=r["n"],
                   c=r["c"], samples=r.get("samples") or []) for r in rows])
    EvalModel.objects.filter(pk=model_id).update(seconds=model.seconds + seconds)
    job = EVAL_JOB.locked(model.job_id)
    job.done_units = EvalResult.objects.filter(model__job=job).count()
    job.heartbeat_at = timezone.now()
    job.save(update_fields=["done_units", "heartbeat_at"])
    return len(rows) - replaced


@transaction.atomic
def eval_finish(*, job_id: int, status: str, error: str = "") -> EvalJob:
    job = EVAL_JOB.locked(job_id)
    _move(job, status)
    job.ended_at = timezone.now()
    job.error = error
    job.save()
    log.info("eval %s: %s", job.pk, status)
    return job


@transaction.atomic
def eval_cancel(*, job_id: int, user=None) -> EvalJob:
    """Cancel a job (for ``user``, a member of its project): queued or lost at once; running through the flag
    the task reads between chunks."""
    job = EVAL_JOB.locked(job_id)
    if user is not None:
        require_role(user, job.project_id, Role.MEMBER)
    if job.is_ended and job.status != EvalStatus.LOST:
        raise EvalTransitionError(f"eval {job.pk} already ended ({job.status}); nothing to cancel")
    if job.cancel_requested_at is not None:
        raise EvalTransitionError(f"eval {job.pk} is already being cancelled")
    job.cancel_requested_at = timezone.now()
    if job.status in (EvalStatus.QUEUED, EvalStatus.LOST):
        _move(job, EvalStatus.CANCELLED)
        job.ended_at = job.cancel_requested_at
    job.save()
    audit(project=job.project_id, user=user, action="eval.cancel", target_type="eval", target_id=job.pk)
    return job


@transaction.atomic
def eval_resume(*, job_id: int, user=None) -> EvalJob:
    """Put a lost job back in the queue (for ``user``, a member of its project); the worker evaluates only the
    problems not stored yet."""
    job = EVAL_JOB.locked(job_id)
    if user is not None:
        require_role(user, job.project_id, Role.MEMBER)
    _move(job, EvalStatus.QUEUED)
    job.ended_at, job.error = None, ""
    _dispatch(job)
    job.save()
    audit(project=job.project_id, user=user, action="eval.resume", target_type="eval", target_id=job.pk)
    return job


def eval_jobs_mark_lost(*, older_than_s: float | None = None) -> list[int]:
    """Running jobs whose heartbeat is older than the lost threshold become lost (the job core's pass,
    webapp.jobs.passes; a re-delivered task resumes them, keeping the results stored so far)."""
    lost = jobs.mark_lost(EVAL_JOB, older_than_s=older_than_s)
    if lost:
        log.warning("eval jobs marked lost (stale heartbeat): %s", lost)
    return lost


MAX_AUTO_ATTEMPTS = 3


def eval_jobs_recover(*, max_attempts: int = MAX_AUTO_ATTEMPTS) -> dict[str, list[int]]:
    """Mark stale running jobs lost, then put back in the queue those tried fewer than ``max_attempts``
    times: unlike a training run, a job loses nothing by resuming (its stored chunks are kept), and the cap
    keeps a job that kills its worker (say, out of memory) from looping forever."""
    lost = eval_jobs_mark_lost()
    resumed = []
    for job_id in lost:
        if EvalJob.objects.values_list("attempts", flat=True).get(pk=job_id) < max_attempts:
            eval_resume(job_id=job_id)
            resumed.append(job_id)
    return {"lost": lost, "resumed": resumed, "redispatched": eval_jobs_redispatch()}

