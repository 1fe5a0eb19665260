"""A run's status moves, checked by the job core against the transitions ``RUN_JOB`` declares
(docs/architecture.md#a-runs-life, webapp.jobs): the one place that changes ``Run.status``, and what follows a
run's end (its sweep hands its slot on)."""
from __future__ import annotations

from webapp.jobs import TransitionError
from webapp.runs.models import RUN_JOB, Run
from webapp.runs.signals import slots_changed

__all__ = ["TransitionError", "after_end", "locked_run", "move_status"]


def move_status(run: Run, new_status: str) -> None:
    """Change ``run.status`` in memory after checking the transition is legal (caller saves)."""
    RUN_JOB.move(run, new_status)


def locked_run(run_id: int) -> Run:
    return RUN_JOB.locked(run_id)


def after_end(run: Run) -> None:
    """A run ended: the group it belongs to (its sweep) hands its slot on."""
    if run.sweep_id is not None:
        slots_changed.send(sender=Run, run=run)
