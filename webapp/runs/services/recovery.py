"""The reconciler's lost-run pass: a running run whose heartbeat went stale, or whose worker is known dead, is
restarted from its last checkpoint (max_restarts, with a backoff) or ends lost (docs/architecture.md#where-state-lives)."""
from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from webapp import jobs
from webapp.projects.services import audit
from webapp.runs.models import RUN_JOB, FailureKind, Run, RunStatus

from .transitions import after_end, move_status

log = logging.getLogger("seedbed.runs")
NEVER_STALE_S = 100 * 365 * 86400.0  # a heartbeat age no run reaches: no run judged lost by its heartbeat


@transaction.atomic
def runs_mark_lost(*, older_than_s: float | None = None, by_heartbeat: bool = True) -> list[int]:
    """The job core's lost pass (webapp.jobs.passes.mark_lost) for runs: running runs whose heartbeat is older than
    ``older_than_s`` (default: settings), or whose worker is known dead (after two heartbeats), are recovered
    (``_recover``). ``by_heartbeat`` False: only those whose worker is known dead (the database could not take
    heartbeats a while ago: the reconciler, workers.db_full)."""
    age = settings.SEEDBED_LOST_AFTER_S if older_than_s is None else older_than_s
    gone = _workers_gone()
    dead_worker = Q(worker__in=gone, heartbeat_at__lt=timezone.now() - timedelta(
        seconds=min(age, 2 * settings.SEEDBED_HEARTBEAT_S)))
    lost = jobs.mark_lost(RUN_JOB, older_than_s=age if by_heartbeat else NEVER_STALE_S, also=dead_worker,
                          on_stale=lambda run, age_s: _recover(run, age_s, gone))
    if lost:
        log.warning("runs whose worker was lost (stale heartbeat or dead worker): %s", lost)
        _clean_after_lost(set(lost), gone)
    return lost


def _recover(run: Run, age: float, gone: set[str]) -> None:
    """A run whose worker was lost: killed when a kill was asked for, restarted while it has restarts left
    (max_restarts), else lost."""
    why = jobs.stale_why(run, age)
    if run.worker in gone:
        why = f"its worker {run.worker} stopped reporting (dead: no liveness for {_gone_after_s():g} s)"
    allowed = int(run.config.get("max_restarts", 0))
    if run.kill_requested_at is not None:  # the kill was asked for: it ends killed, by whoever asked
        move_status(run, RunStatus.KILLED)
        run.ended_at = timezone.now()
        run.error = f"its worker was lost before the kill took effect ({why})"
        run.save()
        after_end(run)
    elif run.restarts < allowed:
        restart_run(run, why, allowed)
    else:
        why += f"; gave up after {run.restarts} automatic restart(s)" if allowed else ""
        run.failure_kind = FailureKind.LOST_WORKER
        jobs.declare_lost(RUN_JOB, run, why)
        record_lost(run, f"worker lost: {why}", actor="reconciler")
        after_end(run)


def _gone_after_s() -> float:
    from workers.port import GONE_AFTER_S

    return GONE_AFTER_S


def _workers_gone() -> set[str]:
    """The workers of running runs known dead (their own liveness stamp expired: workers.recovery), so their runs
    are recovered within seconds rather than after SEEDBED_LOST_AFTER_S; a worker not known is not among them."""
    workers = set(Run.objects.filter(status=RunStatus.RUNNING).exclude(worker="").values_list("worker", flat=True))
    if not workers:
        return set()
    from workers.port import workers_gone

    return workers_gone(workers)


def _clean_after_lost(run_ids: set[int], gone: set[str]) -> None:
    """Once the lost runs are recorded: their dead workers' unacknowledged messages leave the broker (the
    reconciler sends each restarted run anew), and the dead workers' liveness stamps are dropped."""
    def clean() -> None:
        from workers.port import drop_unacked, forget

        drop_unacked(run_ids)
        if gone:
            forget(gone)

    transaction.on_commit(clean)


def restart_backoff_s(restart: int) -> float:
    """The wait before a lost run's ``restart``-th automatic restart: SEEDBED_RESTART_BACKOFF_S, twice as long
    each next time, never more than SEEDBED_RESTART_BACKOFF_MAX_S (10, 20, 40, 60, 60 ... by default)."""
    base = settings.SEEDBED_RESTART_BACKOFF_S * 2 ** min(max(restart - 1, 0), 30)
    return min(base, max(settings.SEEDBED_RESTART_BACKOFF_MAX_S, settings.SEEDBED_RESTART_BACKOFF_S))


def restart_run(run: Run, why: str, allowed: int, lost: str = "worker lost") -> None:
    """Back to the queue after its worker was lost (or its training process killed by a signal: ``lost`` "",
    ``why`` names it), to resume from its last checkpoint after a backoff (the reconciler sends it then); the
    restart is recorded on the run's page (by the reconciler, or by the worker that saw the signal). A sweep's
    run keeps its slot."""
    step = run.checkpoints.order_by("-step").values_list("step", flat=True).first() or 0
    delay = restart_backoff_s(run.restarts + 1)
    move_status(run, RunStatus.QUEUED)
    now = timezone.now()
    actor = "reconciler" if lost else f"worker:{run.worker}"[:200]
    run.worker, run.pid = "", None
    if run.slurm_job_id and lost:  # a Slurm run: a new job for the new attempt, the lost one's cancelled
        from workers.port import send_on_commit

        send_on_commit("workers.slurm_tasks.slurm_cancel", args=[run.queue, run.slurm_job_id], queue="maintenance")
    run.slurm_job_id, run.slurm_state, run.slurm_reason = "", "", ""
    run.enqueued_at, run.dispatched_at, run.retry_at = now, None, now + timedelta(seconds=delay)
    count_restart(run, f"{lost} ({why})" if lost else why, allowed=allowed, step=step, actor=actor,
                  reason=f"{lost}: {why}" if lost else why, when=f" in {delay:g} s", after_s=delay)


def count_restart(run: Run, why: str, *, allowed: int, step: int, actor: str, reason: str, when: str = "",
                  **detail) -> None:
    """The one writer of an automatic restart, whatever lost the attempt (its worker, a signal, a full disk): the
    count (``max_restarts`` is checked by the caller), the queue note "restart 2 of 3 in 20 s, from step 40: why",
    the run's Activity (``run.restart``, with ``detail``) and the log. Saves the run."""
    run.restarts += 1
    run.dispatch_note = f"restart {run.restarts} of {allowed}{when}, from step {step}: {why}"
    run.save()
    audit(project=run.project_id, actor=actor, action="run.restart", target_type="run", target_id=run.pk,
          reason=reason, from_step=step, restart=run.restarts, of=allowed, **detail)
    log.warning("run %s: %s; restart %s of %s from step %s%s", run.pk, why, run.restarts, allowed, step, when)


def record_lost(run: Run, why: str, *, actor: str) -> None:
    """A run that ended lost, in its Activity (``run.lost``): why (its cause's one line, the signal or the lost
    worker, not its log's last line), at which step, after how many automatic restarts of how many allowed."""
    audit(project=run.project_id, actor=actor[:200], action="run.lost", target_type="run", target_id=run.pk,
          reason=(why.splitlines() or [""])[0][:300], at_step=run.last_step, restarts=run.restarts,
          of=int(run.config.get("max_restarts", 0)))
