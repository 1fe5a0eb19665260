"""The sweep dashboard's forecasts: each run's calibrated forecast of a metric's worth at its horizon, its 95 %
interval and P(near-best), as the ``bayes`` policy computes them, and the path the chart draws to it
(``policies.forecast_paths``: a bayes policy fed the curves through the one simulator,
``policies.simulator.bayes_numbers``, told the sweep's stored bayes stops; a stopped run shows the numbers of its
stop, frozen), clipped to the metric's range where it has one (``policies.metric_ranges``), for any sweep: with
the sweep's own bayes config when it has one, otherwise the bayes defaults (min_peers 1: every other run is a
peer) on the sweep's horizon, said plainly (``meaning``: no policy of that sweep decides on them).

Read from the chart tier, as the curves are (``rollups.bucketed`` at the chart's bucket width, ~400 points per run
at most: exact for runs of up to 400 steps, bucket means beyond, weighed as ``forecast_paths`` says), and cached
per sweep, metric and where its runs stand: their states, and their steps together counted in 1/400ths of the
sweep's planned steps, so a live sweep is forecast again 400 times over its life at most (a 5-seed sweep of 120
steps at every step; 32 seeds of 10,000 steps every 800 steps of all its runs together), not at every poll of a
dashboard (a miss on 32 runs x 10,000 steps costs about as much as the chart's first read of the same curves).
"""
from __future__ import annotations

import hashlib
import json
from typing import Optional

from django.core.cache import cache

from training.fields import FieldErrors
from webapp.runs import rollups
from webapp.runs.models import Run, RunStatus

from .history import finished_sweep_ids, project_history
from .models import Sweep
from .policies import parse_config
from .policies.decision import Decision
from .policies.forecast_paths import sweep_forecasts
from .policies.metric_ranges import metric_range
from .policies import prior
from .policies.parameters import BayesParams
from .policies.bayes import risk_source
from .policies.registry import learns_from_history
from .risk_fits import bayes_decides, stored_fit

CACHE_SECONDS = 3600
PROGRESS_STEPS = 400  # a sweep is forecast again each time its runs together ran 1/400 of its planned steps
VERSION = 7  # bump when the answer's shape or numbers change: older cached answers are then never read


def _round(x: Optional[float]) -> Optional[float]:
    return None if x is None else float(f"{x:.6g}")


def forecast_params(*, sweep: Sweep, metric: str, mode: str) -> BayesParams:
    """The bayes params the forecasts of ``metric`` use: the sweep's policy's (its tolerance, risk, half-life, peers)
    when it is a bayes policy, else the defaults with min_peers 1; the horizon is the policy's or the runs'."""
    max_steps = int(sweep.policy.get("max_steps") or sweep.config.get("total_steps") or 2)
    base = {"name": "bayes", "max_steps": max(2, max_steps), "min_peers": 1}
    if sweep.policy.get("name") in ("bayes", "auto"):  # (auto's keys are bayes's)
        base = {k: v for k, v in sweep.policy.items() if k != "guards"}
    try:
        return parse_config({**base, "name": "bayes", "metric": metric, "mode": mode})
    except FieldErrors:  # a stored config of an older version: the defaults still forecast
        return parse_config({"name": "bayes", "metric": metric, "mode": mode, "max_steps": max(2, max_steps),
                             "min_peers": 1})


def sweep_forecast(*, sweep: Sweep, metric: str, mode: str) -> dict:
    """``{"metric", "mode", "tolerance", "max_steps", "bayes": whether the sweep's policy is bayes, "policy": its
    name, "range": [low, high] of the metric (None where unbounded), "width": steps per point read, "runs": {run_id:
    {"final", "ci": [lo, hi], "p", "in_race", "at_stop", "path": {"x", "y", "lo", "hi"}}}}``: ``final`` the
    calibrated forecast worth (the median), ``ci`` its 95 % interval, ``p`` P(near-best); ``at_stop`` the step of
    the bayes stop whose frozen numbers these are; ``final``/``ci``/``p`` None and no path for a run out of the race
    (ended before its horizon, not by a bayes stop); ``path`` from its last step to its horizon, ending on ``final``
    and ``ci``. Cached (see the module's docstring)."""
    from .chart_tier import bucket_width

    params = forecast_params(sweep=sweep, metric=metric, mode=mode)
    runs = [(pk, attempts, last, int(total or 0), status, kill) for pk, attempts, last, total, status, kill in
            Run.objects.filter(sweep=sweep).order_by("pk").values_list(
                "pk", "attempts", "last_step", "config__total_steps", "status", "kill_requested_at")]
    width = bucket_width(max((r[2] for r in runs), default=0))
    # where the sweep stands: each run's state, and its progress in steps of 1/PROGRESS_STEPS of the planned total
    quantum = max(1, sum(max(total, params.max_steps) for _, _, _, total, _, _ in runs) // PROGRESS_STEPS)
    standing = [(pk, attempts, total, status, bool(kill)) for pk, attempts, _, total, status, kill in runs]
    progress = sum(last for _, _, last, _, _, _ in runs) // quantum
    learning = metric == sweep.policy.get("metric") and learns_from_history(sweep.policy)
    past = finished_sweep_ids(sweep) if learning else ()  # (the prior the policy learns: the same history)
    fit = stored_fit(sweep) if past else (False, None)  # (read, never computed here: risk_fits)
    deciding = metric == sweep.policy.get("metric") and bayes_decides(sweep.policy, fit[1])
    digest = hashlib.sha1(json.dumps([metric, repr(params), width, progress, standing, past, fit[0]]).encode()
                          ).hexdigest()
    key = f"seedbed:forecast:v{VERSION}:{sweep.pk}:{digest}"
    hit = cache.get(key)
    if hit is not None:
        return hit
    rows = rollups.bucketed(run_ids=[r[0] for r in runs if r[2] > 0], keys=[metric], width=width)
    curves = {run_id: [((b[1] + b[2]) / 2 if width > 1 else b[1], b[4] / b[3]) for b in buckets]
              for (run_id, _), buckets in rows.items()}
    horizons = {pk: max(total, params.max_steps) for pk, _, _, total, _, _ in runs}
    out_of_race = {pk for pk, _, last, total, status, kill in runs
                   if (status in (RunStatus.KILLED, RunStatus.FAILED, RunStatus.LOST) or kill)
                   and last < horizons[pk]}
    stops = {}
    if deciding:  # bayes's stops keep their frozen prediction
        for row in sweep.decisions.filter(action="stop", rule="bayes"):
            stops[row.run_id] = Decision(run_id=row.run_id, action=row.action, reason=row.reason, rule=row.rule,
                                         step=row.step, value=row.value, threshold=row.threshold,
                                         n_peers=row.n_peers, details=row.details)
    bounds = metric_range(metric, sweep.config)
    history = project_history(sweep, metric) if learning else None
    forecasts = sweep_forecasts(curves, params=params, horizons=horizons, out_of_race=out_of_race,
                                final_points=params.final_window() / width,
                                last_steps={run_id: rows[(run_id, metric)][-1][2] for run_id in curves}, stops=stops,
                                bounds=bounds, history=history)
    answer = {"metric": metric, "mode": mode, "tolerance": params.tolerance, "max_steps": params.max_steps,
              "risk": params.risk,
              "prior": prior.learn(history, 1.0 if params.mode == "max" else -1.0).source,
              "risk_source": risk_source(params, fit[1]) if deciding else None,
              "bayes": deciding, "policy": sweep.policy.get("name") or "manual",
              "range": list(bounds), "width": width, "runs": {}}
    for run_id, f in forecasts.items():
        answer["runs"][run_id] = {
            "final": _round(f.final.mean) if f.final else None,
            "ci": [_round(x) for x in f.final.ci] if f.final else None,
            "p": _round(f.probability), "in_race": f.final is not None, "at_stop": f.at_stop,
            "path": {"x": [round(p[0], 2) for p in f.path], "y": [_round(p[1]) for p in f.path],
                     "lo": [_round(p[2]) for p in f.path], "hi": [_round(p[3]) for p in f.path]}}
    cache.set(key, answer, CACHE_SECONDS)
    return answer


def meaning(answer: dict) -> str:
    """What the forecast columns and the chart's dashed paths mean, in plain words, for ``answer``
    (``sweep_forecast``'s)."""
    low, high = answer["range"]
    bounded = (f"; bounded by {answer['metric']}'s range [{'-inf' if low is None else f'{low:g}'}, "
               f"{'inf' if high is None else f'{high:g}'}]" if (low, high) != (None, None) else "")
    whose = (("the bayes policy's calibrated forecast" if answer["policy"] == "bayes" else
              f"the calibrated forecast of the bayes model {answer['policy']} runs") + ", the one its stops decide on"
             if answer["bayes"] else
             f"the bayes model's calibrated forecast; this sweep's policy ({answer['policy']}) does not decide on it")
    return (f"P(near-best) = the chance this seed ends within {answer['tolerance']:g} of the best seed's final, by "
            f"{whose}. Forecast worth: that forecast's median of the seed's final at its last step, with its 95 % "
            f"interval{bounded}, drawn from the {answer['prior']}; each dashed path on the chart ends on them. A seed the policy stopped keeps the "
            f"numbers of its stop (\"at its stop\"); a seed ended otherwise before its last step has none."
            + (f" It stops a seed while P(every near-best seed is stopped) stays under the level that kept the "
               f"realized loss within risk {answer['risk']:g} on {answer['risk_source']}." if answer.get("risk_source")
               else ""))


def row_forecast(f: Optional[dict], *, finished: bool) -> dict:
    """The runs table's forecast cells of one run from its entry in ``sweep_forecast``'s answer: ``forecast``,
    ``forecast_low``, ``forecast_high`` (None for a run that finished: its final is known), ``p_near_best`` and
    ``at_stop``."""
    f = f or {}
    ci = f.get("ci") or [None, None]
    known = f.get("final") is not None and not finished
    return {"forecast": f.get("final") if known else None, "forecast_low": ci[0] if known else None,
            "forecast_high": ci[1] if known else None, "p_near_best": f.get("p"), "at_stop": f.get("at_stop")}
