"""A run past its disk budget, or its project's, fails by itself (webapp.runs.disk_budget: the budgets and their
defaults; docs/architecture.md#where-state-lives)."""
from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Sum

from webapp.projects.services import audit
from webapp.runs.disk_budget import budgets, over_budget
from webapp.runs.models import Run, RunStatus

from .lifecycle import run_finish

log = logging.getLogger("seedbed.runs")


def run_budget_error(run: Run, run_bytes: int | None = None) -> str:
    """Why ``run`` is past its disk budget or its project's ("" when it is not), from the runs' stored sizes
    (``run_bytes``: this run's fresh measure instead of its stored one)."""
    used = run.disk_bytes if run_bytes is None else run_bytes
    others = (Run.objects.filter(project_id=run.project_id).exclude(pk=run.pk)
              .aggregate(total=Sum("disk_bytes"))["total"] or 0)
    run_budget, project_budget = budgets(run.project)
    return over_budget(run_bytes=used, project_bytes=others + used, run_budget=run_budget,
                       project_budget=project_budget)


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
    run_finish(run_id=run_id, status=RunStatus.FAILED, error=why)
    audit(project=run.project_id, actor=f"worker:{run.worker}", action="run.disk_budget", target_type="run",
          target_id=run.pk, reason=why, disk_bytes=used)
    log.warning("run %s: %s", run_id, why)
    return why
