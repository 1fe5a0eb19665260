"""A sweep's work beyond its checks, on the maintenance queue: ``sweep_fit_risk(sweep_id)``, the bayes policy's risk
level learned from its project's finished sweeps (``webapp.sweeps.risk_fits``: sent by a check that found none
stored; thin and idempotent, a stored fit is left as it is)."""
from __future__ import annotations

from workers.celery_app import app, ensure_django

ensure_django()

from django.db import close_old_connections  # noqa: E402

from webapp.sweeps import risk_fits  # noqa: E402


@app.task(name="workers.sweep_tasks.sweep_fit_risk", ignore_result=True)
def sweep_fit_risk(sweep_id: int) -> None:
    """Compute and store the sweep's risk fit (``risk_fits.sweep_fit_risk``)."""
    close_old_connections()
    risk_fits.sweep_fit_risk(sweep_id=sweep_id)
