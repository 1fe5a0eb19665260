"""Every write a sweep makes beyond runs.services: launching a grid x seeds, applying its early-stopping
policy to the live runs, redirecting freed slots, killing several runs, raising RL-health alerts.

Policy application (``sweep_apply_policy``) decides from the stored curves on every call (the database is the
source of truth; any process may call it: the policy task after a metrics flush, the maintenance beat): a fresh
policy fed every stored point (``policy_check``, a replay from scratch outside any transaction), its new decisions
stored under a lock on the sweep row. A decision is stored once per run and action (a unique
constraint), so applying twice, or from two processes at once, decides and kills once.
"""
from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import time
from datetime import timedelta
from typing import Iterable, Optional

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from training.config import TrainConfig
from training.reward_dry_run import DRY_RUN_KNOBS
from training.fields import FieldErrors, control_character_error, range_error
from webapp.projects.models import Role
from webapp.projects.services import audit, project_for_launch, require_role
from webapp.runs import services as run_services
from webapp.runs.capacity import FRESH_FOR_S, check_caps
from webapp.runs.models import MetricPoint, Run, RunStatus, WorkerCapacity

from . import alerts as alert_rules
from . import halting
from .policies.budget import budget_error, may_extend
from .packing import resolve_pack
from .policies.feasibility import NOTE_MARK, policy_cannot_act_cached
from .models import Alert, AlertKind, FreeSlotUse, PolicyDecision, Sweep, SweepPlan
from .policies import EXTEND, STOP, Decision, make_policy, one_run_error, stored_config
from .policy_check import PACE, policy_check
from .selectors import budget_use

log = logging.getLogger("seedbed.sweeps")

MAX_GRID_KNOBS = 3
MAX_RUNS = 256
MAX_EXTEND_STEPS = 1_000_000  # a survivor's extension: at most total_steps' own maximum
# Knobs a grid may not vary: the seed is the sweep's other axis; total_steps is the policy's horizon.
NOT_GRIDDABLE = ("seed", "total_steps", "preset")


# --- launching ----------------------------------------------------------------------------------------------

def grid_points(grid: dict[str, list]) -> list[dict]:
    """Every combination of the grid's values, first knob slowest: {"a": [1, 2], "b": [3]} -> [{a:1,b:3}, {a:2,b:3}].

    >>> grid_points({"lr": [1, 2], "eps_high": [0.2]})
    [{'lr': 1, 'eps_high': 0.2}, {'lr': 2, 'eps_high': 0.2}]
    >>> grid_points({})
    [{}]
    """
    knobs = list(grid)
    return [dict(zip(knobs, values)) for values in itertools.product(*(grid[k] for k in knobs))]


def validate_grid(grid: dict, base: TrainConfig, n_seeds: int = 1,
                  queue: str = "") -> list[tuple[dict, TrainConfig]]:
    """Check a grid of 0-3 knobs against the schema; returns each point with its config (the base itself when
    there is no grid: nothing is parsed twice). The size is checked against MAX_RUNS before any point is.
    Raises FieldErrors keyed ``grid`` (or ``seeds`` for the size)."""
    if not isinstance(grid, dict):
        raise FieldErrors({"grid": f"expected a mapping knob -> list of values; got {type(grid).__name__}"})
    if len(grid) > MAX_GRID_KNOBS:
        raise FieldErrors({"grid": f"at most {MAX_GRID_KNOBS} knobs; got {len(grid)} ({', '.join(grid)})"})
    known = set(TrainConfig().to_dict())
    for knob, values in grid.items():
        if knob not in known:
            raise FieldErrors({"grid": f"{knob}: not a config knob"})
        if knob in NOT_GRIDDABLE:
            raise FieldErrors({"grid": f"{knob}: cannot be varied by a grid (seeds are the sweep's other axis; "
                                       "total_steps is the policy's horizon; one preset per sweep)"})
        if not isinstance(values, list) or not values:
            raise FieldErrors({"grid": f"{knob}: give a non-empty list of values"})
        if len({repr(v) for v in values}) != len(values):
            raise FieldErrors({"grid": f"{knob}: values must be distinct; got {values}"})
    n_points = math.prod(len(values) for values in grid.values())
    if n_points > MAX_RUNS:  # too large whatever the seeds: the grid is what to shrink
        raise FieldErrors({"grid": f"{n_points} grid points; a sweep has at most {MAX_RUNS} runs"})
    if n_points * n_seeds > MAX_RUNS:
        raise FieldErrors({"seeds": f"{n_points} grid points x {n_seeds} seeds = {n_points * n_seeds} runs; "
                                    f"at most {MAX_RUNS}"})
    if not grid:
        return [({}, base)]
    checked = []
    for point in grid_points(grid):
        try:
            # the base's rewards were dry-run when it was parsed: again only for a point that changes what it saw
            cfg = TrainConfig.from_dict({**base.to_dict(), **point}, dry_run=bool(DRY_RUN_KNOBS & set(point)))
            check_caps(cfg, queue=run_services.queue_named(queue, cfg))  # what its queue has
            checked.append((point, cfg))
        except FieldErrors as exc:
            knob = next(iter(exc.errors))
            # a knob of the point itself, or one of the base config the point makes wrong (engine=trl: the base's
            # dynamic_sampling, which TRL lacks)
            where = (f"{knob}={point[knob]!r}" if knob in point else
                     " ".join(f"{k}={v!r}" for k, v in point.items()) + f": {knob}")
            raise FieldErrors({"grid": f"{where}: {exc.errors[knob]}"}) from exc
    return checked


def policy_config_for(policy: Optional[dict], *, total_steps: int, free_slot_use: str, extend_steps: int) -> dict:
    """The stored policy config (what the policy keeps of it: nothing for manual): the user's keys,
    ``max_steps`` defaulting to the runs' ``total_steps``, and ``extend_survivors_by`` set when freed slots
    extend survivors. Raises FieldErrors keyed ``policy.<key>``."""
    config = dict(policy or {})
    config.setdefault("max_steps", total_steps)
    if free_slot_use == FreeSlotUse.EXTEND:
        config["extend_survivors_by"] = extend_steps
    try:
        built = make_policy(config)
    except FieldErrors as exc:
        raise FieldErrors({f"policy.{key}": message for key, message in exc.errors.items()}) from exc
    return stored_config(built, config)


@transaction.atomic
def sweep_create(*, config: TrainConfig | dict, seeds: Iterable[int], concurrency: int, policy: Optional[dict] = None,
                 grid: Optional[dict] = None, free_slot_use: str = FreeSlotUse.NOTHING, extend_steps: int = 0,
                 budget: Optional[int] = None, alert_bounds: Optional[dict] = None, name: str = "", user=None,
                 project=None, parent_run: Optional[Run] = None, parent_step: Optional[int] = None,
                 copied_from: Optional[Sweep] = None, queue: str = "", pack: int = 1) -> Sweep:
    """Create a sweep of (grid point x seed) runs, all queued, and start as many as ``concurrency`` allows.

    Runs are ordered seed by seed (every grid point of the first seed, then the second ...), so a slow
    sweep shows every grid point early. A sweep started from a checkpoint records that parent on every run
    (iterative RLVR lineage). ``config`` is parsed once (a TrainConfig from the form is taken as it is), each
    grid point once, and each run's config is its point's with the seed replaced. Raises FieldErrors naming
    the bad field. ``user`` must be a member of ``project`` (default: their personal project) and able to read
    ``parent_run`` and ``copied_from`` (the sweep whose settings the form was filled with: its lineage).
    ``queue``: where its runs go (``runs.services.queue_named``; by default the one their device needs).
    ``pack``: how many of its seeds may train in one process (0: chosen for the queue, ``sweeps.packing``).
    """
    project = project_for_launch(user=user, project=project)
    if parent_run is not None and user is not None:
        require_role(user, parent_run.project_id, Role.VIEWER)
    if copied_from is not None and user is not None:
        require_role(user, copied_from.project_id, Role.VIEWER)
    seeds = [int(s) for s in seeds]
    errors = {"name": control_character_error(name)} if control_character_error(name) else {}
    seed_range = next(f.metadata for f in dataclasses.fields(TrainConfig) if f.name == "seed")
    if not seeds:
        errors["seeds"] = "give at least one seed"
    elif len(set(seeds)) != len(seeds):
        errors["seeds"] = f"seeds must be distinct; got {seeds}"
    elif any(range_error(s, seed_range) for s in seeds):
        errors["seeds"] = next(f"seed {s} " + range_error(s, seed_range) for s in seeds if range_error(s, seed_range))
    if concurrency < 1:
        errors["concurrency"] = f"must be at least 1; got {concurrency}"
    if free_slot_use not in FreeSlotUse.values:
        errors["free_slot_use"] = f"must be one of {', '.join(FreeSlotUse.values)}; got {free_slot_use!r}"
    if free_slot_use == FreeSlotUse.EXTEND and extend_steps < 1:
        errors["extend_steps"] = "give the number of steps a survivor is extended by (at least 1)"
    elif not 0 <= extend_steps <= MAX_EXTEND_STEPS:
        errors["extend_steps"] = f"must lie in [0, {MAX_EXTEND_STEPS}]; got {extend_steps}"
    try:
        alert_rules.AlertBounds.from_overrides(alert_bounds)
    except ValueError as exc:
        errors["alert_bounds"] = str(exc)
    if errors:
        raise FieldErrors(errors)
    base = dataclasses.replace(run_services.as_config(config, user=user, project=project, queue=queue),
                               seed=0)  # the seed is the sweep's own axis
    points = validate_grid(grid or {}, base, n_seeds=len(seeds), queue=queue)
    why_budget = budget_error(budget, initial_runs=len(points) * len(seeds),
                              new_seeds=free_slot_use == FreeSlotUse.NEW_SEED,
                              extends=free_slot_use == FreeSlotUse.EXTEND)
    if why_budget:
        raise FieldErrors({"budget": why_budget})
    pack = resolve_pack(pack, cfg=base, queue=run_services.queue_named(queue, base), concurrency=concurrency)
    policy_config = policy_config_for(policy, total_steps=base.total_steps, free_slot_use=free_slot_use,
                                      extend_steps=extend_steps)
    n_runs = len(points) * len(seeds)
    why_one = one_run_error(policy_config, n_runs) if free_slot_use != FreeSlotUse.NEW_SEED else None
    if why_one:  # (freed slots going to new seeds give it others to compare with)
        raise FieldErrors({"seeds": why_one})
    sweep = Sweep.objects.create(name=name or f"{base.preset} x {n_runs} runs", project=project,
                                 config=base.to_dict(), seeds=seeds, concurrency=concurrency, policy=policy_config,
                                 created_by=user, copied_from=copied_from, pack=pack)
    audit(project=project, user=user, action="sweep.launch", target_type="sweep", target_id=sweep.pk,
          runs=n_runs, policy=policy_config.get("name", "manual") if policy_config else "manual",
          **({"copied_from": copied_from.pk} if copied_from is not None else {}))
    SweepPlan.objects.create(sweep=sweep, grid=grid or {}, free_slot_use=free_slot_use, extend_steps=extend_steps,
                             budget=budget, alert_bounds=alert_bounds or {})
    for seed in seeds:
        for point, point_config in points:
            knobs = "".join(f" {k}={v}" for k, v in point.items())
            run_services.run_create(config=dataclasses.replace(point_config, seed=seed), user=user, sweep=sweep,
                                    name=f"{sweep.name} / seed {seed}{knobs}", parent_run=parent_run,
                                    parent_step=parent_step, queue=queue)
    sweep_fill_slots(sweep_id=sweep.pk)
    if policy_config.get("name"):
        from workers.port import send_on_commit

        # a policy that compares runs but never has enough of them at once watches every run to its end: said on
        # the sweep's page and in the API once the maintenance worker's first check has replayed it
        # (sweep_apply_policy: sweep_update_policy_note)
        send_on_commit("workers.tasks.sweep_check", args=[sweep.pk], queue="maintenance")
    return sweep


def slots_free(*, queue: str, concurrency: int, sweep_id: Optional[int] = None) -> tuple[int, str]:
    """How many of a sweep's runs can train at once now, and why it is fewer than ``concurrency`` ("" when it is
    not): the slots of the queue's workers (their capacity reports, ``webapp.runs.capacity``, added up) less
    those that runs of other sweeps or no sweep hold (running, or sent to the broker), at most ``concurrency``
    and at least 1. With no worker reporting for the queue, ``concurrency``: nothing says otherwise."""
    cutoff = timezone.now() - timedelta(seconds=FRESH_FOR_S)
    total = sum(w.slots for w in WorkerCapacity.objects.filter(updated_at__gte=cutoff) if queue in w.queues)
    if not total:
        return concurrency, ""
    holding = Run.objects.filter(Q(status=RunStatus.RUNNING) | Q(status=RunStatus.QUEUED, enqueued_at__isnull=False),
                                 queue=queue)
    others = holding.exclude(sweep_id=sweep_id).count() if sweep_id is not None else holding.count()
    free = max(1, min(concurrency, total - others))
    if free >= concurrency:
        return concurrency, ""
    return free, (f"only {free} of its {concurrency} slots {'is' if free == 1 else 'are'} free: the workers of queue "
                  f"{queue} have {total}, and {others} other run{'s hold' if others != 1 else ' holds'} "
                  f"{min(others, total)}")


def policy_note(policy_config: dict, *, n_runs: int, concurrency: int, queue: str,
                sweep_id: Optional[int] = None) -> Optional[str]:
    """The "this policy can never act" note (``policies.feasibility``) for the slots free now (``slots_free``); None
    when it can act, or is manual. Its replay counts the peers that ended (finished or stopped) as the policy does."""
    if not policy_config.get("name"):
        return None
    slots, why = slots_free(queue=queue, concurrency=concurrency, sweep_id=sweep_id)
    note = policy_cannot_act_cached(policy_config, n_runs, slots)
    return f"{note}; {why}" if note and why else note


def sweep_update_policy_note(*, sweep_id: int) -> None:
    """The feasibility note (``policy_note``) for the slots free now, stored in the plan's warnings (the note
    replaced, any other warning kept); the sweep's page and the API show it once it is there. Its replays run in
    the maintenance worker (the ``workers.tasks.sweep_check`` task sent once the launch commits, then each check),
    never in a request and never under the sweep's lock."""
    sweep = Sweep.objects.filter(pk=sweep_id).first()
    runs = list(sweep.runs.values_list("queue", flat=True)) if sweep is not None else []
    if not runs:
        return
    note = policy_note(sweep.policy, n_runs=len(runs), concurrency=sweep.concurrency, queue=runs[0],
                       sweep_id=sweep.pk)
    plan = plan_of(sweep)
    warnings = [w for w in plan.warnings if NOTE_MARK not in w] + ([note] if note else [])
    if warnings != plan.warnings:
        SweepPlan.objects.filter(pk=plan.pk).update(warnings=warnings)


def plan_of(sweep: Sweep) -> SweepPlan:
    """The sweep's plan (created with the sweep; a sweep from before plans existed gets the default)."""
    plan, _ = SweepPlan.objects.get_or_create(sweep=sweep)
    return plan


# --- slots --------------------------------------------------------------------------------------------------

@transaction.atomic
def sweep_fill_slots(*, sweep_id: int, freed_run: Optional[Run] = None) -> list[int]:
    """Enqueue the sweep's next queued runs while fewer than ``concurrency`` hold a slot; returns their ids.

    A run holds a slot when it is running, or queued and already sent to the broker. When ``freed_run`` ended
    and no queued run takes the slot, a sweep whose freed slots start new seeds starts them while its budget can
    pay for each to its end (``policies.budget.may_start_seed``).
    """
    sweep = Sweep.objects.select_for_update().get(pk=sweep_id)
    holding = sweep.runs.filter(Q(status=RunStatus.RUNNING) |
                                Q(status=RunStatus.QUEUED, enqueued_at__isnull=False)).count()
    free = sweep.concurrency - holding
    if free <= 0:
        return []
    if sweep.is_stopped:  # stopped: nothing of it starts again (halting.sweep_stop)
        return []
    waiting = list(sweep.runs.filter(status=RunStatus.QUEUED, enqueued_at__isnull=True).order_by("pk")[:free])
    if freed_run is not None and freed_run.is_ended and len(waiting) < free:
        # a run ended and left a slot no queued seed takes: new seeds while the budget can pay for them, and while
        # new seeds do not keep failing before their first step (halting.new_seed_refusal)
        plan = SweepPlan.objects.filter(sweep=sweep).first()
        while (plan is not None and plan.free_slot_use == FreeSlotUse.NEW_SEED and len(waiting) < free
               and not halting.new_seed_refusal(sweep, plan) and budget_use(sweep, plan).may_start_seed):
            fresh = _start_new_seed(sweep, plan, like=freed_run)
            if fresh is None:
                break
            waiting.append(fresh)
    for run in waiting:
        run_services.run_dispatch(run=run)
    return [r.pk for r in waiting]


def on_slots_changed(sender, *, run: Run, **_) -> None:
    """runs.signals.slots_changed (connected in apps.py): a run of a sweep ended or went back to the queue."""
    if run.sweep_id is not None:
        sweep_fill_slots(sweep_id=run.sweep_id, freed_run=run)


def _start_new_seed(sweep: Sweep, plan: SweepPlan, *, like: Run) -> Optional[Run]:
    """Queue a new seed of ``like``'s grid point, its number one past every seed the sweep ever had (never one
    used before), for the sweep's full ``total_steps``; counted in the plan. None when its config is refused now
    (e.g. its data file is gone): the plan's new seeds are halted with the field error, and the run whose end
    freed the slot still ends (this runs inside its end's transaction)."""
    seed = max(sweep.runs.values_list("seed", flat=True), default=-1) + 1
    config = {**like.config, "seed": seed, "total_steps": sweep.config["total_steps"]}
    try:
        with transaction.atomic():
            fresh = run_services.run_create(config=config, sweep=sweep, user=sweep.created_by, queue=like.queue,
                                            name=f"{sweep.name} / seed {seed} (fresh)")
    except FieldErrors as exc:
        plan.new_seeds_halted = f"a new seed's config was refused: {exc}"[:2000]
        SweepPlan.objects.filter(pk=plan.pk).update(new_seeds_halted=plan.new_seeds_halted)
        log.warning("sweep %s: %s", sweep.pk, plan.new_seeds_halted)
        return None
    SweepPlan.objects.filter(pk=plan.pk).update(new_seeds_started=F("new_seeds_started") + 1)
    plan.new_seeds_started += 1
    sweep.seeds = [*sweep.seeds, seed]
    Sweep.objects.filter(pk=sweep.pk).update(seeds=sweep.seeds)
    return fresh


# --- applying the policy ------------------------------------------------------------------------------------

def sweep_apply_policy(*, sweep_id: int) -> list[PolicyDecision]:
    """Apply ``make_policy(sweep.policy)`` to the sweep's stored curves (``policy_check``: a replay from scratch),
    store each new decision and apply it: a stop kills the run (killed_by
    "policy:<rule>", the decision's reason) and its slot is redirected; an extension raises a running survivor's
    ``total_steps``. Returns the decisions stored by this call.

    Runs that ended otherwise (succeeded, failed, killed by a user) are ``mark_stopped``: never judged again,
    their curves still count as peers. Manual sweeps do nothing.

    The policy is computed outside any transaction (reading a big sweep's curves takes a while, and on SQLite a
    write transaction blocks every other writer); the decisions are then stored and applied under a lock on the
    sweep row, against the decisions and run states read again under that lock. The whole check's duration is
    stored (``SweepPlan.policy_check_s``: ``claim_policy_check`` paces the next check by it) and the feasibility
    note is brought up to date, both outside the lock.
    """
    sweep = Sweep.objects.get(pk=sweep_id)
    if not make_policy(sweep.policy).reads_curves:  # manual: nothing to read, nothing to decide
        return []
    started = time.monotonic()
    check = policy_check(sweep=sweep, plan=plan_of(sweep))
    SweepPlan.objects.filter(sweep=sweep).update(policy_held={str(run_id): why for run_id, why in check.held.items()})
    sweep_update_policy_note(sweep_id=sweep_id)
    new = _store_decisions(sweep_id, check)
    SweepPlan.objects.filter(sweep_id=sweep_id).update(policy_check_s=time.monotonic() - started)
    return new


def _store_decisions(sweep_id: int, check) -> list[PolicyDecision]:
    """The check's new decisions stored and applied under the sweep's row lock (``sweep_apply_policy``)."""
    with transaction.atomic():
        sweep = Sweep.objects.select_for_update().get(pk=sweep_id)
        runs = {run.pk: run for run in sweep.runs.all()}
        stored = {(d.run_id, d.action): d for d in sweep.decisions.all()}
        new = []
        for decision in check.decisions:
            if (decision.run_id, decision.action) in stored or decision.run_id not in runs:
                continue  # decided before (the replay re-derives its earlier stops), or by another process
            if decision.action == EXTEND and not _extension_paid(stored):
                continue  # proposed for a re-derived stop whose freed slot was already used
            row = _apply(sweep, runs[decision.run_id], decision, stored)
            stored[(row.run_id, row.action)] = row
            new.append(row)
    return new


def _record(sweep: Sweep, decision: Decision, outcome: str, note: str) -> PolicyDecision:
    fields = {k: v for k, v in decision.to_dict().items() if k != "run_id"}
    return PolicyDecision.objects.create(sweep=sweep, run_id=decision.run_id, outcome=outcome, note=note, **fields)


def _apply(sweep: Sweep, run: Run, decision: Decision, stored: dict) -> PolicyDecision:
    if decision.action == STOP:
        if run.status != RunStatus.RUNNING or run.kill_requested_at is not None:
            return _record(sweep, decision, PolicyDecision.Outcome.SKIPPED,
                           f"run was already {run.status}{' and being killed' if run.kill_requested_at else ''}")
        run_services.run_kill(run_id=run.pk, killed_by=f"policy:{decision.rule}",  # (the reason says the rule again)
                              reason=decision.reason.removeprefix(f"{decision.rule}: "), decided_at_step=decision.step)
        note = use_freed_slot(sweep=sweep, freed_run=run)
        log.info("sweep %s: policy stopped run %s at step %s (%s)", sweep.pk, run.pk, decision.step, decision.reason)
        return _record(sweep, decision, PolicyDecision.Outcome.APPLIED, note)
    return _apply_extension(sweep, run, decision, stored)


def _extension_paid(stored: dict) -> bool:
    """Each applied stop pays for one extension decision (applied, or skipped because a seed took the slot)."""
    applied_stops = sum(1 for (_, a), d in stored.items() if a == STOP and d.outcome == PolicyDecision.Outcome.APPLIED)
    return sum(1 for (_, a) in stored if a == EXTEND) < applied_stops


def _apply_extension(sweep: Sweep, run: Run, decision: Decision, stored: dict) -> PolicyDecision:
    """Extend a survivor only when the stop that paid for it left no queued seed to take its slot."""
    skipped = PolicyDecision.Outcome.SKIPPED
    if plan_of(sweep).free_slot_use != FreeSlotUse.EXTEND:
        return _record(sweep, decision, skipped, "this sweep does not extend survivors")
    if sweep.runs.filter(status=RunStatus.QUEUED).exclude(pk=run.pk).exists():
        return _record(sweep, decision, skipped, "a queued seed took the freed slot")
    use = budget_use(sweep, plan_of(sweep))
    if use is not None and not may_extend(use, decision.extra_steps):
        return _record(sweep, decision, skipped, f"the budget cannot pay for {decision.extra_steps} more steps "
                                                 f"({use.summary()})")
    locked = Run.objects.select_for_update().get(pk=run.pk)
    if locked.status != RunStatus.RUNNING or locked.kill_requested_at is not None:
        return _record(sweep, decision, skipped, f"run was already {locked.status}")
    new_total = locked.total_steps + decision.extra_steps
    # The running loop read its total_steps at start; when it finishes the old total, runs.services.run_finish
    # sees last_step < total_steps and queues it again: it resumes from its final checkpoint up to new_total.
    locked.config = {**locked.config, "total_steps": new_total}
    locked.save(update_fields=["config"])
    return _record(sweep, decision, PolicyDecision.Outcome.APPLIED, f"total_steps raised to {new_total}")


def use_freed_slot(*, sweep: Sweep, freed_run: Run) -> str:
    """A run of ``sweep`` is being stopped: say where its slot goes, starting a fresh seed when the sweep is
    set to and has no queued seed left. (The queued seed itself is dispatched by ``sweep_fill_slots`` when the
    stopped run ends, which frees its slot.)"""
    waiting = sweep.runs.filter(status=RunStatus.QUEUED, enqueued_at__isnull=True).order_by("pk").first()
    if waiting is not None:
        return f"slot goes to the next queued seed: run {waiting.pk} (seed {waiting.seed})"
    plan = SweepPlan.objects.select_for_update().filter(sweep=sweep).first()
    if plan is None or plan.free_slot_use == FreeSlotUse.NOTHING:
        return "no queued seed left; the slot is released"
    if plan.free_slot_use == FreeSlotUse.EXTEND:
        return "no queued seed left; the slot extends a survivor"
    refused = halting.new_seed_refusal(sweep, plan)
    if refused:
        return f"no queued seed left and no new seed starts ({refused}); slot released"
    use = budget_use(sweep, plan)
    if use is None or not use.may_start_seed:
        why = use.summary() if use else "no budget"
        return f"no queued seed left and the budget cannot pay for a new seed to its end ({why}); slot released"
    fresh = _start_new_seed(sweep, plan, like=freed_run)
    if fresh is None:
        return f"no queued seed left and no new seed starts ({plan.new_seeds_halted}); slot released"
    return f"no queued seed left; started fresh seed {fresh.seed} (run {fresh.pk}; {budget_use(sweep, plan).summary()})"


@transaction.atomic
def sweep_kill_runs(*, sweep_id: int, run_ids: list[int], user=None, killed_by: str = "",
                    reason: str = "") -> tuple[list[int], dict]:
    """Kill several runs of one sweep (the dashboard's multi-select) for ``user`` (a member of its project).
    Returns (killed ids, {id: why not}); FieldErrors for a reason a user gave with a control character."""
    sweep = Sweep.objects.select_for_update().get(pk=sweep_id)
    if user is not None:
        require_role(user, sweep.project_id, Role.MEMBER)
        if control_character_error(reason or ""):
            raise FieldErrors({"reason": control_character_error(reason)})
    killed, refused = [], {}
    for run in Run.objects.filter(sweep=sweep, pk__in=run_ids).order_by("pk"):
        try:
            run_services.run_kill(run_id=run.pk, user=user, killed_by=killed_by, reason=reason)
        except run_services.TransitionError as exc:
            refused[run.pk] = str(exc)
            continue
        use_freed_slot(sweep=sweep, freed_run=run)
        killed.append(run.pk)
    for run_id in set(run_ids) - set(killed) - set(refused):
        refused[run_id] = f"run {run_id} is not part of sweep {sweep_id}"
    return killed, refused


# --- alerts -------------------------------------------------------------------------------------------------

ALERT_HISTORY = 200  # points per metric read back for the alert checks (they look at the recent curve)


def sweep_check_alerts(*, sweep_id: int) -> list[Alert]:
    """Check the sweep's running runs for RL-health symptoms (webapp.sweeps.alerts) and for a stall
    (webapp.runs.stall: no step for far longer than its steps take, whatever the cause); store new alerts once
    per run and kind. Returns the alerts stored by this call."""
    sweep = Sweep.objects.get(pk=sweep_id)
    plan = SweepPlan.objects.filter(sweep=sweep).first()
    bounds = alert_rules.AlertBounds.from_overrides(plan.alert_bounds if plan else None)
    live = list(sweep.runs.filter(status=RunStatus.RUNNING))
    raised = set(Alert.objects.filter(sweep=sweep).values_list("run_id", "kind"))
    new = []
    for run in live:
        curves: dict[str, list] = {}
        for key, step, value in (MetricPoint.objects.filter(run_id=run.pk, key__in=alert_rules.ALERT_METRICS,
                                                            step__gt=run.last_step - ALERT_HISTORY,
                                                            value__isnull=False)
                                 .order_by("key", "step").values_list("key", "step", "value")):
            curves.setdefault(key, []).append((step, value))
        findings = [*alert_rules.check_run(curves, bounds), *_stall_findings(run)]
        for finding in findings:
            if (run.pk, finding.kind) in raised:
                continue
            try:
                with transaction.atomic():
                    alert = Alert.objects.create(sweep=sweep, run_id=run.pk, kind=finding.kind, metric=finding.metric,
                                                 step=finding.step, value=finding.value, bound=finding.bound,
                                                 message=finding.message)
            except IntegrityError:
                continue  # raised by another process meanwhile
            raised.add((run.pk, finding.kind))
            new.append(alert)
    return new


def _stall_findings(run: Run) -> list[alert_rules.AlertFinding]:
    """A "stalled" finding for a run whose step has not advanced past the stall threshold (value: the seconds
    without a step; bound: the threshold), else none."""
    from webapp.runs.stall import stall_threshold_s

    idle = run.stalled_for_s
    if idle is None:
        return []
    limit = stall_threshold_s(run.median_step_s, factor=settings.SEEDBED_STALL_FACTOR,
                              floor_s=settings.SEEDBED_STALL_FLOOR_S)
    return [alert_rules.AlertFinding(AlertKind.STALLED, "step", run.last_step, idle, limit, run.stall_note)]


# --- checks: the policy and the alerts, after metrics arrive -----------------------------------------------

CHECK_EVERY_S = 1.0


def sweep_check(*, sweep_id: int, claim: bool = False) -> list[int]:
    """Apply the sweep's policy and check its RL-health alerts; returns the ids of the runs it stopped.
    Run by the ``workers.tasks.sweep_check`` task (requested after a metrics flush, which claimed the check) and by
    the beat (``claim``: the policy only when ``claim_policy_check`` says it is due; the alerts every pass)."""
    due = not claim or claim_policy_check(sweep_id=sweep_id)
    decisions = sweep_apply_policy(sweep_id=sweep_id) if due else []
    sweep_check_alerts(sweep_id=sweep_id)
    return [d.run_id for d in decisions if d.action == STOP and d.outcome == PolicyDecision.Outcome.APPLIED]


def claim_policy_check(*, sweep_id: int, min_interval_s: float = CHECK_EVERY_S, now=None) -> bool:
    """True for the one caller, across every process, that may check the sweep now: at most one check per
    ``min_interval_s`` per sweep however many runs flush their metrics, and none sooner than ``PACE`` times the
    last replay's duration after the last (``SweepPlan.policy_check_s``): a check of d seconds every PACE·d
    seconds is d / (PACE·d) = 1/PACE of a core (a conditional UPDATE is the claim)."""
    now = now or timezone.now()
    if not Sweep.objects.filter(pk=sweep_id).exists():
        return False
    plan, _ = SweepPlan.objects.get_or_create(sweep_id=sweep_id)
    interval = max(min_interval_s, PACE * plan.policy_check_s)
    due = Q(policy_checked_at__isnull=True) | Q(policy_checked_at__lte=now - timedelta(seconds=interval))
    return SweepPlan.objects.filter(due, sweep_id=sweep_id).update(policy_checked_at=now) == 1


def sweep_request_check(*, run_id: int, min_interval_s: float = CHECK_EVERY_S, now=None) -> bool:
    """A run stored new metrics: send its sweep a check (the ``workers.tasks.sweep_check`` task on the
    maintenance queue), at most one per ``min_interval_s`` per sweep. Returns whether one was sent. The
    training process only asks: the policy (which may stop other runs) runs in the maintenance worker."""
    # read each time (one indexed lookup per flush): a cache keyed by run id would go stale if ids are reused
    sweep_id = Run.objects.filter(pk=run_id).values_list("sweep_id", flat=True).first()
    if sweep_id is None or not claim_policy_check(sweep_id=sweep_id, min_interval_s=min_interval_s, now=now):
        return False

    from workers.port import send_on_commit

    # (a check the broker cannot take now is made by the maintenance pass every few seconds anyway)
    send_on_commit("workers.tasks.sweep_check", args=[sweep_id], queue="maintenance")
    return True
