"""Compare any runs, across sweeps: their curves of one metric overlaid (step or wall-time axis, the app's
smoothing), a config diff that shows only the keys that differ, and a summary row per run: final (mean of the last
10 % of steps), smoothed final and best smoothed (the app's smoothing: the page recomputes them with the
browser's setting; the server's are for its default, debiased EMA 0.6), best bucket mean, mean over the run,
AUC, steps, wall time and compute (rank-seconds). ``/runs/compare/?ids=3,17,42&metric=reward/mean``.

The curves are read from the chart tier (``rollups.bucketed``: at most ``MAX_POINTS`` bucket means a run, however
long) and handed to the page in one JSON block; the page draws them (static/seedbed/compare.js)."""
from __future__ import annotations

import json
import math

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from webapp.projects.selectors import visible

from . import rollups
from .finals import final_window
from .models import MetricRollup, Run

MAX_RUNS = 20
MAX_ID = 2**63 - 1  # a primary key is a signed 64-bit integer (SQLite INTEGER, PostgreSQL bigint)
MAX_POINTS = 400
DEFAULT_EMA_WEIGHT = 0.6  # static/seedbed/smoothing.js SMOOTHING_DEFAULT


def as_id(text: str) -> int | None:
    """A primary key written in ASCII digits, 1 to ``MAX_ID``; None for anything else (``"²"`` passes
    ``str.isdigit`` but not ``int``; 23 digits pass ``int`` but not the database).

    >>> as_id("42"), as_id("²"), as_id("1" * 23), as_id("0"), as_id(str(MAX_ID))
    (42, None, None, None, 9223372036854775807)
    """
    if not (text.isascii() and text.isdigit()) or len(text) > 19:
        return None
    value = int(text)
    return value if 1 <= value <= MAX_ID else None


def parse_ids(text: str) -> tuple[list[int], str]:
    """Run ids from "3, 17 42" (commas or spaces), at most ``MAX_RUNS``; returns (ids, problem).

    >>> parse_ids("3, 17 42"), parse_ids("3, x")[1]
    (([3, 17, 42], ''), "ids: 'x' is not a run id")
    """
    ids = []
    for part in text.replace(",", " ").split():
        value = as_id(part)
        if value is None:
            return [], f"ids: {part[:20]!r} is not a run id"
        if value not in ids:
            ids.append(value)
    if len(ids) > MAX_RUNS:
        return [], f"ids: at most {MAX_RUNS} runs at once; got {len(ids)}"
    return ids, ""


def config_diff(configs: dict[int, dict]) -> list[dict]:
    """The config keys whose values differ between the runs, each with every run's value (as JSON text).

    >>> config_diff({1: {"lr": 1e-4, "seed": 0, "task": "x"}, 2: {"lr": 2e-4, "seed": 0, "task": "x"}})
    [{'key': 'lr', 'values': ['0.0001', '0.0002']}]
    """
    keys = sorted(set().union(*configs.values())) if configs else []
    out = []
    for key in keys:
        values = [json.dumps(cfg.get(key), sort_keys=True) for cfg in configs.values()]
        if len(set(values)) > 1:
            out.append({"key": key, "values": values})
    return out


def run_curve(run: Run, metric: str) -> dict:
    """One run's curve of ``metric`` in at most ``MAX_POINTS`` bucket means: steps, values, wall seconds since the
    run started, and ``sum`` (every finite point's value added up: the AUC with a step's width as the unit)."""
    width = max(1, math.ceil(max(run.last_step, 1) / MAX_POINTS))
    rows = rollups.bucketed(run_ids=[run.pk], keys=[metric], width=width).get((run.pk, metric), [])
    origin = run.first_step_at or run.started_at  # wall time from its first step (a wait before it is not training)
    started = origin.timestamp() if origin else None
    return {"x": [r[2] for r in rows], "y": [r[4] / r[3] if r[3] else None for r in rows],
            "t": [round(r[7] - started, 2) if started and r[7] is not None else None for r in rows],
            "sum": sum(r[4] for r in rows if r[3]) if any(r[3] for r in rows) else None}


def debiased_ema(values: list[float], weight: float) -> list[float]:
    """The app's default smoothing, as static/seedbed/smoothing.js draws it (TensorBoard's slider): m_t = w·m_{t-1}
    + (1-w)·x_t with m_0 = 0, s_t = m_t / (1 - w^t). (webapp.sweeps.policies.smoothing has the policies' own; a
    run does not reach into sweeps, and the tests check the two agree.)

    >>> [round(v, 4) for v in debiased_ema([0.0, 1.0], 0.5)], debiased_ema([2.0, 2.0], 0.6)
    ([0.0, 0.6667], [2.0, 2.0])
    """
    m, out = 0.0, []
    for t, x in enumerate(values, start=1):
        m = weight * m + (1 - weight) * x
        out.append(m / (1 - weight ** t) if weight else m)
    return out


def compute_seconds(seconds: float | None, config: dict) -> float | None:
    """Compute a run used: its wall time × its ranks (nproc_per_node × nnodes), in rank-seconds (GPU-seconds on a
    run of one GPU per rank).

    >>> compute_seconds(100.0, {"nproc_per_node": 4, "nnodes": 2}), compute_seconds(100.0, {}), compute_seconds(None, {})
    (800.0, 100.0, None)
    """
    if seconds is None:
        return None
    return seconds * int(config.get("nproc_per_node") or 1) * int(config.get("nnodes") or 1)


def summary_row(run: Run, curve: dict, mode: str) -> dict:
    """Final (the mean of the last 10 % of the steps), smoothed final and best smoothed (the curve's bucket means
    under the default smoothing, ``debiased_ema``), best of the bucket means, the mean over the whole run, AUC
    (Σ of the metric over its steps), steps, wall time and compute (``compute_seconds``)."""
    pairs = [(x, y) for x, y in zip(curve["x"], curve["y"]) if y is not None]
    tail = [y for x, y in pairs if x > run.last_step - final_window(run.last_step)]
    ys = [y for _, y in pairs]
    pick = max if mode == "max" else min
    smoothed = debiased_ema(ys, DEFAULT_EMA_WEIGHT)
    origin = run.first_step_at or run.started_at
    seconds = (run.ended_at or run.heartbeat_at or origin) - origin if origin else None
    seconds = seconds.total_seconds() if seconds else None
    return {"final": sum(tail) / len(tail) if tail else None, "best": pick(ys) if ys else None,
            "smoothed_final": smoothed[-1] if smoothed else None,
            "best_smoothed": pick(smoothed) if smoothed else None, "auc": curve.get("sum"),
            "mean": sum(ys) / len(ys) if ys else None, "steps": run.last_step, "total_steps": run.total_steps,
            "seconds": seconds, "compute": compute_seconds(seconds, run.config)}


@require_GET
def run_compare(request: HttpRequest) -> HttpResponse:
    # ?ids=3+17+42, or the runs table's selection (?run=3&run=17)
    ids, problem = parse_ids(" ".join([request.GET.get("ids", ""), *request.GET.getlist("run")]))
    metric = (request.GET.get("metric") or "reward/mean")[:100]
    mode = "min" if metric.startswith("loss") else "max"  # which end is best (the page's best smoothed too)
    runs = list(visible(Run.objects.select_related("sweep", "project"), request.user).filter(pk__in=ids)
                .order_by("pk"))
    missing = sorted(set(ids) - {r.pk for r in runs})  # not there, or not the user's to read: the same to them
    rows, curves = [], {}
    for run in runs:
        curves[run.pk] = {"name": f"run {run.pk} · {run.display_name}", **run_curve(run, metric)}
        rows.append({"run": run, **summary_row(run, curves[run.pk], mode)})
    unknown = ""
    if runs and not any(c["x"] for c in curves.values()):  # a typo, or a key logged later: say which
        logged = logged_keys([r.pk for r in runs])
        if logged and metric not in logged:
            unknown = f"no such metric: {metric}; these runs log {', '.join(logged[:12])}" + (
                ", …" if len(logged) > 12 else "")
    return render(request, "runs/compare.html", {
        "ids_text": " ".join(map(str, ids)), "metric": metric, "rows": rows, "problem": problem,
        "missing": missing, "diff": config_diff({r.pk: r.config for r in runs}), "curves": curves,
        "runs": runs, "mode": mode, "unknown_metric": unknown}, status=400 if problem else 200)


def logged_keys(run_ids: list[int]) -> list[str]:
    """The metric keys the runs logged, sorted: read from the chart tier's coarsest level (a row per run and key
    for any run under 8,192 steps)."""
    return sorted(set(MetricRollup.objects.filter(run_id__in=run_ids, width=rollups.WIDTHS[-1])
                      .values_list("key", flat=True).distinct()))
