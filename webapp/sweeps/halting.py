"""Ending a sweep, and the rule that ends its new seeds (docs/architecture.md#a-sweeps-decisions).

- **Stop** (``sweep_stop``): a member ends the whole sweep: every queued or running run is killed, and from then
  on nothing of the sweep starts again: no freed slot is filled (``sweep_fill_slots`` and ``use_freed_slot`` ask
  ``new_seed_refusal``), no killed run of it is resumed. Who stopped it, when and why are on the sweep row.
- **Seeds that fail at once**: a freed slot starts a new seed only while the last ``FAILED_IN_A_ROW`` new seeds
  did not all fail before their first step. Such failures are the same cause again (a bad row of the dataset, a
  config the worker refuses): each would cost a slot, a model load and a row in the runs table for nothing. Once
  the rule holds, the plan's ``new_seeds_halted`` says why, on the sweep's page and in the API, and stays: a seed
  is never started on the strength of a cause that may still be there.
"""
from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from training.fields import require_no_control_characters
from webapp.projects.models import Role
from webapp.projects.services import audit, require_role
from webapp.runs import services as run_services
from webapp.runs.models import RunStatus

from .models import Sweep, SweepPlan

FAILED_IN_A_ROW = 3  # new seeds failing before their first step, in a row, that end the sweep's new seeds
MAX_REASON_CHARS = 1000


def failed_before_first_step(run) -> bool:
    """Ended failed (or lost) without a stored step: its cause is not one a later step could have reached."""
    return run.status in (RunStatus.FAILED, RunStatus.LOST) and run.last_step <= 0


def failed_seeds_note(sweep: Sweep, plan: SweepPlan) -> str:
    """Why no new seed may start ("" when one may): the sweep's last ``FAILED_IN_A_ROW`` runs are new seeds (a new
    seed is always made after every run the sweep was launched with, so the last ``new_seeds_started`` runs by id
    are its new seeds) and every one failed before its first step."""
    if plan.new_seeds_started < FAILED_IN_A_ROW:
        return ""
    last = list(sweep.runs.order_by("-pk")[:FAILED_IN_A_ROW])
    if len(last) < FAILED_IN_A_ROW or not all(failed_before_first_step(run) for run in last):
        return ""
    error = next((line for line in reversed(last[0].error.strip().splitlines()) if line.strip()), "no error text")
    ids = ", ".join(str(run.pk) for run in reversed(last))
    return (f"{FAILED_IN_A_ROW} new seeds in a row failed before their first step (runs {ids}; the last: "
            f"{error[:300]}): freed slots start no more new seeds. Fix the cause, then launch the sweep again")


def new_seed_refusal(sweep: Sweep, plan: SweepPlan) -> str:
    """Why a freed slot of ``sweep`` may not start a new seed now ("" when it may, budget aside): the sweep was
    stopped, or its new seeds were halted (now, when ``failed_seeds_note`` first holds: stored on the plan)."""
    if sweep.is_stopped:
        return f"the sweep was stopped by {sweep.stopped_by}"
    if not plan.new_seeds_halted:
        note = failed_seeds_note(sweep, plan)
        if not note:
            return ""
        SweepPlan.objects.filter(pk=plan.pk).update(new_seeds_halted=note)
        plan.new_seeds_halted = note
        audit(project=sweep.project_id, actor="system", action="sweep.new_seeds_halted", target_type="sweep",
              target_id=sweep.pk, reason=note[:300])
    return plan.new_seeds_halted


@transaction.atomic
def sweep_stop(*, sweep_id: int, user=None, reason: str = "") -> tuple[Sweep, list[int]]:
    """Stop the whole sweep for ``user`` (a member of its project, as killing one of its runs needs) or for the
    system: record who, when and why, then kill each queued or running run not already being killed (a running
    one stops at its next step). Returns the sweep and the ids killed. A sweep stopped before, or one that has ended
    (``Sweep.is_ended``: nothing of it is left to stop), is refused with ``TransitionError`` and left as it is."""
    sweep = Sweep.objects.select_for_update().get(pk=sweep_id)
    if user is not None:
        require_role(user, sweep.project_id, Role.MEMBER)
        require_no_control_characters(reason=reason)  # FieldErrors: a person's reason is printed by the CLI
    if sweep.is_stopped:
        raise run_services.TransitionError(f"sweep {sweep.pk} was already stopped by {sweep.stopped_by} at "
                              f"{sweep.stopped_at:%Y-%m-%d %H:%M:%S} UTC")
    if sweep.is_ended:
        raise run_services.TransitionError(f"sweep {sweep.pk} has ended: every run of it has ended, so nothing is "
                                           "left to stop; it was left as it is")
    # recorded first: each kill below frees a slot, and sweep_fill_slots must already see a stopped sweep
    sweep.stopped_at = timezone.now()
    sweep.stopped_by = f"user:{user.get_username()}" if user is not None else "system"
    sweep.stop_reason = (reason or "").strip()[:MAX_REASON_CHARS]
    sweep.save(update_fields=["stopped_at", "stopped_by", "stop_reason"])
    audit(project=sweep.project_id, user=user, actor="" if user is not None else "system", action="sweep.stop",
          target_type="sweep", target_id=sweep.pk, reason=sweep.stop_reason)
    why = f"sweep {sweep.pk} stopped" + (f": {sweep.stop_reason}" if sweep.stop_reason else "")
    killed = []
    for run_id in (sweep.runs.filter(status__in=(RunStatus.QUEUED, RunStatus.RUNNING), kill_requested_at__isnull=True)
                   .order_by("pk").values_list("pk", flat=True)):
        run_services.run_kill(run_id=run_id, user=user, killed_by=sweep.stopped_by, reason=why)
        killed.append(run_id)
    return sweep, killed
