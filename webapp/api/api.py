"""Seedbed's JSON API, version 1 (/api/v1/; OpenAPI schema at /api/v1/schema).

Every request carries ``Authorization: Bearer <token>`` (``python manage.py api_token USERNAME`` or the API
tokens page). The endpoints are thin: they call the same services and selectors as the forms, so the API and
the forms cannot disagree and the same checks apply (docs/architecture.md#projects-and-trust). Errors:
- 400 ``{"errors": {"<field>": "<message>"}}`` for bad input (nothing is created);
- 401 without a valid token, 403 when the caller's role in the project is too low, 404 for what is not in
  the caller's projects (missing and not-yours look the same), 409 when the object's state forbids the action.
"""
from __future__ import annotations

import functools
import json
import logging
from typing import Any, Optional, Union

from django.core.exceptions import PermissionDenied
from django.http import Http404
from ninja import File, Form, NinjaAPI, Query, Schema, Status, UploadedFile
from ninja.decorators import decorate_view
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser
from ninja.security import HttpBearer
from pydantic import Field

from training.fields import FieldErrors
from webapp.datasets import selectors as dataset_selectors
from webapp.datasets import services as dataset_services
from webapp.datasets.models import DatasetEntry
from webapp.datasets.uploads import DatasetUpload
from webapp.evals import selectors as eval_selectors
from webapp.evals import services as eval_services
from webapp.evals.models import EvalJob
from webapp.projects import selectors as project_selectors
from webapp.projects import services as project_services
from webapp.projects.models import Project
from webapp.runs import selectors as run_selectors
from webapp.runs import services as run_services
from webapp.runs.models import Run, RunStatus
from webapp.sweeps import forecasts as sweep_forecasts
from webapp.sweeps import replays as sweep_replays
from webapp.sweeps import selectors as sweep_selectors
from webapp.sweeps import services as sweep_services
from webapp.sweeps.forms import parse_seeds
from webapp.sweeps.models import Sweep
from webapp.sweeps.policies.budget import MAX_BUDGET_RUNS

from . import idempotency, selectors
from .services import user_for_token

log = logging.getLogger("seedbed.api")


class BearerToken(HttpBearer):
    def authenticate(self, request, token: str):
        user = user_for_token(token)
        if user is not None:
            request.user = user  # the services and selectors act for this user
        return user


class JsonObjectParser(Parser):
    """Every request body is a JSON object: an array, a string or null is refused before any field is read."""

    def parse_body(self, request):
        data = json.loads(request.body)
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object {{...}}; got {type(data).__name__}")
        return data


api = NinjaAPI(title="Seedbed API", version="1", urls_namespace="api-v1", openapi_url="/schema", docs_url=None,
               auth=BearerToken(), parser=JsonObjectParser(),
               description="Launch, watch and stop RLVR runs, seed sweeps and pass@k evaluations. "
                           "Authorization: Bearer <token>.")


# --- errors: one shape for every bad input ----------------------------------------------------------------------

def _field_of(loc: list) -> str:
    """ninja's error location -> the field name the caller sent: ("body", "payload", "seeds", 0) -> "seeds"."""
    parts = [str(p) for p in loc if p not in ("body", "payload", "query", "path")]
    return parts[0] if parts else "body"


@api.exception_handler(ValidationError)
def _schema_errors(request, exc: ValidationError):
    errors: dict[str, str] = {}
    for error in exc.errors:
        errors.setdefault(_field_of(list(error.get("loc", []))), str(error.get("msg", "invalid")))
    return api.create_response(request, {"errors": errors}, status=400)


@api.exception_handler(FieldErrors)
def _field_errors(request, exc: FieldErrors):
    return api.create_response(request, {"errors": exc.errors}, status=400)


@api.exception_handler(HttpError)
def _http_errors(request, exc: HttpError):
    # ninja answers a body its parser (JsonObjectParser) refuses with HttpError(400) raised from the parser's
    # error: say what is wrong on the field "body", in the one shape of bad input
    if exc.status_code == 400 and exc.__cause__ is not None:
        cause = exc.__cause__
        message = str(cause) if type(cause) is ValueError else f"not valid JSON: {cause}"
        return api.create_response(request, {"errors": {"body": message}}, status=400)
    return api.create_response(request, {"detail": str(exc)}, status=exc.status_code)


@api.exception_handler(Http404)
def _not_found(request, exc):
    return api.create_response(request, {"detail": str(exc) or "not found"}, status=404)


@api.exception_handler(PermissionDenied)
def _forbidden(request, exc):
    return api.create_response(request, {"detail": str(exc) or "forbidden"}, status=403)


@api.exception_handler(AuthenticationError)
def _unauthorized(request, exc):
    return api.create_response(request, {"detail": "give a valid token: Authorization: Bearer <token> (make one on "
                                                   "the API tokens page, /account/tokens/, or with `python "
                                                   "manage.py api_token USERNAME`)"}, status=401)


def _conflict(exc: Exception) -> HttpError:
    return HttpError(409, str(exc))


# --- schemas ------------------------------------------------------------------------------------------------------

class ProjectIn(Schema):
    name: str = Field(max_length=150)


class MemberIn(Schema):
    username: str = Field(max_length=150)
    role: str = Field(max_length=10)


class RunIn(Schema):
    name: str = Field("", max_length=200)
    project: Optional[str] = Field(None, max_length=150, description="Project name; default: your personal one.")
    config: dict[str, Any] = Field(description="The same mapping as a YAML config of `python -m training run`.")
    from_checkpoint: Optional[int] = Field(None, description="Start from this checkpoint (iterative RLVR).")


class KillIn(Schema):
    reason: str = Field("", max_length=1000)


class SweepIn(Schema):
    name: str = Field("", max_length=200)
    project: Optional[str] = Field(None, max_length=150)
    config: dict[str, Any]
    seeds: Union[int, list[int], str] = Field(4, description="A count (from config.seed on) or a list of seeds.")
    concurrency: int = Field(2, ge=1, le=256)
    grid: dict[str, list[Any]] = Field(default_factory=dict, description='e.g. {"lr": [1e-4, 2e-4]}')
    policy: dict[str, Any] = Field(default_factory=lambda: {"name": "median"},
                                   description='e.g. {"name": "asha", "metric": "reward/mean", "eta": 3}')
    free_slot_use: str = Field("nothing", max_length=20, description="nothing, extend or new_seed")
    extend_steps: int = Field(0, ge=0, le=sweep_services.MAX_EXTEND_STEPS)
    budget: Optional[int] = Field(None, ge=1, le=MAX_BUDGET_RUNS,
                                  description="With free_slot_use new_seed: the compute budget in full runs (at least "
                                              "the runs the sweep starts with); a new seed starts only if it can "
                                              "finish within it")
    alert_bounds: dict[str, Any] = Field(default_factory=dict)
    from_checkpoint: Optional[int] = None


class EvalIn(Schema):
    name: str = Field("", max_length=200)
    run: Optional[int] = Field(None, description="Evaluate models of this run ...")
    sweep: Optional[int] = Field(None, description="... or of this sweep (give one of them).")
    models: list[str] = Field(default_factory=lambda: ["base"], max_length=1000,
                              description='"base" and/or "ckpt:<checkpoint id>"')
    task: str = Field("arithmetic", max_length=250)
    data_path: str = Field("", max_length=1000)
    prompt_field: str = Field("prompt", max_length=100)
    answer_field: str = Field("answer", max_length=100)
    problems: int = 64
    n: int = 16
    k: list[int] = Field(default_factory=list, max_length=64)
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 8
    rewards: list[Any] = Field(default_factory=list, max_length=16)
    seed: int = 0
    keep_completions: int = 4


class DatasetPathIn(Schema):
    name: str = Field(max_length=100)
    path: str = Field(max_length=1000, description="A data file on the server, inside the allowed folders.")
    project: Optional[str] = Field(None, max_length=150)
    prompt_field: Optional[str] = Field(None, max_length=200, description="Blank: guessed from the columns.")
    answer_field: Optional[str] = Field(None, max_length=200)
    fields: Optional[dict[str, str]] = Field(None, description="tests, entry_point, setup_code, constraints, "
                                                               "system_prompt: the columns holding them")
    held_out_fraction: float = 0.1
    split_seed: int = 0


class DatasetMappingIn(Schema):
    prompt_field: str = Field(max_length=200)
    answer_field: str = Field("", max_length=200)
    fields: dict[str, str] = Field(default_factory=dict)
    held_out_fraction: float = 0.1
    split_seed: int = 0


# --- projects -----------------------------------------------------------------------------------------------------

@api.get("/me", tags=["projects"])
def me(request):
    """Who the token belongs to and the projects they see, with their role in each."""
    return {"username": request.user.get_username(), "is_staff": request.user.is_staff,
            "projects": selectors.projects_of(request.user)}


@api.get("/projects", tags=["projects"])
def projects_list(request):
    return {"projects": selectors.projects_of(request.user)}


@api.post("/projects", response={201: dict}, tags=["projects"])
def projects_create(request, payload: ProjectIn):
    project = project_services.project_create(user=request.user, name=payload.name)
    return Status(201, {"name": project.name, "role": "admin"})


@api.get("/projects/{name}/members", tags=["projects"])
def members_list(request, name: str):
    project = project_selectors.project_by_name(request.user, name)
    return {"members": [{"username": m.user.get_username(), "role": m.role}
                        for m in project_selectors.project_members(project)]}


@api.post("/projects/{name}/members", response={201: dict}, tags=["projects"])
def members_add(request, name: str, payload: MemberIn):
    project = project_selectors.project_by_name(request.user, name)
    membership = project_services.member_set(user=request.user, project=project, username=payload.username,
                                             role=payload.role)
    return Status(201, {"project": project.name, "username": membership.user.get_username(), "role": membership.role})


# --- runs ---------------------------------------------------------------------------------------------------------

def _launch_project(request, name: Optional[str]) -> Optional[Project]:
    return project_selectors.launch_project_named(request.user, name)


def _checkpoint(request, checkpoint_id: Optional[int]):
    if checkpoint_id is None:
        return None
    checkpoint = selectors.visible_checkpoint(request.user, checkpoint_id)
    if checkpoint is None:
        raise FieldErrors({"from_checkpoint": f"no checkpoint {checkpoint_id} in your projects"})
    return checkpoint


def _launch_inputs(request, payload):
    """A launch's project (by name), the checkpoint it starts from (its folder the config's default model_path)
    and the config; field errors for a project or checkpoint outside the caller's projects."""
    project = _launch_project(request, payload.project)
    parent = _checkpoint(request, payload.from_checkpoint)
    config = dict(payload.config)
    if parent is not None:
        config.setdefault("model_path", parent.path)
    return project, parent, config


# the launches' optional header, in the OpenAPI schema (read by _launched_once, not by ninja)
IDEMPOTENT = {"parameters": [{
    "in": "header", "name": idempotency.HEADER, "required": False,
    "schema": {"type": "string", "minLength": 1, "maxLength": idempotency.MAX_KEY_LENGTH},
    "description": "A unique string you choose per launch (e.g. a UUID; printable ASCII): a retry with it by the same "
                   "user answers the first request and launches nothing (422 with another body; kept 24 h)."}]}


def _launched_once(request, make):
    """A launch, once per ``Idempotency-Key`` (webapp.api.idempotency): without the header ``make()`` launches;
    with it, a retry by the same user with the same key and request gets the first answer (status and body, with
    ``Idempotent-Replayed: true``) and launches nothing. 400 for a malformed key, 422 for the key with another
    request, 409 while the key's first request has not finished."""
    key = request.headers.get(idempotency.HEADER)
    if key is None:
        return make()
    problem = idempotency.key_error(key)
    if problem is not None:
        raise FieldErrors({idempotency.HEADER: f"{problem} (a unique string you choose per launch, e.g. a UUID)"})

    def launch() -> tuple[int, dict]:
        answer = make()
        return answer.status_code, answer.value

    digest = idempotency.request_digest(request.method, request.path, request.body)
    try:
        status, body, replayed = idempotency.once(user=request.user, key=key, digest=digest, make=launch)
    except idempotency.KeyReused:
        raise HttpError(422, f"this {idempotency.HEADER} was already used for another request (another body or "
                             "endpoint); use a new key for a new launch") from None
    except idempotency.KeyInProgress:
        raise HttpError(409, f"a request with this {idempotency.HEADER} is still in progress; retry in a "
                             "moment") from None
    response = api.create_response(request, body, status=status)
    if replayed:
        response["Idempotent-Replayed"] = "true"
    return response


@api.post("/runs", response={201: dict}, tags=["runs"], openapi_extra=IDEMPOTENT)
def runs_create(request, payload: RunIn):
    """Launch one run. 400 with per-field errors (config knobs by name) when anything is wrong. Safe to retry with
    an ``Idempotency-Key`` header."""
    def make():
        project, parent, config = _launch_inputs(request, payload)
        run = run_services.run_create(config=config, user=request.user, project=project, name=payload.name,
                                      parent_run=parent.run if parent else None,
                                      parent_step=parent.step if parent else None)
        return Status(201, {"id": run.pk, "status": run.status, "project": run.project.name})
    return _launched_once(request, make)


@api.get("/runs", tags=["runs"])
def runs_list(request, project: Optional[str] = Query(None, max_length=150),
              status: Optional[str] = Query(None, max_length=20), limit: int = Query(100, ge=1, le=1000)):
    if status is not None and status not in RunStatus.values:
        raise FieldErrors({"status": f"one of {', '.join(RunStatus.values)}; got {status!r}"})
    runs = run_selectors.run_list(user=request.user, status=status, project=project)[:limit]
    return {"runs": [selectors.run_summary(run) for run in runs]}


def _run(request, run_id: int) -> Run:
    return project_selectors.get_visible(Run.objects.select_related("project", "sweep", "created_by"), request.user,
                                         pk=run_id)


@api.get("/runs/{run_id}", tags=["runs"])
def runs_get(request, run_id: int):
    return selectors.run_detail(_run(request, run_id))


class RunPatchIn(Schema):
    name: Optional[str] = Field(None, max_length=200)
    notes: Optional[str] = Field(None, max_length=10_000)
    tags: Optional[list[str]] = Field(None, max_length=20, description="The run's tags (replaced).")
    archived: Optional[bool] = Field(None, description="Archive (hidden from lists; an ended run) or unarchive.")


@api.patch("/runs/{run_id}", tags=["runs"])
def runs_patch(request, run_id: int, payload: RunPatchIn):
    """Rename, note, tag or archive a run (members); 409 when archiving a run that has not ended."""
    _run(request, run_id)
    if any(" " in t or "," in t for t in payload.tags or []):
        raise FieldErrors({"tags": "a tag has no spaces or commas"})
    tags = run_services.parse_tags(" ".join(payload.tags)) if payload.tags is not None else None
    run_services.run_annotate(run_ids=[run_id], user=request.user, name=payload.name, notes=payload.notes, tags=tags)
    if payload.archived is not None:
        try:
            run_services.run_archive(run_ids=[run_id], user=request.user, archived=payload.archived)
        except run_services.TransitionError as exc:
            raise _conflict(exc) from None
    return selectors.run_detail(_run(request, run_id))


@api.post("/runs/{run_id}/kill", tags=["runs"])
def runs_kill(request, run_id: int, payload: Optional[KillIn] = None):
    """Kill a queued or running run (409 for any other, or one already being killed)."""
    _run(request, run_id)
    reason = (payload.reason.strip() if payload else "") or "killed through the API"
    try:
        run = run_services.run_kill(run_id=run_id, user=request.user, reason=reason)
    except run_services.TransitionError as exc:
        raise _conflict(exc) from None
    return {"id": run.pk, "status": run.status, "kill_requested": True}


class ResumeIn(Schema):
    nproc_per_node: Optional[int] = Field(None, ge=1, le=64, description="A seedbed run: resume on this many "
                                          "ranks per node (its checkpoints load at any world size).")
    nnodes: Optional[int] = Field(None, ge=1, le=64, description="A seedbed run: resume on this many nodes.")


@api.post("/runs/{run_id}/resume", tags=["runs"])
def runs_resume(request, run_id: int, payload: Optional[ResumeIn] = None):
    """Queue a killed, lost or failed run again, from its last checkpoint (409 for any other), optionally on
    another number of ranks."""
    _run(request, run_id)
    try:
        run = run_services.run_resume(run_id=run_id, user=request.user,
                                      nproc_per_node=payload.nproc_per_node if payload else None,
                                      nnodes=payload.nnodes if payload else None)
    except run_services.TransitionError as exc:
        raise _conflict(exc) from None
    return {"id": run.pk, "status": run.status}


@api.get("/runs/{run_id}/metrics", tags=["runs"])
def runs_metrics(request, run_id: int, metric_keys: str = Query("", alias="keys", max_length=2000),
                 since_step: int = Query(0, ge=0, le=2**31 - 1), max_points: int = Query(400, ge=10, le=10_000)):
    """Metric points after ``since_step``: ``{"width": w, "series": {key: {"step", "value", "min", "max",
    "count"}}}``. A long series comes in buckets of ``width`` steps (the bucket's last step, mean, min, max and
    number of finite points), as the dashboard draws it; ``width`` 1 means every point."""
    run = _run(request, run_id)
    wanted = [k.strip() for k in metric_keys.split(",") if k.strip()]
    return run_selectors.run_metrics_bucketed(run_id=run.pk, keys=wanted or None, since_step=since_step,
                                              max_points=max_points)


# --- sweeps -------------------------------------------------------------------------------------------------------

@api.post("/sweeps", response={201: dict}, tags=["sweeps"], openapi_extra=IDEMPOTENT)
def sweeps_create(request, payload: SweepIn):
    """Launch a sweep: seeds x an optional grid, a concurrency limit, an early-stopping policy. Safe to retry with
    an ``Idempotency-Key`` header."""
    def make():
        project, parent, config = _launch_inputs(request, payload)
        cfg = run_services.as_config(config, user=request.user, project=project)
        seeds_text = payload.seeds if isinstance(payload.seeds, str) else (
            str(payload.seeds) if isinstance(payload.seeds, int) else ",".join(map(str, payload.seeds)) + ",")
        try:
            seeds = parse_seeds(seeds_text, cfg.seed)
        except ValueError as exc:
            raise FieldErrors({"seeds": str(exc)}) from None
        # the sweep form's defaults: the policy watches reward/mean, larger is better
        policy = {"metric": "reward/mean", "mode": "max", **payload.policy}
        sweep = sweep_services.sweep_create(
            config=cfg, seeds=seeds, concurrency=payload.concurrency, grid=payload.grid, policy=policy,
            free_slot_use=payload.free_slot_use, extend_steps=payload.extend_steps, budget=payload.budget,
            alert_bounds=payload.alert_bounds, name=payload.name, user=request.user, project=project,
            parent_run=parent.run if parent else None, parent_step=parent.step if parent else None)
        return Status(201, {"id": sweep.pk, "project": sweep.project.name,
                            "runs": list(sweep.runs.order_by("pk").values_list("pk", flat=True))})
    return _launched_once(request, make)


@api.get("/sweeps", tags=["sweeps"])
def sweeps_list(request, project: Optional[str] = Query(None, max_length=150),
                limit: int = Query(100, ge=1, le=1000)):
    return {"sweeps": [selectors.sweep_summary(s)
                       for s in sweep_selectors.sweep_list(user=request.user, project=project)[:limit]]}


@api.get("/sweeps/{sweep_id}", tags=["sweeps"])
def sweeps_get(request, sweep_id: int):
    sweep = project_selectors.get_visible(Sweep.objects.select_related("project"), request.user, pk=sweep_id)
    return selectors.sweep_detail(sweep)


class ReplayIn(Schema):
    policy: dict[str, Any] = Field(description="The policy to replay, as a sweep takes it: name, metric (default "
                                               "reward/mean), mode (default max) and its other keys.")


@api.get("/sweeps/{sweep_id}/forecast", tags=["sweeps"])
def sweeps_forecast(request, sweep_id: int, metric: Optional[str] = Query(None, max_length=100)):
    """Each run's forecast of ``metric`` (default the policy's) to its horizon with its 95 % band, its forecast final
    and P(near-best), as the bayes policy computes them (the dashboard's forecasts)."""
    sweep = project_selectors.get_visible(Sweep.objects.select_related("project"), request.user, pk=sweep_id)
    metric = metric or sweep.policy.get("metric") or sweep_selectors.DEFAULT_METRIC
    return sweep_forecasts.sweep_forecast(sweep=sweep, metric=metric, mode=sweep_selectors.metric_mode(metric, sweep))


@api.post("/sweeps/{sweep_id}/replay", tags=["sweeps"])
def sweeps_replay(request, sweep_id: int, payload: ReplayIn):
    """What would this policy have done? Replays it on the finished sweep's stored curves without touching them:
    compute saved, the runs it stops and where, the run it keeps and whether it is the best final. 400 with
    ``policy.<key>`` errors for a bad policy (or ``sweep`` while a run is still going), 503 past the time budget."""
    sweep = project_selectors.get_visible(Sweep.objects.select_related("project"), request.user, pk=sweep_id)
    try:
        return sweep_replays.sweep_replay(sweep=sweep, policy={"metric": "reward/mean", "mode": "max",
                                                               **payload.policy})
    except sweep_replays.ReplayTooLong as exc:
        raise HttpError(503, str(exc)) from None


# --- evaluations --------------------------------------------------------------------------------------------------

@api.post("/evals", response={201: dict}, tags=["evals"], openapi_extra=IDEMPOTENT)
def evals_create(request, payload: EvalIn):
    """Evaluate a run's or a sweep's models (base and/or checkpoints) with pass@k on held-out problems. Safe to
    retry with an ``Idempotency-Key`` header."""
    def make():
        if (payload.run is None) == (payload.sweep is None):
            raise FieldErrors({"run": "give the run or the sweep whose models to evaluate (one of them)"})
        try:
            run = (project_selectors.get_visible(Run.objects.all(), request.user, pk=payload.run)
                   if payload.run else None)
            sweep = (project_selectors.get_visible(Sweep.objects.all(), request.user, pk=payload.sweep)
                     if payload.sweep else None)
        except Http404:
            field = "run" if payload.run else "sweep"
            raise FieldErrors({field: f"no {field} {payload.run or payload.sweep} in your projects"}) from None
        data = payload.dict()
        job = eval_services.eval_create(
            run=run, sweep=sweep, user=request.user, models=data["models"], name=data["name"], task=data["task"],
            data_path=data["data_path"].strip(), prompt_field=data["prompt_field"].strip(),
            answer_field=data["answer_field"].strip(), problems=data["problems"], n=data["n"], ks=data["k"] or None,
            temperature=data["temperature"], top_p=data["top_p"], max_new_tokens=data["max_new_tokens"],
            rewards=data["rewards"] or None, seed=data["seed"], keep_completions=data["keep_completions"])
        return Status(201, {"id": job.pk, "status": job.status, "project": job.project.name})
    return _launched_once(request, make)


@api.get("/evals", tags=["evals"])
def evals_list(request, project: Optional[str] = Query(None, max_length=150), limit: int = Query(100, ge=1, le=1000)):
    """Evaluations of your projects, newest first: id, name, project, task, status, progress."""
    jobs = eval_selectors.eval_job_list(user=request.user)
    if project is not None:
        jobs = jobs.filter(project__name=project)
    return {"evals": [{"id": j.pk, "name": j.display_name, "project": j.project.name, "task": j.task,
                       "status": j.status, "done": j.done_units, "total": j.total_units,
                       "run": j.run_id, "sweep": j.sweep_id} for j in jobs.select_related("project")[:limit]]}


@api.get("/evals/{job_id}", tags=["evals"])
def evals_get(request, job_id: int):
    """The job's status and progress, and its pass@k table (per model: pass@k for each k, per-problem n, c)."""
    job = project_selectors.get_visible(EvalJob.objects.select_related("project"), request.user, pk=job_id)
    return {"id": job.pk, "name": job.display_name, "project": job.project.name, "status": job.status,
            "done": job.done_units, "total": job.total_units, "error": job.error,
            **eval_selectors.export_payload(job=job)}


@api.post("/evals/{job_id}/cancel", tags=["evals"])
def evals_cancel(request, job_id: int):
    project_selectors.get_visible(EvalJob.objects.all(), request.user, pk=job_id)
    try:
        job = eval_services.eval_cancel(job_id=job_id, user=request.user)
    except eval_services.EvalTransitionError as exc:
        raise _conflict(exc) from None
    return {"id": job.pk, "status": job.status}


# --- datasets -----------------------------------------------------------------------------------------------------

def _dataset(request, dataset_id: int) -> DatasetEntry:
    return project_selectors.get_visible(DatasetEntry.objects.select_related("project"), request.user, pk=dataset_id)


@api.get("/datasets", tags=["datasets"])
def datasets_list(request, project: Optional[str] = Query(None, max_length=150)):
    entries = dataset_selectors.dataset_entries(user=request.user)
    if project is not None:
        entries = entries.filter(project__name=project)
    return {"datasets": [selectors.dataset_summary(e) for e in entries]}


# (declared before /datasets/{dataset_id}: the first route whose path matches answers)
@api.post("/datasets/register", response={201: dict}, tags=["datasets"])
def datasets_register(request, payload: DatasetPathIn):
    """Register a data file already on the server (inside the allowed folders)."""
    entry = dataset_services.dataset_register(
        user=request.user, project=_launch_project(request, payload.project), name=payload.name, path=payload.path,
        prompt_field=payload.prompt_field, answer_field=payload.answer_field, fields=payload.fields,
        held_out_fraction=payload.held_out_fraction, split_seed=payload.split_seed)
    return Status(201, selectors.dataset_summary(entry))


@api.get("/datasets/{dataset_id}", tags=["datasets"])
def datasets_get(request, dataset_id: int):
    """A dataset: its file, columns, first rows, mapping and split (what ``task: dataset:<name>`` stands for)."""
    return selectors.dataset_detail(_dataset(request, dataset_id))


def _streamed_dataset(run):
    """Before ninja reads the form: the file streams into $SEEDBED_HOME/uploads and stops at the size limit
    (webapp.datasets.uploads); a file stopped there is answered as the field error it is."""
    @functools.wraps(run)
    def with_handler(request, *args, **kwargs):
        handler = DatasetUpload(request)
        request.upload_handlers = [handler]
        response = run(request, *args, **kwargs)
        if handler.too_large:
            return api.create_response(request, {"errors": {"file": handler.message}}, status=400)
        return response
    return with_handler


@api.post("/datasets", response={201: dict}, tags=["datasets"])
@decorate_view(_streamed_dataset)
def datasets_upload(request, file: UploadedFile = File(...), name: str = Form(..., max_length=100),
                    project: Optional[str] = Form(None, max_length=150),
                    prompt_field: Optional[str] = Form(None, max_length=200),
                    answer_field: Optional[str] = Form(None, max_length=200),
                    held_out_fraction: float = Form(0.1), split_seed: int = Form(0)):
    """Upload a .jsonl, .parquet or .csv file (multipart/form-data): checked row by row before it is kept."""
    entry = dataset_services.dataset_upload(
        user=request.user, project=_launch_project(request, project), name=name, upload=file,
        prompt_field=prompt_field or None, answer_field=answer_field, held_out_fraction=held_out_fraction,
        split_seed=split_seed)
    return Status(201, selectors.dataset_summary(entry))


@api.post("/datasets/{dataset_id}/mapping", tags=["datasets"])
def datasets_mapping(request, dataset_id: int, payload: DatasetMappingIn):
    """Change the column mapping and the split (new runs only: runs made before keep theirs)."""
    entry = dataset_services.dataset_update(
        user=request.user, entry=_dataset(request, dataset_id), prompt_field=payload.prompt_field,
        answer_field=payload.answer_field, fields=payload.fields, held_out_fraction=payload.held_out_fraction,
        split_seed=payload.split_seed)
    return selectors.dataset_detail(entry)
