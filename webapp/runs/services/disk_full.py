"""A run that failed on a full disk restarts by itself once its disk has room again
(docs/architecture.md#where-state-lives)."""
from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction

from webapp.runs.disk_budget import folder_bytes
from webapp.runs.models import FailureKind, Run, RunStatus

from .disk_budget import run_budget_error
from .lifecycle import run_resume
from .recovery import count_restart

log = logging.getLogger("seedbed.runs")


@transaction.atomic
def runs_restart_after_disk_full(*, min_free_bytes: int | None = None) -> list[int]:
    """Failed runs whose failure is a full disk (``failure_kind``), with restarts left (max_restarts): once their
    folder's disk (and the database's, when it is a file here: it may be the one that refused the write) has
    ``min_free_bytes`` free again
    (default settings.SEEDBED_DISK_RESUME_MB), and room for two of its last checkpoint, back to the queue, to
    resume from their last whole checkpoint; counted as a restart, recorded in the run's activity. A run past its
    disk budget or its project's (its stored size: it filled the disk itself) is not restarted: its error says so.
    The maintenance pass calls it, so writing resumes by itself once space is freed."""
    from workers.port import database_folder, disk_free, human_bytes

    need = settings.SEEDBED_DISK_RESUME_MB * 1e6 if min_free_bytes is None else min_free_bytes
    restarted = []
    for run in Run.objects.select_for_update().filter(status=RunStatus.FAILED,
                                                            failure_kind=FailureKind.DISK_FULL):
        allowed = int(run.config.get("max_restarts", 0))
        if run.restarts >= allowed or run.kill_requested_at is not None:
            continue
        if over := run_budget_error(run):  # its own folder filled its budget (or the disk): not restarted
            run.error = f"{over}\n{run.error}"
            run.save(update_fields=["error"])
            continue
        last = run.checkpoints.order_by("-step").values_list("step", "path").first()
        step = last[0] if last else 0
        why = (run.error.splitlines() or [""])[0]
        database = database_folder()
        frees = [disk_free(str(run.folder))] + ([disk_free(database)] if database else [])
        free = None if None in frees else min(frees)
        if free is None or free < max(need, 2 * (folder_bytes(last[1]) if last else 0)):
            continue
        run_resume(run_id=run.pk)
        run.refresh_from_db()
        count_restart(run, f"{why}; {human_bytes(free)} free now", allowed=allowed, step=step, actor="reconciler",
                      reason=why, free=human_bytes(free))
        restarted.append(run.pk)
    return restarted
