"""What the Slurm executor (``workers.slurm_tasks``) records of a run's batch job (docs/architecture.md, "Slurm
queues"): each function one state change, in the run's fields (``slurm_job_id``, ``slurm_state``,
``slurm_reason``), never from the web process. The job itself claims, heartbeats and ends the run as a worker's
slot does (``workers.tasks.train_here``); these cover what only Slurm knows: the job was submitted or refused, it
waits and why, it ended or vanished without the run recording its end.
"""
from __future__ import annotations

import logging
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from webapp import jobs
from webapp.runs.models import ENDED_STATUSES, RUN_JOB, FailureKind, Queue, QueueKind, Run, RunStatus

from .lifecycle import run_finish
from .recovery import record_lost, restart_run
from .transitions import after_end, locked_run, move_status

log = logging.getLogger("seedbed.runs")

WAITING_FOR_SLURM = "waiting for the Slurm controller"
SLURM_RETRY_S = 10.0


def slurm_queue(name: str) -> Queue | None:
    """The registered Slurm queue of that name, or None."""
    return Queue.objects.filter(name=name, kind=QueueKind.SLURM).first()


def runs_on_slurm() -> list[Run]:
    """The runs the executor watches: those of Slurm queues with a job that are under way, and the ended ones whose
    job Slurm may still run (a kill that ended a pending run, or one whose job outlived the run's end)."""
    names = Queue.objects.filter(kind=QueueKind.SLURM).values("name")
    return list(Run.objects.filter(queue__in=names).exclude(slurm_job_id="").exclude(
        status__in=ENDED_STATUSES, slurm_state__in=("", "ENDED")).order_by("pk"))


def run_slurm_to_submit(*, run_id: int) -> Run | None:
    """The run when it should be submitted now: queued, not being killed, on a Slurm queue and without a job."""
    run = Run.objects.filter(pk=run_id).first()
    if run is None or run.status != RunStatus.QUEUED or run.kill_requested_at is not None or run.slurm_job_id:
        return None
    return run if slurm_queue(run.queue) is not None else None


def run_slurm_submitted(*, run_id: int, job_id: str) -> bool:
    """Record the run's job; False when the run is no longer waiting for one (killed, or submitted by another
    copy of the task meanwhile): the caller cancels the job it made."""
    done = Run.objects.filter(pk=run_id, status=RunStatus.QUEUED, slurm_job_id="",
                              kill_requested_at__isnull=True).update(
        slurm_job_id=job_id, slurm_state="PENDING", slurm_reason="", dispatch_note=f"Slurm job {job_id}")
    return bool(done)


@transaction.atomic
def run_slurm_refused(*, run_id: int, why: str) -> None:
    """Slurm refused the job (an unknown partition, a QoS limit): the run fails with Slurm's words, nothing left
    half-made (no job, no slot)."""
    run = locked_run(run_id)
    if run.status == RunStatus.QUEUED:
        run_finish(run_id=run_id, status=RunStatus.FAILED, error=f"Slurm refused the job: {why}"[:4000])


def run_slurm_unreachable(*, run_id: int, why: str, retry_s: float = SLURM_RETRY_S) -> None:
    """The controller did not answer: the run stays queued, said so, and is sent again after ``retry_s``
    (``runs_redispatch``)."""
    Run.objects.filter(pk=run_id, status=RunStatus.QUEUED, slurm_job_id="").update(
        dispatched_at=None, retry_at=timezone.now() + timedelta(seconds=retry_s),
        dispatch_note=f"{WAITING_FOR_SLURM}: {why}"[:500])


def run_slurm_state(*, run_id: int, state: str, reason: str) -> None:
    """What Slurm says of the run's job now (PENDING with its reason, RUNNING with its nodes)."""
    note = f"Slurm: {state.lower()} ({reason})" if state == "PENDING" and reason not in ("", "None") else ""
    updates = {"slurm_state": state[:30], "slurm_reason": reason[:200]}
    Run.objects.filter(pk=run_id).exclude(**updates).update(**updates)
    if note:
        Run.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(dispatch_note=note[:500])


@transaction.atomic
def run_slurm_ended(*, run_id: int, job_id: str, state: str, exit_code: str) -> None:
    """The run's job ended (``state``: COMPLETED, FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, PREEMPTED, CANCELLED,
    ...) without the run recording its end. A run being killed ends killed; a preempted job's run (PREEMPTED), or
    one the job handed back before it ended (queued after a checkpoint: TIMEOUT, COMPLETED) is submitted again, a
    preemption rather than a failure; a node that failed under a running run (NODE_FAIL, BOOT_FAIL), or a batch
    job a signal killed (FAILED, exit code "0:9"), is a lost attempt, restarted from its checkpoint under
    ``max_restarts``; a job cancelled outside Seedbed (``scancel``)
    kills its run; any other end (FAILED with its exit code, OUT_OF_MEMORY, TIMEOUT) fails it, Slurm's words in
    its error."""
    run = locked_run(run_id)
    if run.slurm_job_id != job_id:
        return
    Run.objects.filter(pk=run_id).update(slurm_state="ENDED" if run.status in ENDED_STATUSES else state[:30])
    if run.status in ENDED_STATUSES:
        return
    words = f"the Slurm job {job_id} ended {state}" + (f" (exit code {exit_code})" if exit_code else "")
    if run.kill_requested_at is not None:
        run_finish(run_id=run_id, status=RunStatus.KILLED, error=words)
    elif state == "PREEMPTED" or (run.status == RunStatus.QUEUED and state in HANDED_BACK_STATES):
        _submit_again(run, words)
    elif run.status == RunStatus.RUNNING and (state in LOST_STATES or
                                              (state == "FAILED" and _killed_by_signal(exit_code))):
        _lost_attempt(run, words)
    elif state == "CANCELLED":
        Run.objects.filter(pk=run_id).update(killed_by="slurm")
        run_finish(run_id=run_id, status=RunStatus.KILLED, error=f"{words}: cancelled outside Seedbed (scancel)")
    else:
        run_finish(run_id=run_id, status=RunStatus.FAILED, error=f"{words} before the run recorded its end",
                   failure_kind=FailureKind.SIGNAL if state in ("TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY") else "")
    log.warning("run %s: %s", run_id, words)


LOST_STATES = frozenset({"NODE_FAIL", "BOOT_FAIL"})
HANDED_BACK_STATES = frozenset({"TIMEOUT", "COMPLETED"})
"""How a job ends after its run handed itself back (preempted, queued after a checkpoint) when Slurm did not
requeue the job: its time limit came, or it exited after a requeue Slurm refused."""


def _killed_by_signal(exit_code: str) -> bool:
    """Whether Slurm's ExitCode ("code:signal") says a signal ended the batch job.

    >>> _killed_by_signal("0:9"), _killed_by_signal("1:0"), _killed_by_signal("")
    (True, False, False)
    """
    return exit_code.partition(":")[2] not in ("", "0")


def _submit_again(run: Run, why: str) -> None:
    """A new job for the run (``runs_redispatch`` submits it within seconds): a running one was preempted, which is
    counted (``preemptions``), not charged to ``max_restarts``; it resumes from its last checkpoint."""
    if run.status == RunStatus.RUNNING:
        move_status(run, RunStatus.QUEUED)
        run.preemptions += 1
        run.worker, run.pid = "", None
    run.slurm_job_id, run.slurm_state, run.slurm_reason = "", "", ""
    run.dispatched_at, run.retry_at, run.dispatch_note = None, None, f"{why}; submitted again"[:500]
    run.save()


def run_slurm_job_gone(*, run_id: int, job_id: str) -> None:
    """The job ended (or was cancelled) after the run's own end: nothing more to watch."""
    Run.objects.filter(pk=run_id, slurm_job_id=job_id).update(slurm_state="ENDED")


@transaction.atomic
def run_slurm_vanished(*, run_id: int, job_id: str) -> None:
    """Slurm knows nothing of the run's job (purged, or its controller lost its state): a lost attempt. A queued
    run is submitted again; a running one restarts from its checkpoint while it has restarts left
    (``max_restarts``), else it is lost."""
    run = locked_run(run_id)
    if run.slurm_job_id != job_id:
        return
    if run.status in ENDED_STATUSES:
        run.slurm_state = "ENDED"
        run.save(update_fields=["slurm_state"])
        return
    why = f"the Slurm job {job_id} vanished (the controller knows nothing of it)"
    if run.status == RunStatus.QUEUED:
        run.slurm_job_id, run.slurm_state, run.slurm_reason = "", "", ""
        run.dispatched_at, run.retry_at, run.dispatch_note = None, None, f"{why}; submitted again"
        run.save()
        return
    _lost_attempt(run, why)


def _lost_attempt(run: Run, why: str) -> None:
    """A running run's job was lost: restarted from its checkpoint in a new job while it has restarts left
    (``max_restarts``), else the run is lost."""
    allowed = int(run.config.get("max_restarts", 0))
    if run.restarts < allowed:
        restart_run(run, why, allowed, lost="job lost")
    else:
        run.failure_kind = FailureKind.LOST_WORKER
        jobs.declare_lost(RUN_JOB, run, why)
        record_lost(run, why, actor="reconciler")
        after_end(run)
