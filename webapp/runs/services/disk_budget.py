"""A run past its disk budget, or its project's, fails by itself (webapp.runs.disk_budget: the budgets and their
defaults; docs/architecture.md#where-state-lives)."""
from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Sum

from webapp.projects.services import audit
from webapp.runs.disk_budget import budgets, over_budget
from webapp.runs.models import ENDED_STATUSES, FailureKind, Run, RunStatus

from .lifecycle import run_finish

log = logging.getLogger("seedbed.runs")


def run_budget_error(run: Run, run_bytes: int | None = None) -> str:
    """Why ``run`` is past its disk budget or its project's ("" when it is not), from the runs' stored sizes
    (``run_bytes``: this run's fresh measure instead of its stored one); before the project's budget is said to be
    reached, its ended runs are measured again (``_remeasure_ended``)."""
    used = run.disk_bytes if run_bytes is None else run_bytes
    run_budget, project_budget = budgets(run.project)
    why = ""
    for fresh in (False, True):  # past the project's budget: its ended runs measured again, then judged again
        if fresh:
            _remeasure_ended(run)
        others = (Run.objects.filter(project_id=run.project_id).exclude(pk=run.pk)
                  .aggregate(total=Sum("disk_bytes"))["total"] or 0)
        why = over_budget(run_bytes=used, project_bytes=others + used, run_budget=run_budget,
                          project_budget=project_budget)
        if not why.startswith("project's"):
            return why
    return why


def _remeasure_ended(run: Run) -> None:
    """The stored sizes of ``run``'s project's ended runs, measured again where this machine can: their folder is
    here, or they last ran here (a folder gone from here takes 0; one on another worker's disk keeps its size).
    So files an operator removed (old runs' checkpoints) give the project its budget back."""
    import socket

    from webapp.runs.disk_budget import folder_bytes

    host = socket.gethostname()
    ended = (Run.objects.filter(project_id=run.project_id, status__in=ENDED_STATUSES, disk_bytes__gt=0)
             .exclude(pk=run.pk).only("pk", "uid", "worker", "disk_bytes"))
    for other in ended:
        folder = other.folder
        if folder.is_dir() or other.worker.rpartition(":")[0] == host:
            used = folder_bytes(folder)
            if used != other.disk_bytes:
                Run.objects.filter(pk=other.pk).update(disk_bytes=used)


@transaction.atomic
def run_disk_check(*, run_id: int, used: int) -> str:
    """The run's worker measured its folder (``used`` bytes): store it as ``Run.disk_bytes`` and, when the run or
    its project is past its budget, fail the run with a message naming the budget (its worker then terminates its
    training process). Returns that message ("" while within both, or when the run is no longer running). Only
    this run fails: its neighbours, in its project or not, fail on their own measure if they write on."""
    Run.objects.filter(pk=run_id).update(disk_bytes=used)
    run = Run.objects.select_related("project").get(pk=run_id)
    why = run_budget_error(run, used) if run.status == RunStatus.RUNNING else ""
    if not why:
        return ""
    run_finish(run_id=run_id, status=RunStatus.FAILED, error=why, failure_kind=FailureKind.BUDGET)
    audit(project=run.project_id, actor=f"worker:{run.worker}", action="run.disk_budget", target_type="run",
          target_id=run.pk, reason=why, disk_bytes=used)
    log.warning("run %s: %s", run_id, why)
    return why
