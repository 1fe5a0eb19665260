"""Read queries for the sweep dashboard: bucketed curves of every seed, the runs table, decisions, alerts,
samples side by side, and the policy's next decision points.

Long series are downsampled in the database (docs/architecture.md#dashboards): steps fall into buckets of ``width`` consecutive
steps, bucket b = floor((step - 1) / width), and each bucket keeps its first and last step, its min, max and
mean, and the wall time of its last point. Drawing min and max per bucket keeps a one-step spike visible
however long the run; the mean feeds smoothing and the across-seeds band. The bucket width is fixed per page
load, so live updates (``since``) re-send only the last, possibly partial, bucket of each run onward.
"""
from __future__ import annotations

import json
from collections import Counter
from typing import Optional

from django.db.models import Count, Max, Min, Q, QuerySet

from webapp.runs import rollups
from webapp.runs.finals import final_window
from webapp.runs.models import ENDED_STATUSES, MetricPoint, MetricRollup, Run, RunStatus, Sample

from webapp.projects.selectors import visible
from . import forecasts, summary
from .chart_tier import TARGET_BUCKETS, bucket_width
from .policies.metric_ranges import metric_range
from .models import Alert, PolicyDecision, Sweep, SweepPlan
from .policies import make_policy
from .policies.budget import BudgetUse, committed_steps, steps_used

DEFAULT_METRIC = "reward/mean"
# Metrics for which smaller is better (the runs table's "best" column); everything else: larger is better.
LOWER_IS_BETTER = ("loss", "kl", "length", "step_time", "clip", "frac_zero_std", "grad_norm", "masked_frac")


def sweep_list(*, user, project: str | None = None) -> QuerySet[Sweep]:
    """The sweeps ``user`` may read, with their runs counted by status (optionally of one project)."""
    qs = visible(Sweep.objects.select_related("project"), user)
    if project:
        qs = qs.filter(project__name=project)
    return qs.annotate(
        n_runs=Count("runs"),  # (n_running counts runs that wait for the model build too: see sweep_list_rows)
        n_running=Count("runs", filter=Q(runs__status=RunStatus.RUNNING)),
        n_queued=Count("runs", filter=Q(runs__status=RunStatus.QUEUED)),
        n_killed=Count("runs", filter=Q(runs__status=RunStatus.KILLED)),
        n_succeeded=Count("runs", filter=Q(runs__status=RunStatus.SUCCEEDED)),
    )


def sweep_list_rows(*, user, limit: int = 200) -> list[Sweep]:
    """The sweeps list's first ``limit`` sweeps (``sweep_list``), each with ``n_waiting``: its runs a worker holds
    that wait for the built-in model's build (``runs.waiting.build_waits``, the label the runs list shows them
    with), counted out of ``n_running``."""
    from webapp.runs.waiting import build_waits

    sweeps = list(sweep_list(user=user)[:limit])
    maybe = list(Run.objects.filter(sweep_id__in=[s.pk for s in sweeps if s.n_running], status=RunStatus.RUNNING,
                                    last_step=0).only("pk", "sweep_id", "status", "last_step", "config"))
    waits = build_waits(maybe)
    waiting = Counter(run.sweep_id for run in maybe if run.pk in waits)
    for sweep in sweeps:
        sweep.n_waiting = waiting.get(sweep.pk, 0)
        sweep.n_running -= sweep.n_waiting
    return sweeps


def metric_mode(metric: str, sweep: Sweep) -> str:
    """"max" or "min": the policy's mode for the policy's metric, else guessed from the metric's name."""
    if sweep.policy.get("metric") == metric:
        return sweep.policy.get("mode", "max")
    return "min" if any(part in metric for part in LOWER_IS_BETTER) else "max"


def sweep_metric_keys(*, sweep_id: int, max_runs: int = 8) -> list[str]:
    """The metrics logged at step 1 by one run of each grid point (runs of one config log the same keys), sorted.
    Keys logged only now and then (eval/pass@k every eval_every steps) may be missing: the picker also takes
    a typed key. One small look-up per grid point instead of a scan of every point of the sweep."""
    plan = SweepPlan.objects.filter(sweep_id=sweep_id).first()
    grid = plan.grid if plan else {}
    representatives: dict[str, int] = {}
    for run in Run.objects.filter(sweep_id=sweep_id, last_step__gt=0).order_by("pk").only("pk", "config"):
        representatives.setdefault(repr(knobs_of(run, grid)), run.pk)
    keys: set[str] = set()
    for run_id in list(representatives.values())[:max_runs]:
        keys.update(MetricPoint.objects.filter(run_id=run_id, step=1).values_list("key", flat=True))
    return sorted(keys)


def sweep_series(*, sweep_id: int, metric: str, since: Optional[dict[int, int]] = None,
                 width: Optional[int] = None) -> dict:
    """Every run's curve of ``metric``, bucketed, after ``since[run_id]`` for the runs listed (all of it for
    the others):
    ``{"width": w, "runs": {run_id: {"b": [...], "first": [...], "last": [...], "lo": [...], "hi": [...],
    "avg": [...], "t": [...]}}}`` with ``t`` the seconds from the run's start to the bucket's last point.

    ``width`` None chooses one from the longest run (``bucket_width``). Points with a null value (NaN/inf)
    are gaps and left out.
    """
    # wall time counts from each run's first step (not from when a worker took it: a wait for a model build first
    # would shift its curve, and the mean across seeds with it)
    runs = {pk: first or started for pk, first, started in
            Run.objects.filter(sweep_id=sweep_id).values_list("pk", "first_step_at", "started_at")}
    if width is None:
        longest = Run.objects.filter(sweep_id=sweep_id).aggregate(m=Max("last_step"))["m"] or 0
        width = bucket_width(longest)
    since = {run_id: step for run_id, step in (since or {}).items() if run_id in runs}
    buckets = rollups.bucketed(run_ids=list(runs), keys=[metric], width=width, after=since)
    out: dict[int, dict[str, list]] = {}
    for (run_id, _), rows in sorted(buckets.items()):
        started = runs[run_id]
        out[run_id] = {
            "b": [r[0] for r in rows], "first": [r[1] for r in rows], "last": [r[2] for r in rows],
            "lo": [r[5] for r in rows], "hi": [r[6] for r in rows], "avg": [r[4] / r[3] for r in rows],
            "t": [round(r[7] - started.timestamp(), 3) if started and r[7] is not None else None for r in rows]}
    # the value at each answered run's last step (the table's "last"); its "best" is the max of the buckets'
    # hi (or min of lo), which the client keeps for the whole curve
    at_last = Q(pk__in=[])
    for run_id, s in out.items():
        at_last |= Q(run_id=run_id, step=s["last"][-1])
    tail = dict(MetricPoint.objects.filter(at_last, key=metric).values_list("run_id", "value"))
    for run_id, s in out.items():
        s["tail"] = tail.get(run_id)
    return {"width": width, "runs": out}


def knobs_of(run: Run, grid: dict) -> dict:
    return {knob: run.config.get(knob) for knob in grid}


def sweep_runs_table(*, sweep: Sweep) -> list[dict]:
    """The dashboard's runs table: seed, grid knobs, engine, status, steps, who stopped it. (The last and best
    value of the chosen metric come with its curve: ``sweep_series``' tail and bucket extremes.)"""
    plan = SweepPlan.objects.filter(sweep=sweep).first()
    grid = plan.grid if plan else {}
    from webapp.runs.waiting import build_waits

    runs = list(sweep.runs.order_by("pk"))
    waits = build_waits(runs)  # a run a worker holds that waits for the model build: "waiting", as the runs list
    rows = []
    for run in runs:
        rows.append({
            "id": run.pk, "uid": str(run.uid), "attempts": run.attempts, "name": run.display_name, "seed": run.seed,
            "knobs": knobs_of(run, grid),
            "engine": run.engine_label,
            "status": run.status, "ended": run.status in ENDED_STATUSES, "kill_requested": run.kill_requested_at is not None,
            "last_step": run.last_step, "total_steps": run.total_steps,
            "killed_by": run.killed_by, "kill_reason": run.kill_reason,
            "stopped_at_step": run.last_step if run.status == RunStatus.KILLED else None,
            "stalled_for_s": run.stalled_for_s, "stall_note": run.stall_note,  # (webapp.runs.stall)
            "build_wait": waits.get(run.pk, ""),
        })
    return rows


def sweep_run_values(*, sweep_id: int, metric: str, mode: str) -> dict[int, dict]:
    """Each run's last and best value of ``metric`` (the runs table): ``{run_id: {"last": v, "best": v}}``.

    The extremes come from the coarsest level of the metric tier (its buckets' min and max cover every finite
    point: a few rows per run, however long), the last value from the point at the run's last step."""
    runs = dict(Run.objects.filter(sweep_id=sweep_id).values_list("pk", "last_step"))
    extremes = {run_id: (lo, hi) for run_id, lo, hi in (
        MetricRollup.objects.filter(run_id__in=list(runs), key=metric, width=rollups.WIDTHS[-1], n__gt=0)
        .values("run_id").annotate(lo=Min("lo"), hi=Max("hi")).values_list("run_id", "lo", "hi"))}
    at_last = Q(pk__in=[])
    for run_id, last_step in runs.items():
        at_last |= Q(run_id=run_id, step=last_step)
    last = dict(MetricPoint.objects.filter(at_last, key=metric).values_list("run_id", "value"))
    return {run_id: {"last": last.get(run_id), "best": None if run_id not in extremes else
                     (extremes[run_id][0] if mode == "min" else extremes[run_id][1])} for run_id in runs}


def run_finals(*, runs: dict[int, tuple], metric: str) -> dict[int, Optional[float]]:
    """Each run's final value of ``metric``: the mean over its last 10 % of steps (``runs.finals.final_window``), read
    from the chart tier (``rollups.bucketed``: the stored buckets inside the window and the raw points at its
    edges). ``runs``: run id -> (uid, attempts, last step, ended). An ended run's final is cached (per run, attempt,
    metric and last step: a resumed run is read afresh); a live run's is read at every call."""
    from django.core.cache import cache

    out = {}
    for run_id, (uid, attempts, last_step, ended) in runs.items():
        if not last_step:
            out[run_id] = None
            continue
        key = f"seedbed:final:{uid}:{attempts}:{metric}:{last_step}"
        hit = cache.get(key, "miss") if ended else "miss"
        if hit != "miss":
            out[run_id] = hit
            continue
        width = final_window(last_step)
        rows = rollups.bucketed(run_ids=[run_id], keys=[metric], width=width, after={run_id: last_step - width},
                                until=last_step).get((run_id, metric), [])
        n, total = sum(r[3] for r in rows), sum(r[4] for r in rows)
        out[run_id] = total / n if n else None
        if ended:
            cache.set(key, out[run_id], 3600)
    return out


def sweep_decisions(*, sweep_id: int) -> list[dict]:
    return [{"id": d.pk, "run_id": d.run_id, "seed": d.run.seed, "action": d.action, "rule": d.rule, "step": d.step,
             "value": d.value, "threshold": d.threshold, "n_peers": d.n_peers, "extra_steps": d.extra_steps,
             "details": d.details or {},
             "reason": d.reason, "outcome": d.outcome, "note": d.note, "at": d.created_at.isoformat()}
            for d in PolicyDecision.objects.filter(sweep_id=sweep_id).select_related("run").order_by("created_at", "id")]


def sweep_alerts(*, sweep_id: int) -> list[dict]:
    """The RL-health alerts of the sweep's runs, then its runs' guard warnings (training.silent_run: e.g. reward 0
    for every sample of the first steps; training.reward_hacking)."""
    alerts = [{"id": a.pk, "run_id": a.run_id, "seed": a.run.seed, "kind": a.kind, "label": a.get_kind_display(),
               "metric": a.metric, "step": a.step, "value": a.value, "bound": a.bound, "message": a.message}
              for a in Alert.objects.filter(sweep_id=sweep_id).select_related("run").order_by("created_at", "id")]
    for run_id, seed, warnings in Run.objects.filter(sweep_id=sweep_id).exclude(warnings=[]).order_by("pk") \
            .values_list("pk", "seed", "warnings"):
        alerts += [{"id": None, "run_id": run_id, "seed": seed, "kind": w.get("kind"), "label": w.get("kind"),
                    "metric": "reward/mean", "step": w.get("step"), "value": None, "bound": None,
                    "message": w.get("message")} for w in warnings]
    return alerts


def next_decision_points(*, sweep: Sweep, runs: list[dict]) -> dict:
    """When the policy looks at each live run next, and why it cannot decide about it now (``Policy.waiting``:
    "waiting for peers at step 40: 2 of 3", "judged from step 8", queued): ``{"summary": text, "runs": {run_id:
    step or None}, "waiting": {run_id: text or None}}``. A run's peers are the sweep's other runs that started
    (a run the policy stopped counts up to the step of its stop)."""
    policy = make_policy(sweep.policy)
    live = [row for row in runs if not (row["ended"] or row["kill_requested"])]
    points = {row["id"]: policy.next_check(row["last_step"], row["total_steps"]) for row in live}
    stops = {run_id: (step, rule) for run_id, step, rule in
             PolicyDecision.objects.filter(sweep=sweep, action="stop").values_list("run_id", "step", "rule")}
    reached = {row["id"]: (min(row["last_step"], stops.get(row["id"], (row["last_step"],))[0]),
                           (row["ended"] or row["kill_requested"]) and row["last_step"] < row["total_steps"]
                           and stops.get(row["id"], (0, ""))[1] != policy.rule)
               for row in runs if row["last_step"] > 0 or row["status"] != RunStatus.QUEUED}
    waiting = {row["id"]: policy.waiting(row["last_step"], [r for run_id, r in reached.items() if run_id != row["id"]],
                                         queued=row["status"] == RunStatus.QUEUED) for row in live}
    return {"summary": policy.describe(), "runs": points, "waiting": waiting}


def sweep_live_state(*, sweep_id: int, metric: str, since: Optional[dict[int, int]] = None,
                     width: Optional[int] = None) -> dict:
    """What the dashboard's chart polls: new bucketed points, and each run's seed, status and who stopped it
    (the tables are server-rendered: ``sweep_panel``)."""
    sweep = Sweep.objects.get(pk=sweep_id)
    table = sweep_runs_table(sweep=sweep)
    return {
        "metric": metric,
        "mode": metric_mode(metric, sweep),
        "series": sweep_series(sweep_id=sweep_id, metric=metric, since=since, width=width),
        "runs": table,
        "ended": all(r["ended"] for r in table),
    }


def sweep_panel(*, sweep: Sweep, metric: str, viewer=None) -> dict:
    """The dashboard's live tables (templates/sweeps/_panel.html): the state, the runs with the last and best
    value of ``metric`` and their next decision point, what each queued run waits for (``queue_reason``: the run
    holding its slot, named where ``viewer`` may read it), the policy's decisions, the alerts; a live run whose
    ranking stop the budget withheld at the last check says why it is kept (``held``: ``SweepPlan.policy_held``)."""
    from webapp.runs.waiting import queue_reasons

    table = sweep_runs_table(sweep=sweep)
    reasons = queue_reasons(runs=list(sweep.runs.filter(status=RunStatus.QUEUED)), viewer=viewer)
    for row in table:
        row["queue_reason"] = reasons.get(row["id"], "")
    mode = metric_mode(metric, sweep)
    values = sweep_run_values(sweep_id=sweep.pk, metric=metric, mode=mode)
    finals = run_finals(runs={row["id"]: (row["uid"], row["attempts"], row["last_step"], row["ended"])
                              for row in table}, metric=metric)
    following = next_decision_points(sweep=sweep, runs=table)
    warnings, held = SweepPlan.objects.filter(sweep=sweep).values_list("warnings", "policy_held").first() or ([], {})
    # the bayes policy's forecast final and P(near-best) of every run (forecasts.py: cached with the chart's)
    forecast = forecasts.sweep_forecast(sweep=sweep, metric=metric, mode=mode)
    for row in table:
        row.update(values.get(row["id"], {}))
        row["final"] = finals.get(row["id"])
        # a run that reached its last step: its final, not a forecast of it
        row.update(forecasts.row_forecast(forecast["runs"].get(row["id"]),
                                          finished=row["status"] == RunStatus.SUCCEEDED))
        row["next_check"] = following["runs"].get(row["id"])
        row["waiting"] = following["waiting"].get(row["id"])
        live = not (row["ended"] or row["kill_requested"])
        row["held"] = (held or {}).get(str(row["id"])) if live else None
        row["knobs_text"] = " ".join(f"{k}={v}" for k, v in row["knobs"].items())
    return {
        "runs": table, "metric": metric, "mode": mode, "next_summary": following["summary"],
        "forecast_tolerance": forecast["tolerance"], "forecast_meaning": forecasts.meaning(forecast),
        # the decisions' forecasts are of the policy's metric: shown within its range (policies.metric_ranges)
        "decision_range": list(metric_range(sweep.policy.get("metric") or "", sweep.config)),
        "summary": summary.summarize(table, mode),  # (sorts the table: best final first)
        "decisions": sweep_decisions(sweep_id=sweep.pk), "alerts": sweep_alerts(sweep_id=sweep.pk),
        # the can-never-act note, for the slots free at the last check (services._update_policy_note)
        "warnings": warnings or [],
        "running": sum(r["status"] == RunStatus.RUNNING and not r["build_wait"] for r in table),
        "waiting": sum(bool(r["build_wait"]) for r in table),
        "queued": sum(r["status"] == RunStatus.QUEUED for r in table),
        "ended": all(r["ended"] for r in table),
    }


def sweep_sample_steps(*, sweep_id: int) -> list[int]:
    """Steps at which at least one run of the sweep stored samples, newest first."""
    return list(Sample.objects.filter(run__sweep_id=sweep_id).values_list("step", flat=True).distinct().order_by("-step"))


def sweep_samples_at(*, sweep_id: int, step: int, per_run: int = 4) -> list[dict]:
    """Sampled completions of ``step`` side by side: one column per run that stored samples there."""
    rows = (Sample.objects.filter(run__sweep_id=sweep_id, step=step, index__lt=per_run)
            .select_related("run").order_by("run_id", "index"))
    columns: dict[int, dict] = {}
    for s in rows:
        col = columns.setdefault(s.run_id, {"run_id": s.run_id, "seed": s.run.seed, "samples": []})
        col["samples"].append({"prompt": s.prompt, "completion": s.completion, "answer": s.answer,
                               "reward": s.reward, "details": s.details})
    return list(columns.values())


def sweep_parallel_dimensions(*, sweep: Sweep, metric: str) -> dict:
    """The sweep's parallel-coordinates plot (Plotly parcoords): one axis per config knob that differs between its
    runs (numbers as they are; other values as categories, their labels kept), the last axis each run's final
    value of ``metric`` (the mean of its last 10 % of steps, coloured by it). Runs without a final are left out."""
    from webapp.runs.compare import config_diff

    runs = list(sweep.runs.order_by("pk"))
    finals = run_finals(runs={r.pk: (str(r.uid), r.attempts, r.last_step, r.is_ended) for r in runs}, metric=metric)
    runs = [r for r in runs if finals.get(r.pk) is not None]
    dims = []
    for d in config_diff({r.pk: r.config for r in runs}):
        values = [r.config.get(d["key"]) for r in runs]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            dims.append({"label": d["key"], "values": values})
        else:
            labels = sorted({json.dumps(v, sort_keys=True) for v in values})
            dims.append({"label": d["key"], "values": [labels.index(json.dumps(v, sort_keys=True)) for v in values],
                         "tickvals": list(range(len(labels))), "ticktext": labels})
    dims.append({"label": f"final {metric}", "values": [finals[r.pk] for r in runs]})
    return {"runs": [r.pk for r in runs], "dimensions": dims}


def budget_use(sweep: Sweep, plan: SweepPlan) -> Optional[BudgetUse]:
    """What the sweep's runs have used of its budget (``policies.budget``: spent = steps every run has run,
    committed = the rest of the running and queued runs not being stopped); None without a budget."""
    if plan.budget is None:
        return None
    runs = list(sweep.runs.all())
    # a run that started, or ended other than killed in the queue, has used at least one step (steps_used)
    used = {run.pk: steps_used(run.last_step, started=run.started_at is not None or run.status in (
        RunStatus.FAILED, RunStatus.LOST, RunStatus.SUCCEEDED)) for run in runs}
    spent = sum(used.values())
    under_way = [(used[run.pk], run.total_steps) for run in runs
                 if run.status in (RunStatus.RUNNING, RunStatus.QUEUED) and run.kill_requested_at is None]
    return BudgetUse(budget_runs=plan.budget, run_steps=int(sweep.config.get("total_steps", 0)), spent=spent,
                     committed=committed_steps(under_way))
