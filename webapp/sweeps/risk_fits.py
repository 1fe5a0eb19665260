"""The ``bayes`` policy's risk level learned from a project's finished sweeps (``policies.history_risk``), as the
live check reads it: one fit per project, metric, policy keys and set of finished sweeps, stored
(``HistoryRiskFit``) so that every check and process reads the same one (docs/architecture.md, "Early
stopping").

A fit replays every complete finished sweep at level after level: far more than a check costs. So a check never
computes one: when none is stored for its history it decides with the built-in risk map (its decisions say so:
"the tuning sweeps") and sends ``workers.sweep_tasks.sweep_fit_risk`` to the maintenance worker, which computes it
outside any request and any row lock; the checks after it read it. A finished sweep's points no longer change,
so a fit stays true until the set of finished sweeps changes (then its key changes).
"""
from __future__ import annotations

import hashlib
import json
import time
from typing import Optional

from django.core.cache import cache
from django.db import IntegrityError, transaction

from .history import finished_sweep_ids, project_history
from .models import HistoryRiskFit, Sweep
from .policies import history_risk, replay
from .policies.history_risk import RiskFit
from .policies.registry import learns_from_history

__all__ = ["fit_key", "stored_fit", "check_fit", "sweep_fit_risk", "bayes_decides", "TASK", "FORMAT"]

TASK = "workers.sweep_tasks.sweep_fit_risk"
PENDING_S = 3600
"""A fit sent is not sent again for this long while it is not stored (a lost task is sent again after it)."""

_KEYS = ("metric", "mode", "tolerance", "min_peers", "risk")


FORMAT = 3
"""The fit's format, in its key: 2 keeps what each replay saved and the cuts (``auto`` chooses with them)."""


def fit_key(sweep: Sweep, ids: Optional[tuple[int, ...]] = None) -> str:
    """What a fit depends on: its format, the policy's keys that change a replay, and the finished sweeps (their
    ids)."""
    ids = finished_sweep_ids(sweep) if ids is None else ids
    policy = sweep.policy or {}
    return hashlib.sha256(json.dumps([FORMAT, [policy.get(k) for k in _KEYS], list(ids)]).encode()).hexdigest()


def _as_fit(row: HistoryRiskFit) -> Optional[RiskFit]:
    if not row.sweeps:
        return None
    return RiskFit(tuple((float(level), int(lost)) for level, lost, _ in row.lost), row.sweeps, row.risk,
                   saved=tuple(float(saved) for _, _, saved in row.lost),
                   cuts=tuple((float(at), float(keep), int(lost), float(saved)) for at, keep, lost, saved in row.cuts))


def bayes_decides(policy: dict, fit: Optional[RiskFit]) -> bool:
    """Whether the stops of a sweep of ``policy`` whose stored fit is ``fit`` are bayes's (a bayes policy, or an
    auto one that runs bayes: it chose it, or has no choice), so its forecasts are the numbers that decide."""
    name = (policy or {}).get("name")
    if name != "auto":
        return name == "bayes"
    choice = fit.choose(float(policy.get("risk", 0.05))) if fit is not None else None
    return choice is None or choice.rule == "bayes"


def stored_fit(sweep: Sweep) -> tuple[bool, Optional[RiskFit]]:
    """(whether a fit is stored for the sweep's history, that fit: None when its history has too few complete
    sweeps)."""
    row = HistoryRiskFit.objects.filter(project_id=sweep.project_id, key=fit_key(sweep)).first()
    return (row is not None, _as_fit(row) if row is not None else None)


def check_fit(sweep: Sweep, history) -> Optional[RiskFit]:
    """The fit a check of ``sweep`` uses: the stored one; else None (the built-in map) after sending the task that
    computes it, unless the history cannot have one (fewer than ``MIN_SWEEPS`` complete sweeps)."""
    found, fit = stored_fit(sweep)
    if found:
        return fit
    if sum(1 for s in history or () if history_risk.complete(s)) >= history_risk.MIN_SWEEPS:
        if cache.add(f"seedbed:riskfit:sent:{sweep.project_id}:{fit_key(sweep)}", 1, PENDING_S):
            from workers.port import send_on_commit

            send_on_commit(TASK, args=[sweep.pk], queue="maintenance")
    return None


def sweep_fit_risk(*, sweep_id: int) -> Optional[HistoryRiskFit]:
    """Compute and store the fit of the sweep's history (idempotent: a stored one is returned as it is). None when
    the sweep is gone or its policy is not ``bayes``."""
    sweep = Sweep.objects.filter(pk=sweep_id).first()
    if sweep is None or not learns_from_history(sweep.policy or {}):
        return None
    ids = finished_sweep_ids(sweep)
    key = fit_key(sweep, ids)
    row = HistoryRiskFit.objects.filter(project_id=sweep.project_id, key=key).first()
    if row is not None:
        return row
    started = time.monotonic()
    fit = history_risk.fit(project_history(sweep, sweep.policy["metric"]), sweep.policy, replay)
    values = {"sweeps": fit.n if fit else 0, "risk": float(sweep.policy.get("risk", 0.05)),
              "lost": [[level, lost, saved] for (level, lost), saved in zip(fit.lost, fit.saved)] if fit else [],
              "cuts": [list(cut) for cut in fit.cuts] if fit else [], "seconds": time.monotonic() - started}
    try:
        with transaction.atomic():
            return HistoryRiskFit.objects.create(project_id=sweep.project_id, key=key, **values)
    except IntegrityError:  # another process stored it meanwhile: the same replays, the same numbers
        return HistoryRiskFit.objects.get(project_id=sweep.project_id, key=key)
