"""A queued run that trains the built-in model while another process builds that model holds no worker slot: the
worker that takes its message gives the slot back (``webapp.runs.services.run_defer_for_build``) instead of
waiting in it for the build, and the reconciler sends the run again a few seconds later
(docs/architecture.md, "A run's life")."""
from __future__ import annotations


def waits_for_build(run_id: int, dispatch: str) -> bool:
    """True when the run was deferred: it is queued, trains the built-in model (``waiting.uses_builtin_model``)
    and that model is being built by another process (``training.tiny.tiny_build_state``: its lock is held)."""
    from training.config import default_tiny_model_dir
    from training.tiny import tiny_build_state
    from webapp.runs import services
    from webapp.runs.models import Run, RunStatus
    from webapp.runs.waiting import uses_builtin_model

    run = Run.objects.filter(pk=run_id, status=RunStatus.QUEUED).only("config").first()
    if run is None or not dispatch or not uses_builtin_model(run.config):
        return False
    if tiny_build_state(default_tiny_model_dir())["state"] != "building":
        return False
    return services.run_defer_for_build(run_id=run_id, dispatch=dispatch)
