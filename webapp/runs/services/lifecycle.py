"""A run's life on the worker's side and the user's: claim, heartbeat, how it ended, requeue, kill and resume
(docs/architecture.md#a-runs-life, docs/architecture.md#a-kills-path)."""
from __future__ import annotations

import logging
from typing import Optional

from django.db import transaction
from django.utils import timezone

from training.fields import FieldErrors, require_no_control_characters
from webapp import jobs
from webapp.projects.models import Role
from webapp.projects.services import audit, require_role
from webapp.runs.capacity import check_caps
from webapp.runs.models import ENDED_STATUSES, RESUMABLE_STATUSES, RUN_JOB, FailureKind, Run, RunStatus
from webapp.runs.signals import slots_changed

from .dispatch import run_dispatch
from .recovery import record_lost, restart_run
from .transitions import TransitionError, after_end, locked_run, move_status

log = logging.getLogger("seedbed.runs")


def run_start(*, run_id: int, worker: str) -> str:
    """Claim a run for a worker slot (the job core's claim, webapp.jobs.claims). Returns what the task should do:
    "start", "resume" or "skip".

    - queued -> running: "start" (the loop resumes by itself if a checkpoint exists, e.g. a resumed kill);
    - lost, or running with a heartbeat older than the lost threshold (its worker died and the broker
      re-delivered the task) -> running: "resume";
    - ended, or running with a fresh heartbeat (another slot has it), or queued with a kill request: "skip".
    """
    return jobs.claim(RUN_JOB, pk=run_id, worker=worker, prepare=_fresh_attempt)


def _fresh_attempt(run: Run, now) -> None:
    """What a claim resets on a run besides the job core's fields."""
    run.dispatched_at = run.dispatched_at or now  # its message came: sent, even if the sender never recorded it
    run.ranks = []  # this attempt's ranks report themselves (it may run on another number of them)
    run.step_advanced_at = now  # the stall rule's clock starts again with each attempt (webapp.runs.stall)
    run.pack_leader = None  # trained alone unless its slot packs it with others (services.packing)


def run_held_by(*, run_id: int, claim: tuple) -> bool:
    """Whether ``claim`` ((worker, attempt), set when a worker started the run) is still the run's."""
    worker, attempts = claim
    return Run.objects.filter(pk=run_id, worker=worker, attempts=attempts).exists()


def run_heartbeat(*, run_id: int, pid: int | None = None, worker: str | None = None) -> bool:
    """Record that the run's process is alive. Returns False when the run is no longer ``running`` (it was
    declared lost, or ended) or, given ``worker``, no longer held by that worker (taken over elsewhere): the
    worker must then stop it."""
    return jobs.heartbeat(RUN_JOB, pk=run_id, worker=worker, updates={"pid": pid} if pid is not None else None)


@transaction.atomic
def run_finish(*, run_id: int, status: str, error: str = "", failure_kind: str = "") -> Run:
    """End a running run with ``status`` (succeeded, failed, killed or lost) and hand its slot on; a failed or lost
    one with why (``failure_kind``, a ``FailureKind``; its own error when none is given)."""
    if status not in ENDED_STATUSES:
        raise ValueError(f"{status!r} is not an end status")
    run = locked_run(run_id)
    if status == RunStatus.SUCCEEDED and run.status == RunStatus.RUNNING and run.last_step < run.total_steps:
        # Its total_steps was raised while it ran (a sweep policy extending a survivor): the loop finished the
        # total it started with; queue it again to resume from its final checkpoint up to the new total.
        move_status(run, RunStatus.QUEUED)
        run.worker, run.pid, run.enqueued_at = "", None, None
        run.save()
        after_end(run)
        log.info("run %s: extended to %s steps; queued to resume", run.pk, run.total_steps)
        return run
    move_status(run, status)
    run.ended_at = timezone.now()
    run.error = error
    run.failure_kind = (failure_kind or FailureKind.ERROR) if status in (RunStatus.FAILED, RunStatus.LOST) else ""
    if status == RunStatus.KILLED and not run.killed_by:
        run.killed_by, run.kill_reason = "system", run.kill_reason or "stopped"
    run.save()
    after_end(run)
    log.info("run %s: %s", run.pk, status)
    return run


@transaction.atomic
def run_record_exit(*, run_id: int, outcome: str, forced: bool | str = False, detail: str = "",
                    worker: str | None = None) -> str:
    """A running run's training process exited: decide how the run ended and record it; returns its status.

    ``outcome`` is what the process reported: "succeeded" (it trained every step), "stopped" (it stopped
    cleanly when asked), "preempted" (it stopped cleanly on its scheduler's signal: ``detail`` says which), "failed" (an error it raised itself; ``detail`` says how), "disk_full" (that error was a full
    disk: the run restarts once there is room, ``runs_restart_after_disk_full``) or "signaled" (a signal it
    did not ask for killed it: the out-of-memory killer's SIGKILL, a SIGSEGV; ``detail``'s first line names
    it); ``forced``: its worker terminated it after a kill (True, or why: the grace period was over, or its
    process could not read the stop flag, ``workers.tasks._kill_overdue``). A kill request makes it killed,
    whatever the exit; a clean stop nobody asked for is its worker shutting down: back to the queue, to resume
    from its checkpoint; a signal is a lost attempt, restarted from the last checkpoint as when its worker is
    lost (``max_restarts``), and past them the run ends lost naming the signal. A run that is no longer running
    (declared lost meanwhile, or ended elsewhere) is left as it is.
    """
    run = locked_run(run_id)
    if run.status != RunStatus.RUNNING or (worker is not None and run.worker != worker):
        return run.status  # ended meanwhile, or another worker holds it now: not this process's to record
    if forced or run.kill_requested_at is not None:
        return run_finish(run_id=run_id, status=RunStatus.KILLED,
                          error=_forced_error(forced)).status
    if outcome == "succeeded":
        return run_finish(run_id=run_id, status=RunStatus.SUCCEEDED).status
    if outcome == "stopped":
        return run_requeue(run_id=run_id, reason="worker shut down; resumes from its checkpoint").status
    if outcome == "preempted":
        return run_preempted(run_id=run_id, reason=detail).status
    if outcome == "signaled":
        cause, _, tail = detail.partition("\n")
        cause = cause[:300]  # (one line, in the restart's note)
        allowed = int(run.config.get("max_restarts", 0))
        if run.restarts < allowed:
            restart_run(run, cause, allowed, lost="")
            return run.status
        gave_up = f"; gave up after {run.restarts} automatic restart(s)" if allowed else ""
        ended = run_finish(run_id=run_id, status=RunStatus.LOST, error=cause + gave_up + (f"\n{tail}" if tail else ""),
                           failure_kind=FailureKind.SIGNAL)
        record_lost(ended, cause + gave_up, actor=f"worker:{run.worker}")
        return ended.status
    kind = FailureKind.DISK_FULL if outcome == "disk_full" else FailureKind.ERROR
    return run_finish(run_id=run_id, status=RunStatus.FAILED, error=detail, failure_kind=kind).status


def _forced_error(forced) -> str:
    """A killed run's error: why its worker had to terminate it (``forced``: the worker's reason, or True for the
    grace period), "" when it stopped by itself."""
    if not forced:
        return ""
    return forced if isinstance(forced, str) else "terminated after the kill grace period"


@transaction.atomic
def run_preempted(*, run_id: int, reason: str) -> Run:
    """A running run handed its node back on its scheduler's signal (Slurm's warning before a time limit or a
    preemption, or its SIGTERM), after a checkpoint: back to the queue, counted in ``preemptions`` (shown; not a
    failure, not charged to ``max_restarts``). A Slurm run keeps its job, which Slurm starts again (its requeue);
    the dispatch is recorded as for any queued run."""
    run = locked_run(run_id)
    move_status(run, RunStatus.QUEUED)
    run.preemptions += 1
    run.error = f"preempted ({reason}); resumes from its checkpoint of step {run.last_step}"[:4000]
    run.worker, run.pid = "", None
    if run.slurm_job_id:
        run.slurm_state, run.slurm_reason = "REQUEUED", ""
    run.save()
    run_dispatch(run=run)
    log.info("run %s: preempted (%s)", run.pk, reason)
    return run


@transaction.atomic
def run_requeue(*, run_id: int, reason: str) -> Run:
    """A running run was stopped cleanly because its worker is shutting down (it saved a checkpoint):
    back to the queue, sent again, so the next worker resumes it."""
    run = locked_run(run_id)
    move_status(run, RunStatus.QUEUED)
    run.error = reason
    run.worker, run.pid = "", None
    run.save()
    run_dispatch(run=run)
    log.info("run %s: requeued (%s)", run.pk, reason)
    return run


KILLABLE_STATUSES = frozenset({RunStatus.QUEUED, RunStatus.RUNNING})


@transaction.atomic
def run_kill(*, run_id: int, user=None, killed_by: str = "", reason: str = "",
             decided_at_step: Optional[int] = None) -> Run:
    """Kill a queued or running run, for ``user`` (a member of its project) or for the system (``killed_by``
    names it, e.g. "policy:asha"). The audit row records the run's step when the kill lands (``at_step``) and,
    for a policy's stop, the step its decision was taken at (``decided_at_step``: the run may have moved on while
    the check ran), so the two are never read as one. Running: set the flag the loop reads through should_stop() (status becomes
    killed when it exits, or when the worker terminates it after the grace period). Queued: killed at once.
    Any other run, or one already being killed, is refused with TransitionError and left as it is; a reason a
    user gave with a control character, with FieldErrors (``reason``)."""
    run = locked_run(run_id)
    if user is not None:
        require_role(user, run.project_id, Role.MEMBER)
        require_no_control_characters(reason=reason)
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
          target_type="run", target_id=run.pk, reason=reason,
          **({} if decided_at_step is None else {"decided_at_step": decided_at_step}), at_step=run.last_step)
    if run.status == RunStatus.QUEUED:
        move_status(run, RunStatus.KILLED)
        run.ended_at = run.kill_requested_at
        run.save()
        after_end(run)
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
    run = locked_run(run_id)
    if user is not None:
        require_role(user, run.project_id, Role.MEMBER)
    if run.status not in RESUMABLE_STATUSES:
        raise TransitionError(f"run {run.pk} is {run.status}; only a killed, lost or failed run can be resumed")
    if run.sweep_id is not None and run.sweep.stopped_at is not None:  # a stopped sweep starts nothing again
        raise TransitionError(f"run {run.pk} belongs to sweep {run.sweep_id}, which {run.sweep.stopped_by} stopped: "
                              "nothing of it runs again (launch a new sweep, or re-run this one with changes)")
    ranks_before = (run.config.get("nproc_per_node") or 1) * (run.config.get("nnodes") or 1)
    if nproc_per_node is not None or nnodes is not None:
        run.config = _config_on_ranks(run, nproc_per_node, nnodes)
    # how it had ended goes into the run's history (its Activity) before the run's own fields are cleared
    ended = {"was": run.status, "at_step": run.last_step, "killed_by": run.killed_by, "reason": run.kill_reason,
             "error": (run.error.strip().splitlines() or [""])[-1][:200]}
    ranks_now = (run.config.get("nproc_per_node") or 1) * (run.config.get("nnodes") or 1)
    if ranks_now != ranks_before:
        ended["ranks"] = f"{ranks_before} -> {ranks_now}"
    move_status(run, RunStatus.QUEUED)
    run.kill_requested_at, run.killed_by, run.kill_reason = None, "", ""
    run.ended_at, run.enqueued_at, run.error, run.failure_kind = None, None, "", ""
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

    if not run.resumes_on_other_ranks:  # its engine's checkpoints load at any number of ranks (training.engines)
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
