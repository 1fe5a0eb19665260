"""Guards' warnings against silent waste, stored once per kind on the run (docs/architecture.md#the-training-core)."""
from __future__ import annotations

import logging

from django.db import transaction

from .transitions import locked_run

log = logging.getLogger("seedbed.runs")


@transaction.atomic
def run_warning_add(*, run_id: int, warning: dict) -> bool:
    """Store a guard's warning on the run (training.silent_run, training.reward_hacking), once per kind; False
    when the run had it already."""
    run = locked_run(run_id)
    if any(w.get("kind") == warning.get("kind") for w in run.warnings):
        return False
    run.warnings = [*run.warnings, {k: warning.get(k) for k in ("kind", "step", "message", "reason")}]
    run.save(update_fields=["warnings"])
    log.warning("run %s: %s", run_id, warning.get("message"))
    return True
