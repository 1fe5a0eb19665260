"""The maintenance passes every job kind gets (docs/architecture.md#where-state-lives): running jobs whose heartbeat
went stale are handed to the kind (declared lost, by default), and queued jobs whose task the broker never took
are sent again. Both are safe in several processes at once: each job is re-read under its lock."""
from __future__ import annotations

import logging
from datetime import timedelta
from typing import Callable, Iterable

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.module_loading import import_string

from .states import JobKind, kinds

log = logging.getLogger("seedbed.jobs")


def declare_lost(kind: JobKind, job, why: str) -> None:
    """The default for a stale job: it ends lost, ``why`` as its error (its task, delivered again, resumes it)."""
    kind.move(job, kind.lost)
    job.ended_at = timezone.now()
    job.error = why
    job.save()


def stale_why(job, age_s: float) -> str:
    return f"no heartbeat since {job.heartbeat_at.isoformat()} (more than {age_s:g} s)"


@transaction.atomic
def mark_lost(kind: JobKind, *, older_than_s: float | None = None, also: Q | None = None,
              on_stale: Callable | None = None) -> list[int]:
    """Running jobs whose heartbeat is older than ``older_than_s`` (default settings.SEEDBED_LOST_AFTER_S), or that
    match ``also`` (say, their worker is known dead), locked, oldest id first: each goes to ``on_stale(job, age_s)``
    (default: ``declare_lost`` with "no heartbeat since ..."). Returns their ids."""
    age = settings.SEEDBED_LOST_AFTER_S if older_than_s is None else older_than_s
    stale_q = Q(heartbeat_at__lt=timezone.now() - timedelta(seconds=age))
    if also is not None:
        stale_q |= also
    found = []
    for job in kind.model.objects.select_for_update().filter(status=kind.running).filter(stale_q).order_by("pk"):
        if on_stale is None:
            declare_lost(kind, job, stale_why(job, age))
        else:
            on_stale(job, age)
        found.append(job.pk)
    return found


def never_taken(kind: JobKind, *, older_than_s: float = 5.0, also: Q | None = None) -> list[tuple[int, str]]:
    """(id, queue) of queued jobs sent more than ``older_than_s`` ago whose task the broker never took (no
    ``dispatched_at``), not asked to stop, and matching ``also``."""
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    pending = kind.model.objects.filter(status=kind.queued, enqueued_at__lt=cutoff, dispatched_at__isnull=True,
                                        **{f"{kind.stop_field}__isnull": True})
    if also is not None:
        pending = pending.filter(also)
    return list(pending.values_list("pk", "queue"))


def send_again(kind: JobKind, pending: Iterable[tuple[int, str]], send: Callable[[int, str], None]) -> list[int]:
    """Send each (id, queue) of ``pending`` again (``send(id, queue)``, on commit), unless it was started, asked to
    stop or ended since it was listed (re-read under its lock); returns the ids sent. A duplicate delivery is
    harmless anyway: the task's claim finds the job held and does nothing."""
    sent = []
    for pk, queue in pending:
        with transaction.atomic():
            if not kind.model.objects.select_for_update().filter(
                    pk=pk, status=kind.queued, **{f"{kind.stop_field}__isnull": True}).exists():
                continue
            kind.model.objects.filter(pk=pk).update(dispatched_at=None)
            send(pk, queue)
            sent.append(pk)
    return sent


def recover_all() -> dict[str, object]:
    """The one maintenance beat's job passes: each declared kind's ``recover`` (``states.kinds``: its lost and
    resend passes, and what else the kind recovers), by kind name, in the apps' order; one kind's failure is logged
    and reported, and does not stop the others'."""
    done: dict[str, object] = {}
    for name, kind in kinds().items():
        try:
            done[name] = import_string(kind.recover)()
        except Exception as exc:  # (the next pass, seconds later, tries again)
            log.exception("maintenance: the %s pass failed", name)
            done[name] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    return done
