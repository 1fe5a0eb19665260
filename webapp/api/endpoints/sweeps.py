"""/api/v1/sweeps: launch, list, read and stop sweeps, their forecasts, and the what-if replay of a policy
(docs/architecture.md#a-sweeps-decisions)."""
from __future__ import annotations

from typing import Any, Optional, Union

from ninja import Query, Schema, Status
from ninja.errors import HttpError
from pydantic import Field

from training.fields import FieldErrors
from training.memory import MAX_PACK
from webapp.api import selectors
from webapp.api.endpoints.launches import IDEMPOTENT, launch_inputs, launched_once
from webapp.api.v1 import api, conflict
from webapp.projects import selectors as project_selectors
from webapp.runs import services as run_services
from webapp.sweeps import forecasts as sweep_forecasts
from webapp.sweeps import halting as sweep_halting
from webapp.sweeps import what_if
from webapp.sweeps import selectors as sweep_selectors
from webapp.sweeps import services as sweep_services
from webapp.sweeps.forms import parse_seeds
from webapp.sweeps.models import Sweep
from webapp.sweeps.policies import rule_list
from webapp.sweeps.policies.budget import MAX_BUDGET_RUNS


class SweepIn(Schema):
    name: str = Field("", max_length=200)
    project: Optional[str] = Field(None, max_length=150)
    config: dict[str, Any]
    seeds: Union[int, list[int], str] = Field(4, description="A count (from config.seed on) or a list of seeds.")
    concurrency: int = Field(2, ge=1, le=256)
    pack: int = Field(0, ge=0, le=MAX_PACK, description="Seeds that may train together in one process (packed, each "
                                                        "as if alone); 0: chosen from the queue's workers' slots and "
                                                        "memory; 1: each its own")
    grid: dict[str, list[Any]] = Field(default_factory=dict, description='e.g. {"lr": [1e-4, 2e-4]}')
    policy: dict[str, Any] = Field(default_factory=lambda: {"name": "median"},
                                   description='e.g. {"name": "asha", "metric": "reward/mean", "eta": 3}')
    free_slot_use: str = Field("nothing", max_length=20, description="nothing, extend or new_seed")
    extend_steps: int = Field(0, ge=0, le=sweep_services.MAX_EXTEND_STEPS)
    budget: Optional[int] = Field(None, ge=1, le=MAX_BUDGET_RUNS,
                                  description="With free_slot_use new_seed: the compute budget in full runs (at least "
                                              "the runs the sweep starts with); a new seed starts only if it can "
                                              "finish within it; with free_slot_use extend (optional): a survivor "
                                              "is extended only while it pays for the extra steps")
    alert_bounds: dict[str, Any] = Field(default_factory=dict)
    from_checkpoint: Optional[int] = None
    queue: str = Field("", max_length=20, description="Where it runs: cpu, gpu or a registered queue (GET /queues); "
                                                        "default: the one its device needs.")


@api.post("/sweeps", response={201: dict}, tags=["sweeps"], openapi_extra=IDEMPOTENT)
def sweeps_create(request, payload: SweepIn):
    """Launch a sweep: seeds x an optional grid, a concurrency limit, an early-stopping policy. Safe to retry with
    an ``Idempotency-Key`` header."""
    def make():
        project, parent, config = launch_inputs(request, payload)
        cfg = run_services.as_config(config, user=request.user, project=project, queue=payload.queue)
        seeds_text = payload.seeds if isinstance(payload.seeds, str) else (
            str(payload.seeds) if isinstance(payload.seeds, int) else ",".join(map(str, payload.seeds)) + ",")
        try:
            seeds = parse_seeds(seeds_text, cfg.seed)
        except ValueError as exc:
            raise FieldErrors({"seeds": str(exc)}) from None
        # the sweep form's defaults: the policy watches reward/mean, larger is better
        policy = {"metric": "reward/mean", "mode": "max", **payload.policy}
        sweep = sweep_services.sweep_create(
            config=cfg, seeds=seeds, concurrency=payload.concurrency, pack=payload.pack, grid=payload.grid,
            policy=policy,
            free_slot_use=payload.free_slot_use, extend_steps=payload.extend_steps, budget=payload.budget,
            alert_bounds=payload.alert_bounds, name=payload.name, user=request.user, project=project,
            parent_run=parent.run if parent else None, parent_step=parent.step if parent else None,
            queue=payload.queue)
        return Status(201, {"id": sweep.pk, "project": sweep.project.name,
                            "runs": list(sweep.runs.order_by("pk").values_list("pk", flat=True))})
    return launched_once(request, make)


@api.get("/sweeps", tags=["sweeps"])
def sweeps_list(request, project: Optional[str] = Query(None, max_length=150),
                limit: int = Query(100, ge=1, le=1000)):
    return {"sweeps": [selectors.sweep_summary(s)
                       for s in sweep_selectors.sweep_list(user=request.user, project=project)[:limit]]}


@api.get("/sweeps/policies", tags=["sweeps"])
def sweeps_policies(request):
    """The early-stopping rules a sweep's ``policy.name`` may name, from the one registry (``policies.RULES``):
    each with its summary, what it says while it waits, and its parameters (default, range)."""
    return {"policies": rule_list()}


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
        return what_if.sweep_replay(sweep=sweep, policy={"metric": "reward/mean", "mode": "max",
                                                               **payload.policy})
    except what_if.ReplayTooLong as exc:
        raise HttpError(503, str(exc)) from None


class StopIn(Schema):
    reason: str = Field("", max_length=sweep_halting.MAX_REASON_CHARS)


@api.post("/sweeps/{sweep_id}/stop", tags=["sweeps"])
def sweeps_stop(request, sweep_id: int, payload: Optional[StopIn] = None):
    """Stop the whole sweep: each queued or running run is killed and nothing of it starts again (no freed slot
    starts a seed, no run of it resumes); who stopped it is recorded. 409 for a sweep stopped before, or one that has
    ended (every run of it ended: nothing is left to stop; it stays ended)."""
    project_selectors.get_visible(Sweep.objects.all(), request.user, pk=sweep_id)
    reason = (payload.reason.strip() if payload else "") or "stopped through the API"
    try:
        sweep, killed = sweep_halting.sweep_stop(sweep_id=sweep_id, user=request.user, reason=reason)
    except run_services.TransitionError as exc:
        raise conflict(exc) from None
    return {"id": sweep.pk, "stopped_at": sweep.stopped_at.isoformat(), "stopped_by": sweep.stopped_by,
            "stop_reason": sweep.stop_reason, "killed": killed}
