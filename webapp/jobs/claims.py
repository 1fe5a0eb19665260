"""A worker slot's claim on a job, its heartbeat, and the skeleton every job task starts with
(docs/architecture.md#extension-points). A task may be delivered twice (acks_late, a redelivery after its worker
died): the claim, under the row's lock, decides whether this copy works."""
from __future__ import annotations

from datetime import timedelta
from typing import Callable

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .states import JobKind


def claim_action(kind: JobKind, job, *, stale_before) -> str:
    """What a task that delivers ``job`` should do: "start" (queued), "resume" (lost, or running with a heartbeat
    older than ``stale_before``: its worker died and the broker delivered the task again) or "skip" (ended, held
    by a live slot, or asked to stop).

    >>> from datetime import datetime
    >>> from types import SimpleNamespace as Row
    >>> kind = JobKind("job", object, {"queued": frozenset(), "running": frozenset(), "lost": frozenset()},
    ...                frozenset({"lost"}), "stop_requested_at")
    >>> t = datetime(2026, 1, 1, 12, 0)
    >>> [claim_action(kind, Row(status=s, heartbeat_at=h, stop_requested_at=None), stale_before=t)
    ...  for s, h in [("queued", None), ("running", datetime(2026, 1, 1, 11)), ("running", t), ("lost", t)]]
    ['start', 'resume', 'skip', 'resume']
    >>> claim_action(kind, Row(status="queued", heartbeat_at=None, stop_requested_at=t), stale_before=t)
    'skip'
    """
    if getattr(job, kind.stop_field) is not None:
        return "skip"
    if job.status == kind.queued:
        return "start"
    if job.status == kind.lost or (job.status == kind.running
                                   and (job.heartbeat_at is None or job.heartbeat_at < stale_before)):
        return "resume"
    return "skip"


@transaction.atomic
def claim(kind: JobKind, *, pk: int, worker: str, prepare: Callable | None = None) -> str:
    """Claim job ``pk`` for ``worker`` (host:pid of the slot); returns "start", "resume" or "skip"
    (``claim_action``). A claimed job is running, held by ``worker``, its heartbeat now, one attempt more and its
    error cleared; ``prepare(job, now)`` sets what the kind resets besides, before the row is saved."""
    job = kind.locked(pk)
    now = timezone.now()
    action = claim_action(kind, job, stale_before=now - timedelta(seconds=settings.SEEDBED_LOST_AFTER_S))
    if action == "skip":
        return action
    kind.move(job, kind.running)
    job.worker, job.heartbeat_at, job.error = worker, now, ""
    job.started_at = job.started_at or now
    job.attempts += 1
    if prepare is not None:
        prepare(job, now)
    job.save()
    kind.log.info("%s %s: %s on %s (attempt %s)", kind.name, job.pk, action, worker, job.attempts)
    return action


def heartbeat(kind: JobKind, *, pk: int, worker: str | None = None, also: dict | None = None,
              updates: dict | None = None) -> bool:
    """Record that job ``pk`` is alive (its heartbeat now, and ``updates``). False when it is no longer running,
    no longer ``worker``'s (given: taken over elsewhere) or no longer matches ``also`` (e.g. a stop request
    absent): the worker must then stop it."""
    held = kind.model.objects.filter(pk=pk, status=kind.running, **(also or {}))
    if worker is not None:
        held = held.filter(worker=worker)
    beat = {"heartbeat_at": timezone.now(), **(updates or {})}
    return held.update(**beat) == 1  # (a conditional UPDATE: whether the row was still this worker's)


def claimed(kind: JobKind, *, pk: int, take: Callable[[], str]) -> str:
    """The skeleton a job's task starts with: ``take()`` (the kind's claim service) and what it said, "missing"
    when the job is gone (the task is dropped), each logged; the task works only on "start" or "resume"."""
    try:
        action = take()
    except kind.model.DoesNotExist:
        kind.log.warning("%s %s: no such %s; task dropped", kind.name, pk, kind.name)
        return "missing"
    if action == "skip":
        kind.log.info("%s %s: nothing to do (ended, being stopped, or held by another slot)", kind.name, pk)
    return action
