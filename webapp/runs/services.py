"""Every write to runs (HackSoft style): keyword-only, atomic, status checked before it changes.

Tasks are enqueued with ``transaction.on_commit`` and carry ids only; the worker re-reads the row. A run that
belongs to a sweep is sent to a worker by its sweep (webapp.sweeps.services.sweep_fill_slots), which hears of
freed slots through ``signals.slots_changed``.
"""
from __future__ import annotations

import bisect
import json
import logging
import math
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from training.config import TrainConfig
from training.fields import FieldErrors
from webapp.projects.models import Role
from webapp.projects.services import audit, project_for_launch, require_role

from . import rollups
from .capacity import check_caps
from .selectors import config_path_error
from .models import (ENDED_STATUSES, LEGAL_TRANSITIONS, RESUMABLE_STATUSES, Checkpoint, MetricPoint, Run, RunNode,
                     RunStatus, Sample)
from .signals import slots_changed

log = logging.getLogger("seedbed.runs")


class TransitionError(Exception):
    """A service was asked for a status change the run's current status does not allow."""


def _move(run: Run, new_status: str) -> None:
    """Change ``run.status`` in memory after checking the transition is legal (caller saves)."""
    if new_status not in LEGAL_TRANSITIONS[run.status]:
        raise TransitionError(f"run {run.pk} is {run.status}; it cannot become {new_status}")
    run.status = new_status


def _locked(run_id: int) -> Run:
    return Run.objects.select_for_update().get(pk=run_id)


def parse_config(data: dict, *, user=None, project=None, dry_run: bool = True) -> TrainConfig:
    """A request's config, validated by the one schema (training.config), its paths inside the allowed folders
    (settings.SEEDBED_DATA_ROOTS) and, for ``user``, inside what they may read (another project's checkpoints
    and library models are not found); ``task: dataset:<name>`` takes the entry's file, mapping and split (the
    run's ``project``'s entry first); with ``dry_run``, a dataset's first reference answer must be rewarded by
    the run's verifiers (training.reward_dry_run). Raises FieldErrors with per-field messages."""
    from webapp.datasets.selectors import resolve_dataset_config

    data = resolve_dataset_config(data, user=user, project=project)
    errors = {}
    if isinstance(data, dict):
        for name in ("model_path", "data_path"):
            value = data.get(name)
            problem = config_path_error(user=user, path=value) if isinstance(value, str) else ""
            if problem:
                errors[name] = problem
    if errors:
        raise FieldErrors(errors)
    cfg = TrainConfig.from_dict(data, check_paths=True, roots=settings.SEEDBED_DATA_ROOTS, dry_run=dry_run)
    check_caps(cfg, queue=queue_for(cfg))  # no more than the workers of its queue have (webapp.runs.capacity)
    return cfg


def as_config(config: TrainConfig | dict, *, user=None, project=None, dry_run: bool = True) -> TrainConfig:
    """A config as the one schema (training.config) has it: a TrainConfig passes as it is (a request parsed it
    once, in its form, for its user), a mapping is parsed and validated (``parse_config``)."""
    return config if isinstance(config, TrainConfig) else parse_config(config, user=user, project=project,
                                                                       dry_run=dry_run)


def queue_for(cfg: TrainConfig) -> str:
    """Slot kind a run needs: cuda -> gpu, cpu -> cpu, auto -> the deployment's choice."""
    if cfg.device == "cuda" or cfg.rollout_engine == "vllm":
        return "gpu"
    if cfg.device == "cpu":
        return "cpu"
    return settings.SEEDBED_AUTO_QUEUE


# --- creating and dispatching -----------------------------------------------------------------------------

@transaction.atomic
def run_create(*, config: TrainConfig | dict, user=None, project=None, name: str = "", sweep=None,
               parent_run: Run | None = None, parent_step: int | None = None, copied_from: Run | None = None) -> Run:
    """Validate ``config`` and create a queued run in ``project`` (default: the user's personal project; a
    sweep's run: the sweep's, checked when the sweep was made); a run outside a sweep is enqueued at once (on
    commit), a sweep's run when its sweep gives it a slot. ``user`` must be a member of the project and able to
    read ``parent_run`` and ``copied_from`` (the run whose config the form was filled with: its lineage,
    docs/architecture.md "A run's life")."""
    if sweep is not None:
        project = sweep.project
    else:
        project = project_for_launch(user=user, project=project)
        if parent_run is not None and user is not None:
            require_role(user, parent_run.project_id, Role.VIEWER)
        if copied_from is not None and user is not None:
            require_role(user, copied_from.project_id, Role.VIEWER)
    # a sweep's runs: checked (and their rewards dry-run) with the sweep
    cfg = as_config(config, user=user if sweep is None else None, project=project, dry_run=sweep is None)
    run = Run.objects.create(name=name, project=project, sweep=sweep, config=cfg.to_dict(), seed=cfg.seed,
                             queue=queue_for(cfg), created_by=user, parent_run=parent_run, parent_step=parent_step,
                             copied_from=copied_from)
    if sweep is None:
        audit(project=project, user=user, action="run.launch", target_type="run", target_id=run.pk,
              **({"from_run": parent_run.pk, "from_step": parent_step} if parent_run is not None else {}),
              **({"copied_from": copied_from.pk} if copied_from is not None else {}))
        run_dispatch(run=run)
    return run


WAITING_FOR_QUEUE = "waiting for the queue"


def run_dispatch(*, run: Run) -> None:
    """Mark the run as to be sent and send its task once the transaction commits (ids only). When the broker
    cannot take it, the run stays queued with a "waiting for the queue" note and the reconciler
    (``runs_redispatch``) sends it again: the request that made it never fails for that."""
    run.enqueued_at, run.dispatched_at, run.dispatch_note, run.retry_at = timezone.now(), None, "", None
    run.save(update_fields=["enqueued_at", "dispatched_at", "dispatch_note", "retry_at"])
    _send_run(run.pk, run.queue)


def _send_run(run_id: int, queue: str) -> None:
    import uuid

    from workers.dispatch import send_on_commit

    dispatch = uuid.uuid4().hex
    Run.objects.filter(pk=run_id).update(dispatch_id=dispatch)

    def sent() -> None:
        Run.objects.filter(pk=run_id, dispatched_at__isnull=True).update(dispatched_at=timezone.now(),
                                                                         dispatch_note="", retry_at=None)

    def failed(reason: str) -> None:
        Run.objects.filter(pk=run_id, status=RunStatus.QUEUED, dispatched_at__isnull=True).update(
            dispatch_note=f"{WAITING_FOR_QUEUE}: the broker did not take the run ({reason[:300]}); it is sent "
                          "again once the broker answers")

    nnodes = run_nnodes(Run.objects.only("config").get(pk=run_id))
    if nnodes == 1:
        send_on_commit("workers.tasks.train_run", args=[run_id], kwargs={"dispatch": dispatch}, queue=queue, sent=sent,
                       failed=failed)
        return
    for node_rank in range(nnodes):  # a gang: one node task per node (workers.tasks.train_run), started together
        send_on_commit("workers.tasks.train_run", args=[run_id], kwargs={"dispatch": dispatch, "node_rank": node_rank},
                       queue=queue, sent=sent, failed=failed)


def runs_redispatch(*, older_than_s: float = 5.0) -> list[int]:
    """The reconciler's pass (maintenance, every few seconds; safe in several processes at once): queued runs
    whose task the broker never took are sent again. A duplicate delivery is harmless: the task claims the
    run (``run_start``) and a second copy finds it held and does nothing. A launch whose message the broker
    holds but whose dispatch was never recorded (the web process died between the send and ``sent()``) is
    stamped, not sent twice; a run a worker started (or a kill reached) since it was listed is left alone."""
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    pending = list(Run.objects.filter(status=RunStatus.QUEUED, enqueued_at__lt=cutoff, dispatched_at__isnull=True,
                                      kill_requested_at__isnull=True)
                   .filter(Q(retry_at__isnull=True) | Q(retry_at__lte=timezone.now())).values_list("pk", "queue"))
    pending = _unless_sent_unrecorded(pending)
    pending += _runs_whose_message_was_lost(exclude={pk for pk, _ in pending})
    sent_again = []
    for run_id, queue in pending:
        with transaction.atomic():
            if not Run.objects.select_for_update().filter(pk=run_id, status=RunStatus.QUEUED,
                                                          kill_requested_at__isnull=True).exists():
                continue  # started, killed or ended since it was listed: nothing to send
            Run.objects.filter(pk=run_id).update(dispatched_at=None)
            _send_run(run_id, queue)
            sent_again.append((run_id, queue))
    pending = sent_again
    if pending:
        log.info("runs sent again (the broker had not taken them, or lost them): %s", [pk for pk, _ in pending])
    return [pk for pk, _ in pending]


def _unless_sent_unrecorded(pending: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """``pending`` (never-stamped queued runs) less the fresh launches whose message the broker holds: their
    send succeeded but its ``sent()`` never ran (the web process died in between). Those are stamped sent, so
    no second copy goes out. Only single-node runs never started nor restarted (a restart's old message may
    linger unacknowledged; a gang needs every node's message), and only when the broker can be read."""
    fresh = {pk for pk, config in Run.objects.filter(pk__in=[pk for pk, _ in pending], attempts=0, restarts=0,
                                                     retry_at__isnull=True).values_list("pk", "config")
             if int((config or {}).get("nnodes", 1) or 1) == 1}
    if not fresh:
        return pending
    from workers.dispatch import task_ids_in_broker

    held = task_ids_in_broker("workers.tasks.train_run", sorted({queue for pk, queue in pending if pk in fresh}))
    if not held:
        return pending
    stamped = fresh & held
    Run.objects.filter(pk__in=stamped, dispatched_at__isnull=True).update(dispatched_at=timezone.now(),
                                                                          dispatch_note="", retry_at=None)
    if stamped:
        log.info("runs whose message the broker holds, their dispatch unrecorded: stamped %s", sorted(stamped))
    return [(pk, queue) for pk, queue in pending if pk not in stamped]


def _runs_whose_message_was_lost(*, exclude: set[int]) -> list[tuple[int, str]]:
    """Queued runs the broker took a while ago but no longer holds (its data was lost: a Redis restarted without
    its append-only file, or flushed): sent again. Asked only when such runs exist, and never concluded from a
    broker that cannot be read."""
    cutoff = timezone.now() - timedelta(seconds=settings.SEEDBED_QUEUE_CHECK_S)
    taken = list(Run.objects.filter(status=RunStatus.QUEUED, dispatched_at__lt=cutoff,
                                    kill_requested_at__isnull=True).exclude(pk__in=exclude).values_list("pk", "queue"))
    if not taken:
        return []
    from workers.dispatch import task_ids_in_broker

    held = task_ids_in_broker("workers.tasks.train_run", sorted({queue for _, queue in taken}))
    if held is None:
        return []
    lost = [(pk, queue) for pk, queue in taken if pk not in held]
    for pk, _ in lost:
        Run.objects.filter(pk=pk).update(dispatch_note=f"{WAITING_FOR_QUEUE}: the broker lost the run's message; "
                                                       "sent again")
    return lost


def _after_end(run: Run) -> None:
    """A run ended: the group it belongs to (its sweep) hands its slot on."""
    if run.sweep_id is not None:
        slots_changed.send(sender=Run, run=run)


# --- the worker's side ----------------------------------------------------------------------------------------

@transaction.atomic
def run_start(*, run_id: int, worker: str) -> str:
    """Claim a run for a worker slot. Returns what the task should do: "start", "resume" or "skip".

    - queued -> running: "start" (the loop resumes by itself if a checkpoint exists, e.g. a resumed kill);
    - lost, or running with a heartbeat older than the lost threshold (its worker died and the broker
      re-delivered the task) -> running: "resume";
    - ended, or running with a fresh heartbeat (another slot has it), or queued with a kill request: "skip".
    """
    run = _locked(run_id)
    now = timezone.now()
    stale_before = now - timedelta(seconds=settings.SEEDBED_LOST_AFTER_S)
    if run.status == RunStatus.QUEUED:
        action = "start"
    elif run.status == RunStatus.LOST or (
            run.status == RunStatus.RUNNING and (run.heartbeat_at is None or run.heartbeat_at < stale_before)):
        action = "resume"
    else:
        return "skip"
    if run.kill_requested_at is not None:
        return "skip"
    _move(run, RunStatus.RUNNING)
    run.worker = worker
    run.started_at = run.started_at or now
    run.dispatched_at = run.dispatched_at or now  # its message came: sent, even if the sender never recorded it
    run.heartbeat_at = now
    run.attempts += 1
    run.error = ""
    run.ranks = []  # this attempt's ranks report themselves (it may run on another number of them)
    run.save()
    log.info("run %s: %s on %s (attempt %s)", run.pk, action, worker, run.attempts)
    return action


def run_held_by(*, run_id: int, claim: tuple) -> bool:
    """Whether ``claim`` ((worker, attempt), set when a worker started the run) is still the run's."""
    worker, attempts = claim
    return Run.objects.filter(pk=run_id, worker=worker, attempts=attempts).exists()


@transaction.atomic
def run_heartbeat(*, run_id: int, pid: int | None = None, worker: str | None = None) -> bool:
    """Record that the run's process is alive. Returns False when the run is no longer ``running`` (it was
    declared lost, or ended) or, given ``worker``, no longer held by that worker (taken over elsewhere): the
    worker must then stop it."""
    updates = {"heartbeat_at": timezone.now()}
    if pid is not None:
        updates["pid"] = pid
    held = Run.objects.filter(pk=run_id, status=RunStatus.RUNNING)
    if worker is not None:
        held = held.filter(worker=worker)
    return held.update(**updates) == 1


@transaction.atomic
def run_finish(*, run_id: int, status: str, error: str = "") -> Run:
    """End a running run with ``status`` (succeeded, failed, killed or lost) and hand its slot on."""
    if status not in ENDED_STATUSES:
        raise ValueError(f"{status!r} is not an end status")
    run = _locked(run_id)
    if status == RunStatus.SUCCEEDED and run.status == RunStatus.RUNNING and run.last_step < run.total_steps:
        # Its total_steps was raised while it ran (a sweep policy extending a survivor): the loop finished the
        # total it started with; queue it again to resume from its final checkpoint up to the new total.
        _move(run, RunStatus.QUEUED)
        run.worker, run.pid, run.enqueued_at = "", None, None
        run.save()
        _after_end(run)
        log.info("run %s: extended to %s steps; queued to resume", run.pk, run.total_steps)
        return run
    _move(run, status)
    run.ended_at = timezone.now()
    run.error = error
    if status == RunStatus.KILLED and not run.killed_by:
        run.killed_by, run.kill_reason = "system", run.kill_reason or "stopped"
    run.save()
    _after_end(run)
    log.info("run %s: %s", run.pk, status)
    return run


@transaction.atomic
def run_record_exit(*, run_id: int, outcome: str, forced: bool = False, detail: str = "",
                    worker: str | None = None) -> str:
    """A running run's training process exited: decide how the run ended and record it; returns its status.

    ``outcome`` is what the process reported: "succeeded" (it trained every step), "stopped" (it stopped
    cleanly when asked), "failed" (an error it raised itself; ``detail`` says how) or "signaled" (a signal it
    did not ask for killed it: the out-of-memory killer's SIGKILL, a SIGSEGV; ``detail``'s first line names
    it); ``forced``: its worker terminated it after the kill grace period. A kill request makes it killed,
    whatever the exit; a clean stop nobody asked for is its worker shutting down: back to the queue, to resume
    from its checkpoint; a signal is a lost attempt, restarted from the last checkpoint as when its worker is
    lost (``max_restarts``), and past them the run ends lost naming the signal. A run that is no longer running
    (declared lost meanwhile, or ended elsewhere) is left as it is.
    """
    run = _locked(run_id)
    if run.status != RunStatus.RUNNING or (worker is not None and run.worker != worker):
        return run.status  # ended meanwhile, or another worker holds it now: not this process's to record
    if forced or run.kill_requested_at is not None:
        return run_finish(run_id=run_id, status=RunStatus.KILLED,
                          error="terminated after the kill grace period" if forced else "").status
    if outcome == "succeeded":
        return run_finish(run_id=run_id, status=RunStatus.SUCCEEDED).status
    if outcome == "stopped":
        return run_requeue(run_id=run_id, reason="worker shut down; resumes from its checkpoint").status
    if outcome == "signaled":
        cause, _, tail = detail.partition("\n")
        cause = cause[:300]  # (one line, in the restart's note)
        allowed = int(run.config.get("max_restarts", 0))
        if run.restarts < allowed:
            _restart(run, cause, allowed, lost="")
            return run.status
        gave_up = f"; gave up after {run.restarts} automatic restart(s)" if allowed else ""
        return run_finish(run_id=run_id, status=RunStatus.LOST,
                          error=cause + gave_up + (f"\n{tail}" if tail else "")).status
    return run_finish(run_id=run_id, status=RunStatus.FAILED, error=detail).status


@transaction.atomic
def run_requeue(*, run_id: int, reason: str) -> Run:
    """A running run was stopped cleanly because its worker is shutting down (it saved a checkpoint):
    back to the queue, sent again, so the next worker resumes it."""
    run = _locked(run_id)
    _move(run, RunStatus.QUEUED)
    run.error = reason
    run.worker, run.pid = "", None
    run.save()
    run_dispatch(run=run)
    log.info("run %s: requeued (%s)", run.pk, reason)
    return run


@transaction.atomic
def runs_mark_lost(*, older_than_s: float | None = None) -> list[int]:
    """Mark running runs whose heartbeat is older than ``older_than_s`` (default: settings) as lost."""
    age = settings.SEEDBED_LOST_AFTER_S if older_than_s is None else older_than_s
    cutoff = timezone.now() - timedelta(seconds=age)
    gone = _workers_gone()
    stale = Run.objects.select_for_update().filter(status=RunStatus.RUNNING).filter(
        Q(heartbeat_at__lt=cutoff) | Q(worker__in=gone, heartbeat_at__lt=timezone.now() - timedelta(
            seconds=min(age, 2 * settings.SEEDBED_HEARTBEAT_S))))
    lost = []
    for run in stale:
        why = f"no heartbeat since {run.heartbeat_at.isoformat()} (more than {age:g} s)"
        if run.worker in gone:
            why = f"its worker {run.worker} stopped reporting (dead: no liveness for {_gone_after_s():g} s)"
        allowed = int(run.config.get("max_restarts", 0))
        if run.kill_requested_at is not None:  # the kill was asked for: it ends killed, by whoever asked
            _move(run, RunStatus.KILLED)
            run.ended_at = timezone.now()
            run.error = f"its worker was lost before the kill took effect ({why})"
            run.save()
            _after_end(run)
        elif run.restarts < allowed:
            _restart(run, why, allowed)
        else:
            _move(run, RunStatus.LOST)
            run.ended_at = timezone.now()
            run.error = why + (f"; gave up after {run.restarts} automatic restart(s)" if allowed else "")
            run.save()
            _after_end(run)
        lost.append(run.pk)
    if lost:
        log.warning("runs whose worker was lost (stale heartbeat or dead worker): %s", lost)
        _clean_after_lost(set(lost), gone)
    return lost


def _gone_after_s() -> float:
    from workers.recovery import GONE_AFTER_S

    return GONE_AFTER_S


def _workers_gone() -> set[str]:
    """The workers of running runs known dead (their own liveness stamp expired: workers.recovery), so their runs
    are recovered within seconds rather than after SEEDBED_LOST_AFTER_S; a worker not known is not among them."""
    workers = set(Run.objects.filter(status=RunStatus.RUNNING).exclude(worker="").values_list("worker", flat=True))
    if not workers:
        return set()
    from workers.recovery import workers_gone

    return workers_gone(workers)


def _clean_after_lost(run_ids: set[int], gone: set[str]) -> None:
    """Once the lost runs are recorded: their dead workers' unacknowledged messages leave the broker (the
    reconciler sends each restarted run anew), and the dead workers' liveness stamps are dropped."""
    def clean() -> None:
        from workers.recovery import drop_unacked, forget

        drop_unacked(run_ids)
        if gone:
            forget(gone)

    transaction.on_commit(clean)


def restart_backoff_s(restart: int) -> float:
    """The wait before a lost run's ``restart``-th automatic restart: SEEDBED_RESTART_BACKOFF_S, twice as long
    each next time, never more than SEEDBED_RESTART_BACKOFF_MAX_S (10, 20, 40, 60, 60 ... by default)."""
    base = settings.SEEDBED_RESTART_BACKOFF_S * 2 ** min(max(restart - 1, 0), 30)
    return min(base, max(settings.SEEDBED_RESTART_BACKOFF_MAX_S, settings.SEEDBED_RESTART_BACKOFF_S))


def _restart(run: Run, why: str, allowed: int, lost: str = "worker lost") -> None:
    """Back to the queue after its worker was lost (or its training process killed by a signal: ``lost`` "",
    ``why`` names it), to resume from its last checkpoint after a backoff (the reconciler sends it then); the
    restart is recorded on the run's page (by the reconciler, or by the worker that saw the signal). A sweep's
    run keeps its slot."""
    step = run.checkpoints.order_by("-step").values_list("step", flat=True).first() or 0
    run.restarts += 1
    delay = restart_backoff_s(run.restarts)
    _move(run, RunStatus.QUEUED)
    now = timezone.now()
    actor = "reconciler" if lost else f"worker:{run.worker}"[:200]
    run.worker, run.pid = "", None
    run.enqueued_at, run.dispatched_at, run.retry_at = now, None, now + timedelta(seconds=delay)
    run.dispatch_note = (f"restart {run.restarts} of {allowed} in {delay:g} s, from step {step}: "
                         + (f"{lost} ({why})" if lost else why))
    run.save()
    audit(project=run.project_id, actor=actor, action="run.restart", target_type="run", target_id=run.pk,
          reason=f"{lost}: {why}" if lost else why, from_step=step, restart=run.restarts, of=allowed, after_s=delay)
    log.warning("run %s: %s; restart %s of %s from step %s in %g s", run.pk, f"{lost} ({why})" if lost else why,
                run.restarts, allowed, step, delay)


# --- multi-node runs: a gang of node tasks ---------------------------------------------------------------

def run_nnodes(run: Run) -> int:
    return int(run.config.get("nnodes") or 1)


def _gangs_forming(queue: str, *, before: Run | None = None):
    """Multi-node runs of ``queue`` waiting for their gang to form, oldest first: queued, sent (a sweep's run
    waiting for its sweep's slot, or a restart waiting out its backoff, is not), not being killed."""
    now = timezone.now()
    runs = (Run.objects.filter(status=RunStatus.QUEUED, queue=queue, kill_requested_at__isnull=True,
                               enqueued_at__isnull=False, config__nnodes__gt=1)
            .filter(Q(retry_at__isnull=True) | Q(retry_at__lte=now)).exclude(dispatch_id="")
            .order_by("created_at", "pk"))
    if before is not None:
        runs = runs.filter(Q(created_at__lt=before.created_at) | Q(created_at=before.created_at, pk__lt=before.pk))
    return list(runs.values_list("pk", flat=True))


@transaction.atomic
def run_node_take(*, queue: str, machine: str, worker: str, host: str, port: int | None = None,
                  prefer: tuple[int, int] | None = None, instead_of: tuple[int, int] | None = None):
    """A node task, holding a free worker slot on ``queue``, claims a node of the OLDEST run there whose gang is
    forming and still lacks a node this worker (``machine``) may take (two nodes of a run never share a worker):
    whichever run's message it carried, so a slot always goes to the oldest waiting gang and two half-formed
    gangs cannot hold each other's slots (the messages of a run's nodes are interchangeable: each run sends one
    per node, and a run's message that served another is made up for by that one's). ``prefer``: (run, node
    rank) to take when that run is the one (its own). ``instead_of``: (run, node rank) this slot holds now, given
    up in the same transaction when a run older than it lacks a node (only older ones are looked at then).

    Returns (run id, dispatch, node rank) claimed, or why nothing was: "blocked" (a run lacks a node, but this
    worker holds one of it already: another worker must take it) or "idle" (no run lacks one)."""
    held = Run.objects.filter(pk=instead_of[0]).first() if instead_of else None
    if instead_of and held is None:
        return "idle"
    blocked = False
    stale = timezone.now() - timedelta(seconds=settings.SEEDBED_LOST_AFTER_S)
    for run_id in _gangs_forming(queue, before=held):
        run = _locked(run_id)
        if run.status != RunStatus.QUEUED or run.kill_requested_at is not None or not run.dispatch_id:
            continue
        RunNode.objects.filter(run=run).exclude(dispatch=run.dispatch_id).delete()
        RunNode.objects.filter(run=run, heartbeat_at__lt=stale).delete()
        claims = list(RunNode.objects.filter(run=run).values_list("node_rank", "machine"))
        free = sorted(set(range(run_nnodes(run))) - {rank for rank, _ in claims})
        if not free:
            continue
        if any(other == machine for _, other in claims):
            blocked = True
            continue
        rank = prefer[1] if prefer and prefer[0] == run.pk and prefer[1] in free else free[0]
        if instead_of:
            RunNode.objects.filter(run_id=instead_of[0], node_rank=instead_of[1], worker=worker).delete()
        RunNode.objects.create(run=run, node_rank=rank, dispatch=run.dispatch_id, worker=worker, machine=machine,
                               host=host, port=port if rank == 0 else None, heartbeat_at=timezone.now())
        return run.pk, run.dispatch_id, rank
    return "blocked" if blocked else "idle"


def run_node_gang(*, run_id: int, dispatch: str, node_rank: int, worker: str) -> str:
    """A claiming node's view of its gang (and its heartbeat): "complete" once every node of the run is claimed
    by this dispatch, "waiting" before, "gone" when the run no longer waits for it (killed, ended, dispatched
    again, or its claim was dropped)."""
    held = RunNode.objects.filter(run_id=run_id, node_rank=node_rank, worker=worker, dispatch=dispatch) \
        .update(heartbeat_at=timezone.now())
    run = Run.objects.filter(pk=run_id).only("status", "dispatch_id", "kill_requested_at", "config").first()
    if (not held or run is None or run.dispatch_id != dispatch or run.kill_requested_at is not None
            or run.status not in (RunStatus.QUEUED, RunStatus.RUNNING)):
        return "gone"
    claimed = RunNode.objects.filter(run_id=run_id, dispatch=dispatch).count()
    return "complete" if claimed >= run_nnodes(run) else "waiting"


def run_node_release(*, run_id: int, node_rank: int, worker: str) -> None:
    """A node task gives its claim back (its gang did not form in time, or the run went away)."""
    RunNode.objects.filter(run_id=run_id, node_rank=node_rank, worker=worker).delete()


def run_node_master(*, run_id: int, dispatch: str) -> tuple[str, int] | None:
    """Node 0's rendezvous address of the gang, which every node's torchrun joins."""
    row = RunNode.objects.filter(run_id=run_id, dispatch=dispatch, node_rank=0).values_list("host", "port").first()
    return (row[0], row[1]) if row and row[1] else None


def run_node_heartbeat(*, run_id: int, node_rank: int, worker: str, pid: int | None = None,
                       started: bool = False) -> bool:
    """A node other than 0 is alive (node 0's heartbeat is the run's own). False once the run is no longer
    running or the claim is no longer this worker's: the node must stop."""
    updates = {"heartbeat_at": timezone.now(), **({"pid": pid} if pid is not None else {}),
               **({"started_at": timezone.now()} if started else {})}
    held = RunNode.objects.filter(run_id=run_id, node_rank=node_rank, worker=worker).update(**updates)
    return bool(held) and Run.objects.filter(pk=run_id, status=RunStatus.RUNNING).exists()


def run_node_exit(*, run_id: int, node_rank: int, worker: str, outcome: str, error: str = "") -> None:
    """A node's training process exited; node 0 reads the others' errors when the run fails."""
    RunNode.objects.filter(run_id=run_id, node_rank=node_rank, worker=worker).update(
        ended_at=timezone.now(), outcome=outcome, error=error[:20_000])


def run_node_errors(*, run_id: int, dispatch: str, wait_s: float = 10.0) -> str:
    """What the run's other nodes said when they failed, one line each (waiting up to ``wait_s`` for each node
    to report its exit: a rank failing on node 1 shows on node 0 as a broken connection, the cause is node 1's)."""
    import time

    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        rows = list(RunNode.objects.filter(run_id=run_id, dispatch=dispatch, node_rank__gt=0))
        if all(r.ended_at for r in rows):
            break
        time.sleep(0.25)
    return "".join(f"node {r.node_rank} ({r.machine}): {r.error.strip().splitlines()[-1][:500]}\n"
                   for r in rows if r.error.strip())


# --- users' actions ---------------------------------------------------------------------------------------

TAG_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:/+")
MAX_TAGS, MAX_TAG, MAX_NOTES, MAX_NAME = 20, 40, 10_000, 200


def parse_tags(text: str) -> list[str]:
    """Tags from "baseline, lr-sweep  v2" (commas or spaces), each once, in order; raises FieldErrors naming what
    is wrong.

    >>> parse_tags("baseline, lr-sweep  baseline v2")
    ['baseline', 'lr-sweep', 'v2']
    """
    tags = []
    for tag in text.replace(",", " ").split():
        if len(tag) > MAX_TAG or not set(tag) <= TAG_CHARS:
            raise FieldErrors({"tags": f"a tag is 1 to {MAX_TAG} letters, digits or _-.:/+; got {tag[:50]!r}"})
        if tag not in tags:
            tags.append(tag)
    if len(tags) > MAX_TAGS:
        raise FieldErrors({"tags": f"at most {MAX_TAGS} tags; got {len(tags)}"})
    return tags


@transaction.atomic
def run_annotate(*, run_ids: list[int], user=None, name: str | None = None, notes: str | None = None,
                 tags: list[str] | None = None, add_tags: list[str] | None = None) -> list[Run]:
    """Rename, note or tag runs (``add_tags``: added to each run's own, for a bulk action), for ``user`` (a member
    of each run's project). Every value is checked before anything is written; raises FieldErrors."""
    errors = {}
    if name is not None and len(name) > MAX_NAME:
        errors["name"] = f"at most {MAX_NAME} characters; got {len(name)}"
    if notes is not None and len(notes) > MAX_NOTES:
        errors["notes"] = f"at most {MAX_NOTES} characters; got {len(notes)}"
    if errors:
        raise FieldErrors(errors)
    runs = [_locked(run_id) for run_id in run_ids]
    for run in runs:
        if user is not None:
            require_role(user, run.project_id, Role.MEMBER)
    for run in runs:
        changed = {}
        if name is not None and name.strip() != run.name:
            changed["name"] = run.name = name.strip()
        if notes is not None and notes != run.notes:
            run.notes = notes
            changed["notes"] = f"{len(notes)} characters"
        new_tags = tags if tags is not None else run.tags + [t for t in add_tags or [] if t not in run.tags]
        if new_tags != run.tags:
            if len(new_tags) > MAX_TAGS:
                raise FieldErrors({"tags": f"run {run.pk} would have {len(new_tags)} tags; at most {MAX_TAGS}"})
            changed["tags"] = run.tags = new_tags
        if changed:
            run.save(update_fields=["name", "notes", "tags"])
            audit(project=run.project_id, user=user, action="run.annotate", target_type="run", target_id=run.pk,
                  **changed)
    return runs


@transaction.atomic
def run_archive(*, run_ids: list[int], user=None, archived: bool = True) -> int:
    """Archive runs (hidden from the runs list, kept whole) or bring them back; an archived run must have ended.
    Returns how many changed."""
    changed = 0
    for run_id in run_ids:
        run = _locked(run_id)
        if user is not None:
            require_role(user, run.project_id, Role.MEMBER)
        if archived and not run.is_ended:
            raise TransitionError(f"run {run.pk} is {run.status}; only a run that has ended can be archived")
        if (run.archived_at is not None) != archived:
            run.archived_at = timezone.now() if archived else None
            run.save(update_fields=["archived_at"])
            audit(project=run.project_id, user=user, action="run.archive" if archived else "run.unarchive",
                  target_type="run", target_id=run.pk)
            changed += 1
    return changed

KILLABLE_STATUSES = frozenset({RunStatus.QUEUED, RunStatus.RUNNING})


@transaction.atomic
def run_kill(*, run_id: int, user=None, killed_by: str = "", reason: str = "") -> Run:
    """Kill a queued or running run, for ``user`` (a member of its project) or for the system (``killed_by``
    names it, e.g. "policy:asha"). Running: set the flag the loop reads through should_stop() (status becomes
    killed when it exits, or when the worker terminates it after the grace period). Queued: killed at once.
    Any other run, or one already being killed, is refused with TransitionError and left as it is."""
    run = _locked(run_id)
    if user is not None:
        require_role(user, run.project_id, Role.MEMBER)
        killed_by = killed_by or f"user:{user.get_username()}"
    if run.status not in KILLABLE_STATUSES:
        raise TransitionError(f"run {run.pk} already ended ({run.status}); only a queued or running run can be "
                              "killed")
    if run.kill_requested_at is not None:
        raise TransitionError(f"run {run.pk} is already being killed (requested by {run.killed_by})")
    run.kill_requested_at = timezone.now()
    run.killed_by = killed_by or "system"
    run.kill_reason = reason
    audit(project=run.project_id, user=user, actor=run.killed_by if user is None else "", action="run.kill",
          target_type="run", target_id=run.pk, reason=reason, at_step=run.last_step)
    if run.status == RunStatus.QUEUED:
        _move(run, RunStatus.KILLED)
        run.ended_at = run.kill_requested_at
        run.save()
        _after_end(run)
    else:
        run.save()
    log.info("run %s: kill requested by %s (%s)", run.pk, killed_by, reason or "no reason given")
    return run


@transaction.atomic
def run_resume(*, run_id: int, user=None, nproc_per_node: int | None = None, nnodes: int | None = None) -> Run:
    """Put a killed, lost or failed run back in the queue, for ``user`` (a member of its project); the worker
    resumes it from its last checkpoint. Any other run is refused, loudly (a running one stays running, its
    pending kill stays pending). A seedbed run may resume on another number of ranks (``nproc_per_node``,
    ``nnodes``): its checkpoints load at any world size (training.distributed); one rank trains with strategy
    none, several keep the run's strategy (ddp when it had none)."""
    run = _locked(run_id)
    if user is not None:
        require_role(user, run.project_id, Role.MEMBER)
    if run.status not in RESUMABLE_STATUSES:
        raise TransitionError(f"run {run.pk} is {run.status}; only a killed, lost or failed run can be resumed")
    ranks_before = (run.config.get("nproc_per_node") or 1) * (run.config.get("nnodes") or 1)
    if nproc_per_node is not None or nnodes is not None:
        run.config = _config_on_ranks(run, nproc_per_node, nnodes)
    # how it had ended goes into the run's history (its Activity) before the run's own fields are cleared
    ended = {"was": run.status, "at_step": run.last_step, "killed_by": run.killed_by, "reason": run.kill_reason,
             "error": (run.error.strip().splitlines() or [""])[-1][:200]}
    ranks_now = (run.config.get("nproc_per_node") or 1) * (run.config.get("nnodes") or 1)
    if ranks_now != ranks_before:
        ended["ranks"] = f"{ranks_before} -> {ranks_now}"
    _move(run, RunStatus.QUEUED)
    run.kill_requested_at, run.killed_by, run.kill_reason = None, "", ""
    run.ended_at, run.enqueued_at, run.error = None, None, ""
    run.save()
    audit(project=run.project_id, user=user, action="run.resume", target_type="run", target_id=run.pk,
          **{k: v for k, v in ended.items() if v not in ("", None)})
    if run.sweep_id is None:
        run_dispatch(run=run)
    else:
        slots_changed.send(sender=Run, run=run)
    return run


def _config_on_ranks(run: Run, nproc_per_node: int | None, nnodes: int | None) -> dict:
    """The run's config with its ranks changed, validated by the schema (a bad number is a TransitionError
    naming the field; nothing is changed)."""
    from training.config import TrainConfig
    from training.fields import FieldErrors

    if run.engine != "seedbed":
        raise TransitionError(f"run {run.pk} runs on engine {run.engine}; only a seedbed run resumes on other ranks")
    config = dict(run.config)
    config["nproc_per_node"] = int(nproc_per_node if nproc_per_node is not None else config.get("nproc_per_node") or 1)
    config["nnodes"] = int(nnodes if nnodes is not None else config.get("nnodes") or 1)
    if config["nproc_per_node"] * config["nnodes"] == 1:
        config["strategy"] = "none"
    elif config.get("strategy", "none") == "none":
        config["strategy"] = "ddp"
    try:
        cfg = TrainConfig.from_dict(config, check_paths=False)
        check_caps(cfg, queue=run.queue)
    except FieldErrors as exc:
        raise TransitionError("cannot resume on those ranks: " + "; ".join(f"{k}: {v}" for k, v in exc.errors.items()))
    return config


# --- what the training loop emits (through workers.sink.DatabaseSink) ----------------------------------------

def _finite_or_none(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


METRIC_ROWS_PER_INSERT = 500  # 2,500 parameters a statement: under SQLite's and PostgreSQL's limits


@transaction.atomic
def run_metrics_append(*, run_id: int, points: list[tuple[int, str, float]]) -> int:
    """Bulk-insert (step, key, value) points; a point already stored for (run, key, step) is replaced."""
    if not points:
        return 0
    last = max(step for step, _, _ in points)
    # Plain SQL, many rows per statement (the ORM's objects and per-row round trips cost more than the database
    # itself), then the chart tier, in one transaction: a flush is stored whole or not at all.
    now = timezone.now()
    latest = {(step, key): _finite_or_none(value) for step, key, value in points}  # one row per (key, step)
    stored_last = Run.objects.filter(pk=run_id).values_list("last_step", flat=True).first() or 0
    with connection.cursor() as cursor:
        if min(step for step, _ in latest) > stored_last:
            # steps after every stored one (training appends): a plain INSERT, cheaper than the upsert's
            # speculative insertion on PostgreSQL; should a point be there after all, the upsert does it
            try:
                with transaction.atomic():
                    _insert_points(cursor, run_id, latest, now, upsert=False)
            except IntegrityError:
                _insert_points(cursor, run_id, latest, now, upsert=True)
        else:
            _insert_points(cursor, run_id, latest, now, upsert=True)
        # the charts' tier: the buckets these points fall in, brought up to date in the same transaction
        rollups.add_points(cursor, run_id=run_id, points=latest, logged_at=now)
    Run.objects.filter(pk=run_id, last_step__lt=last).update(last_step=last)
    if stored_last == 0:  # the run's first metrics: when its first step began (wall-time axes start there)
        first = min(step for step, _ in latest)
        took = latest.get((first, "step_time_s")) or 0.0
        Run.objects.filter(pk=run_id, first_step_at__isnull=True).update(
            first_step_at=now - timedelta(seconds=min(max(took, 0.0), 86_400.0)))
    return len(points)


def _insert_points(cursor, run_id: int, points: dict[tuple[int, str], float | None], now, *, upsert: bool) -> None:
    """One statement per flush on PostgreSQL (three arrays: psycopg parses a query of thousands of placeholders
    slower than PostgreSQL inserts the rows), 500-row VALUES on SQLite; ``upsert``: a point already stored for
    (run, key, step) is replaced (a resumed run repeats the steps after its checkpoint; run_discard_after already
    dropped what an interrupted attempt left after it)."""
    table = connection.ops.quote_name(MetricPoint._meta.db_table)
    conflict = (" ON CONFLICT (run_id, key, step) DO UPDATE SET value = excluded.value, logged_at = excluded.logged_at"
                if upsert else "")
    if connection.vendor == "postgresql":
        cursor.execute(
            f"INSERT INTO {table} (run_id, step, key, value, logged_at) SELECT %s, s, k, v, %s "
            f"FROM unnest(%s::integer[], %s::varchar[], %s::double precision[]) AS p(s, k, v)" + conflict,
            [run_id, now, [s for s, _ in points], [k for _, k in points], list(points.values())])
        return
    rows = [(s, k, v) for (s, k), v in points.items()]
    for start in range(0, len(rows), METRIC_ROWS_PER_INSERT):
        chunk = rows[start:start + METRIC_ROWS_PER_INSERT]
        cursor.execute(f"INSERT INTO {table} (run_id, step, key, value, logged_at) VALUES "
                       + ", ".join(["(%s, %s, %s, %s, %s)"] * len(chunk)) + conflict,
                       [x for s, k, v in chunk for x in (run_id, s, k, v, now)])


@transaction.atomic
def run_discard_after(*, run_id: int, step: int) -> None:
    """Forget metrics and samples after ``step`` (a resumed run restarts from its checkpoint at ``step``)."""
    from webapp.sweeps.services import policy_points_discarded  # (a sweep's saved policy state may have fed them)
    policy_points_discarded(run_id=run_id, step=step)
    MetricPoint.objects.filter(run_id=run_id, step__gt=step).delete()
    with connection.cursor() as cursor:
        rollups.discard_after(cursor, run_id=run_id, step=step)
    Sample.objects.filter(run_id=run_id, step__gt=step).delete()
    Run.objects.filter(pk=run_id).update(last_step=step)


@transaction.atomic
def run_samples_append(*, run_id: int, step: int, rows: list[dict]) -> int:
    Sample.objects.filter(run_id=run_id, step=step).delete()
    Sample.objects.bulk_create([
        Sample(run_id=run_id, step=step, index=i, prompt=str(r.get("prompt", "")),
               completion=str(r.get("completion", "")), answer=str(r.get("answer", "") or ""),
               reward=None if r.get("reward") is None else _finite_or_none(r["reward"]),
               details=r.get("details") or {})
        for i, r in enumerate(rows)])
    return len(rows)


MAX_ENGINE_CONFIG_CHARS = 200_000  # as JSON; TRL's GRPOConfig is ~5 kB: shown on the run page, never read back
MAX_ENGINE_VALUE_CHARS = 4_000     # one value beyond this (as JSON) is replaced by a note once the whole is too large


def _plain(value):
    """A JSON value any database stores: non-finite numbers (PostgreSQL's jsonb has none) and anything that is
    not JSON become text."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def bounded_engine_config(config: dict) -> tuple[dict, str]:
    """``config`` as stored, and what was trimmed ("" when nothing): as it is when its JSON fits
    MAX_ENGINE_CONFIG_CHARS; else, key by key in sorted order, each value longer than MAX_ENGINE_VALUE_CHARS
    replaced by a note, and the keys past the budget left out; the note is stored too, under "_trimmed".

    >>> bounded_engine_config({"beta": 0.0, "seed": float("nan")})
    ({'beta': 0.0, 'seed': 'nan'}, '')
    """
    plain = _plain(config)
    size = len(json.dumps(plain))
    if size <= MAX_ENGINE_CONFIG_CHARS:
        return plain, ""
    out, used, shortened, left_out = {}, 2, [], 0
    budget = MAX_ENGINE_CONFIG_CHARS - 1_000  # room for the note
    for key in sorted(plain):
        value = plain[key]
        text = json.dumps(value)
        if len(text) > MAX_ENGINE_VALUE_CHARS:
            value = f"({len(text):,} characters of JSON: not stored)"
            shortened.append(key)
        item = len(json.dumps(key)) + len(json.dumps(value)) + 2
        if used + item > budget:
            left_out += 1
            continue
        out[key], used = value, used + item
    names = ", ".join(shortened[:10]) + (", …" if len(shortened) > 10 else "")
    note = (f"{size:,} characters of JSON, more than {MAX_ENGINE_CONFIG_CHARS:,}: {len(shortened)} long value(s) "
            f"replaced ({names}), {left_out} key(s) left out")[:900]
    out["_trimmed"] = note
    return out, note


@transaction.atomic
def run_engine_config_set(*, run_id: int, config: dict) -> dict:
    """Store the engine's own resolved config, as it reported it when it started (TRL: its GRPOConfig, with
    "engine" and "trl_version"); a resumed run's engine reports it again and replaces it. Bounded
    (``bounded_engine_config``): a larger one is stored trimmed, with a log line. Returns what was stored."""
    if not isinstance(config, dict):
        raise ValueError(f"an engine's config is a mapping; got {type(config).__name__}")
    stored, note = bounded_engine_config(config)
    if note:
        log.warning("run %s: the engine's config is too large to store whole (%s)", run_id, note)
    Run.objects.filter(pk=run_id).update(engine_config=stored)
    return stored


@transaction.atomic
def run_warning_add(*, run_id: int, warning: dict) -> bool:
    """Store a guard's warning on the run (training.guards), once per kind; False when the run had it already."""
    run = _locked(run_id)
    if any(w.get("kind") == warning.get("kind") for w in run.warnings):
        return False
    run.warnings = [*run.warnings, {k: warning.get(k) for k in ("kind", "step", "message", "reason")}]
    run.save(update_fields=["warnings"])
    log.warning("run %s: %s", run_id, warning.get("message"))
    return True


MAX_RANKS_STORED = 1024


def run_ranks_set(*, run_id: int, ranks: list[dict]) -> None:
    """Store a multi-rank run's ranks as they last reported (host, pid, step, time: their heartbeat), at most
    ``MAX_RANKS_STORED``, already bounded field by field by the event contract (training.engines.events)."""
    Run.objects.filter(pk=run_id).update(ranks=list(ranks)[:MAX_RANKS_STORED])


@transaction.atomic
def run_checkpoint_add(*, run_id: int, step: int, path: str) -> Checkpoint:
    ckpt, _ = Checkpoint.objects.update_or_create(run_id=run_id, step=step, defaults={"path": path})
    run_checkpoints_prune(run_id=run_id)
    return ckpt


def _best_checkpoint_steps(run: Run, checkpoints: list[Checkpoint]) -> set[int]:
    """Of ``checkpoints``, the steps of the run's ``keep_best`` best by ``keep_best_metric`` (its value at the last
    logged step at or before the checkpoint's; one with no value ranks last), ties to the later step."""
    count = int(run.config.get("keep_best") or 0)
    if count <= 0 or not checkpoints:
        return set()
    metric = str(run.config.get("keep_best_metric") or "reward/mean")
    sign = -1.0 if metric.startswith("min:") else 1.0
    key = metric[4:] if metric.startswith("min:") else metric
    points = list(MetricPoint.objects.filter(run_id=run.pk, key=key, value__isnull=False,
                                             step__lte=max(c.step for c in checkpoints))
                  .order_by("step").values_list("step", "value"))
    steps = [step for step, _ in points]

    def score(ckpt: Checkpoint) -> tuple[float, int]:
        at = bisect.bisect_right(steps, ckpt.step) - 1
        return (sign * points[at][1] if at >= 0 else -math.inf, ckpt.step)
    return {ckpt.step for ckpt in sorted(checkpoints, key=score, reverse=True)[:count]}


def run_checkpoints_prune(*, run_id: int) -> list[int]:
    """Checkpoint retention (the run's ``keep_checkpoints``: its newest N, and with ``keep_best`` the N whose
    ``keep_best_metric`` was best at their step): remove the other checkpoints' folders and rows, except one a run
    started from (a child's parent_step, or a model_path naming it) or an evaluation read, and never a folder
    outside the run's own. Runs in the training process, which has the folder. Returns the steps removed."""
    import os
    import shutil

    from django.apps import apps

    run = Run.objects.only("config", "uid").get(pk=run_id)
    keep = int(run.config.get("keep_checkpoints") or 0)
    if keep <= 0:
        return []
    older = list(Checkpoint.objects.filter(run_id=run_id).order_by("-step")[keep:])
    best = _best_checkpoint_steps(run, older)
    older = [ckpt for ckpt in older if ckpt.step not in best]
    if not older:
        return []
    children = set(Run.objects.filter(parent_run_id=run_id).values_list("parent_step", flat=True))
    named = set(Run.objects.filter(config__model_path__in=[c.path for c in older])
                .values_list("config__model_path", flat=True))
    evaluated = set(apps.get_model("evals", "EvalModel").objects.filter(checkpoint__in=older)
                    .values_list("checkpoint_id", flat=True))  # (evals depend on runs: looked up by name)
    root = os.path.realpath(run.folder)
    removed = []
    for ckpt in older:
        if ckpt.step in children or ckpt.path in named or ckpt.pk in evaluated:
            continue
        if os.path.realpath(ckpt.path).startswith(root + os.sep):
            shutil.rmtree(ckpt.path, ignore_errors=True)
        ckpt.delete()
        removed.append(ckpt.step)
    if removed:
        log.info("run %s: removed checkpoints of steps %s (keep_checkpoints %s)", run_id, sorted(removed), keep)
    return sorted(removed)


# --- a run that failed on a full disk --------------------------------------------------------------------------

DISK_FULL = "no space left on device under "  # how workers.runner.disk_full_message starts a run's error


@transaction.atomic
def runs_restart_after_disk_full(*, min_free_bytes: int | None = None) -> list[int]:
    """Failed runs whose error is a full disk, with restarts left (max_restarts): once their folder's disk has
    ``min_free_bytes`` free again (default settings.SEEDBED_DISK_RESUME_MB), and room for two of its last
    checkpoint, back to the queue, to resume from their last whole checkpoint; counted as a restart, recorded
    in the run's activity. The maintenance pass calls it, so writing resumes by itself once space is freed."""
    from workers.runner import disk_free, human_bytes

    need = settings.SEEDBED_DISK_RESUME_MB * 1e6 if min_free_bytes is None else min_free_bytes
    restarted = []
    for run in Run.objects.select_for_update().filter(status=RunStatus.FAILED, error__startswith=DISK_FULL):
        allowed = int(run.config.get("max_restarts", 0))
        if run.restarts >= allowed or run.kill_requested_at is not None:
            continue
        last = run.checkpoints.order_by("-step").values_list("step", "path").first()
        step = last[0] if last else 0
        free = disk_free(str(run.folder))
        if free is None or free < max(need, 2 * (_folder_bytes(last[1]) if last else 0)):
            continue
        why = (run.error.splitlines() or [""])[0]
        run_resume(run_id=run.pk)
        run.refresh_from_db()
        run.restarts += 1
        run.dispatch_note = (f"restart {run.restarts} of {allowed}, from step {step}: {why}; "
                             f"{human_bytes(free)} free now")
        run.save(update_fields=["restarts", "dispatch_note"])
        audit(project=run.project_id, actor="reconciler", action="run.restart", target_type="run", target_id=run.pk,
              reason=why, from_step=step, restart=run.restarts, of=allowed, free=human_bytes(free))
        log.warning("run %s: disk has %s free again; restart %s of %s from step %s", run.pk, human_bytes(free),
                    run.restarts, allowed, step)
        restarted.append(run.pk)
    return restarted


def _folder_bytes(path: str) -> int:
    """What the files under ``path`` take (0 when it is gone)."""
    import os

    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total
