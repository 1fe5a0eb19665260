"""/api/v1/runs: launch, list, read, annotate, kill and resume runs, read their metrics, and append a run's metrics
and samples from a process logging to it (docs/architecture.md#a-runs-life)."""
from __future__ import annotations

from typing import Any, Optional

from ninja import Query, Schema, Status
from pydantic import Field

from training.fields import FieldErrors
from webapp.api import selectors
from webapp.api.endpoints.launches import IDEMPOTENT, launch_inputs, launched_once
from webapp.api.v1 import api, conflict
from webapp.projects import selectors as project_selectors
from webapp.runs import selectors as run_selectors
from webapp.runs import services as run_services
from webapp.runs.models import Run, RunStatus


class RunIn(Schema):
    name: str = Field("", max_length=200)
    project: Optional[str] = Field(None, max_length=150, description="Project name; default: your personal one.")
    config: dict[str, Any] = Field(description="The same mapping as a YAML config of `python -m training run`.")
    from_checkpoint: Optional[int] = Field(None, description="Start from this checkpoint (iterative RLVR).")
    queue: str = Field("", max_length=20, description="Where it runs: cpu, gpu or a registered queue (GET /queues); "
                                                        "default: the one its device needs.")


class KillIn(Schema):
    reason: str = Field("", max_length=1000)


@api.post("/runs", response={201: dict}, tags=["runs"], openapi_extra=IDEMPOTENT)
def runs_create(request, payload: RunIn):
    """Launch one run. 400 with per-field errors (config knobs by name) when anything is wrong. Safe to retry with
    an ``Idempotency-Key`` header."""
    def make():
        project, parent, config = launch_inputs(request, payload)
        run = run_services.run_create(config=config, user=request.user, project=project, name=payload.name,
                                      parent_run=parent.run if parent else None,
                                      parent_step=parent.step if parent else None, queue=payload.queue)
        return Status(201, {"id": run.pk, "status": run.status, "project": run.project.name, "queue": run.queue})
    return launched_once(request, make)


@api.get("/queues", tags=["runs"])
def queues_list(request):
    """The queues a run or sweep may name (``queue``): cpu and gpu (Celery slots, what a device derives) and
    every registered one, with a Slurm queue's resources."""
    return {"queues": run_selectors.queue_list()}


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
            raise conflict(exc) from None
    return selectors.run_detail(_run(request, run_id))


@api.post("/runs/{run_id}/kill", tags=["runs"])
def runs_kill(request, run_id: int, payload: Optional[KillIn] = None):
    """Kill a queued or running run (409 for any other, or one already being killed)."""
    _run(request, run_id)
    reason = (payload.reason.strip() if payload else "") or "killed through the API"
    try:
        run = run_services.run_kill(run_id=run_id, user=request.user, reason=reason)
    except run_services.TransitionError as exc:
        raise conflict(exc) from None
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
        raise conflict(exc) from None
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


class PointsIn(Schema):
    points: list[dict[str, Any]] = Field(description="[{step, key, value}...], at most 1,000.")


class SamplesIn(Schema):
    step: int
    samples: list[dict[str, Any]] = Field(description="[{prompt, completion, answer, reward, details}...], at most 64.")


@api.post("/runs/{run_id}/metrics", tags=["runs"])
def runs_metrics_append(request, run_id: int, payload: PointsIn):
    """Append metric points to a run that has not ended (members, or a token scoped to the run); a point of a
    (key, step) already stored replaces it. 409 once the run ended."""
    try:
        stored = run_services.run_metrics_log(user=request.user, run_id=run_id, points=payload.points)
    except run_services.TransitionError as exc:
        raise conflict(exc) from None
    return {"id": run_id, "stored": stored}


@api.post("/runs/{run_id}/samples", tags=["runs"])
def runs_samples_append(request, run_id: int, payload: SamplesIn):
    """Store a step's sampled completions on a run that has not ended (members, or a token scoped to the run),
    replacing that step's earlier ones. 409 once the run ended."""
    try:
        stored = run_services.run_samples_log(user=request.user, run_id=run_id, step=payload.step,
                                              samples=payload.samples)
    except run_services.TransitionError as exc:
        raise conflict(exc) from None
    return {"id": run_id, "stored": stored}
