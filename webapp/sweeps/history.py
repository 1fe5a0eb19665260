"""What a project's finished sweeps recorded of a metric: the history the ``bayes`` policy learns its prior from
(``policies.prior``; docs/architecture.md, "Early stopping"). The live check and the dashboard's forecasts read
the same history, so the numbers shown are the ones that decide.

A finished sweep is one of the same project, not the sweep being judged, whose runs have all ended (none queued or
running); the newest ``HISTORY_SWEEPS`` of them count. Each is read as its charts read it (``chart_tier``:
every stored point up to 400 planned steps, the complete buckets' means beyond), run id -> [(step, value)], runs
stopped early included. A finished sweep's points no longer change, so the history of a set of sweeps is
kept in the process (``_CACHE``) and each check costs one query for the set.
"""
from __future__ import annotations

from collections import OrderedDict

from webapp.runs.models import RunStatus

from .chart_tier import chart_buckets, chart_points, tier_width
from .models import Sweep

__all__ = ["HISTORY_SWEEPS", "finished_sweep_ids", "project_history"]

HISTORY_SWEEPS = 30
"""The newest finished sweeps of a project that the prior learns from."""

_CACHE: "OrderedDict[tuple, list]" = OrderedDict()


def finished_sweep_ids(sweep: Sweep) -> tuple[int, ...]:
    """The newest ``HISTORY_SWEEPS`` finished sweeps of ``sweep``'s project other than it (newest first)."""
    return tuple(Sweep.objects.filter(project_id=sweep.project_id, runs__isnull=False)
                 .exclude(pk=sweep.pk).exclude(runs__status__in=(RunStatus.QUEUED, RunStatus.RUNNING))
                 .distinct().order_by("-pk").values_list("pk", flat=True)[:HISTORY_SWEEPS])


def project_history(sweep: Sweep, metric: str) -> list[dict]:
    """The finished sweeps of ``sweep``'s project: for each, run id -> [(step, value)] of ``metric`` (sweeps that
    never logged it left out)."""
    ids = finished_sweep_ids(sweep)
    key = (ids, metric)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    history = []
    for past in Sweep.objects.filter(pk__in=ids).prefetch_related("runs").order_by("-pk"):
        runs = {run.pk: run for run in past.runs.all()}
        width = tier_width(runs)
        curves: dict[int, list] = {}
        for run_id, step, value, _ in (chart_points([metric], runs) if width == 1 else chart_buckets([metric], runs, width)):
            curves.setdefault(run_id, []).append((int(step), float(value)))
        if curves:
            history.append(curves)
    _CACHE[key] = history
    while len(_CACHE) > 16:
        _CACHE.popitem(last=False)
    return history
