"""/api/v1/evals: launch, list, read and cancel pass@k evaluations (docs/architecture.md#extension-points,
a job kind)."""
from __future__ import annotations

from typing import Any, Optional

from django.http import Http404
from ninja import Query, Schema, Status
from pydantic import Field

from training.fields import FieldErrors
from webapp.api.endpoints.launches import IDEMPOTENT, launched_once
from webapp.api.v1 import api, conflict
from webapp.evals import selectors as eval_selectors
from webapp.evals import services as eval_services
from webapp.evals.models import EvalJob
from webapp.projects import selectors as project_selectors
from webapp.runs.models import Run
from webapp.sweeps.models import Sweep


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
    return launched_once(request, make)


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
        raise conflict(exc) from None
    return {"id": job.pk, "status": job.status}
