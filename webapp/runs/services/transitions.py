"""A run's status moves, checked against LEGAL_TRANSITIONS (docs/architecture.md#a-runs-life): the one place that
changes ``Run.status``, and what follows a run's end (its sweep hands its slot on)."""
from __future__ import annotations

from webapp.runs.models import LEGAL_TRANSITIONS, Run
from webapp.runs.signals import slots_changed


class TransitionError(Exception):
    """A service was asked for a status change the run's current status does not allow."""


def _move(run: Run, new_status: str) -> None:
    """Change ``run.status`` in memory after checking the transition is legal (caller saves)."""
    if new_status not in LEGAL_TRANSITIONS[run.status]:
        raise TransitionError(f"run {run.pk} is {run.status}; it cannot become {new_status}")
    run.status = new_status


def _locked(run_id: int) -> Run:
    return Run.objects.select_for_update().get(pk=run_id)


def _after_end(run: Run) -> None:
    """A run ended: the group it belongs to (its sweep) hands its slot on."""
    if run.sweep_id is not None:
        slots_changed.send(sender=Run, run=run)
