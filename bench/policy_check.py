"""What the stateless early-stopping check of a big sweep costs: one replay from scratch of every stored point (or
chart-tier bucket) through the one simulator, and the average share of one core a sweep's checks take when they
are paced by that cost (``services.claim_policy_check``: the next check no sooner than ``policy_check.PACE``
times the last one's duration after it; target <= 10 % of one core at 32 runs x 10 k steps).

    .venv/bin/python bench/policy_check.py [--sizes 32x10000] [--repeat 3] [--window 60] [--policy median|bayes]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/seedbed_bench_policy .venv/bin/python bench/policy_check.py

What and how: for each size (runs x steps) a sweep of running runs, each with ``steps`` points of the policy
metric (noisy saturating curves, as bench/sweep_dashboard.py draws them), is written into a fresh SQLite database
in a temporary $SEEDBED_HOME, or into the PostgreSQL database $DATABASE_URL names (it must hold no runs; each
size's sweep is deleted afterwards). The points go in as raw multi-row INSERTs, the rows the ingest service writes,
and the chart tier is rebuilt from them: a check of runs over 400 planned steps reads the tier's complete buckets
as its points (32-step buckets at 10 k steps). Then

- replay: ``policy_check`` (computing only), the median of ``--repeat``, each after one new step of every run;
- whole check: ``sweep_apply_policy`` as the worker runs it (the replay, the note, the decisions stored);
- paced: for ``--window`` seconds every run logs a step every 0.1 s (``run_metrics_append``) and asks for a check
  as a flush does (``claim_policy_check``, then ``sweep_apply_policy`` when it is granted): the share of wall time
  spent in checks from the first granted check's start to the last one's (``paced``), and of this process's CPU
  time (SQLite runs in it; PostgreSQL's server time is not counted there, so the wall share is the figure gated).

The policy is the median rule with ``min_delta`` 1, so that no run is stopped and every check judges every run
(``--policy bayes``: the bayes rule with ``risk`` 1e-9, which stops a seed only when it is all but certain; each
check replays from the grace step on, as every live check does).
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchkit import setup_django  # noqa: E402  (bench/ is on sys.path: the script's folder)

METRIC = "reward/mean"


def insert_points(run_ids: list[int], steps: int, rng: np.random.Generator) -> None:
    """``steps`` points of the metric for each run: level * (1 - 0.5 ** (step / 500)) + noise."""
    from django.db import connection, transaction
    from django.utils import timezone

    from webapp.runs.models import MetricPoint

    insert = f"INSERT INTO {connection.ops.quote_name(MetricPoint._meta.db_table)} (run_id, step, key, value, logged_at)"
    now = timezone.now()
    step = np.arange(1, steps + 1)
    for run_id in run_ids:
        values = rng.uniform(0.4, 0.6) * (1 - 0.5 ** (step / 500)) + rng.normal(0, 0.05, steps)
        with transaction.atomic(), connection.cursor() as cursor:
            if connection.vendor == "postgresql":  # one statement of arrays, as runs.services does
                cursor.execute(f"{insert} SELECT %s, s, %s, v, %s FROM unnest(%s::integer[], %s::double precision[]) "
                               "AS p(s, v)", [run_id, METRIC, now, step.tolist(), values.tolist()])
            else:
                cursor.executemany(f"{insert} VALUES (%s, %s, %s, %s, %s)",
                                   [(run_id, s, METRIC, v, now) for s, v in zip(step.tolist(), values.tolist())])


POLICIES = {
    # min_delta 1: no run is stopped, every check judges every run
    "median": {"name": "median", "min_delta": 1.0},
    # risk tiny: no run of these alike curves is stopped, every check forecasts every run and judges it
    "bayes": {"name": "bayes", "risk": 1e-9},
}


def build_sweep(runs: int, steps: int, rng: np.random.Generator, policy_name: str = "median"):
    """A sweep of ``runs`` running runs at ``steps`` steps."""
    from django.db import connection
    from django.utils import timezone

    from webapp.projects.services import default_project
    from webapp.runs.models import MetricPoint, Run, RunStatus
    from webapp.sweeps.models import Sweep, SweepPlan

    config = {"total_steps": steps + 1000, "preset": "grpo", "seed": 0}
    policy = {**POLICIES[policy_name], "metric": METRIC, "mode": "max", "max_steps": steps + 1000}
    sweep = Sweep.objects.create(project=default_project(), name=f"bench {runs}x{steps}", config=config,
                                 seeds=list(range(runs)), concurrency=runs, policy=policy)
    SweepPlan.objects.create(sweep=sweep)
    created = Run.objects.bulk_create([
        Run(project=sweep.project, sweep=sweep, config={**config, "seed": s}, seed=s, status=RunStatus.RUNNING,
            started_at=timezone.now(), last_step=steps, name=f"bench / seed {s}") for s in range(runs)])
    insert_points([r.pk for r in created], steps, rng)
    from webapp.runs import rollups

    with connection.cursor() as cursor:  # the chart tier, as ingest keeps it: the check reads it for long runs
        for run in created:
            rollups.rebuild_run(cursor, run_id=run.pk)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {MetricPoint._meta.db_table}")
    return sweep, [r.pk for r in created]


def timed(fn):
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def paced(sweep, run_ids: list[int], first_step: int, window: float, rng: np.random.Generator) -> dict:
    """``window`` seconds of live runs: every 0.1 s each logs a step and asks for a check as a flush does. The share
    of a core the checks took in steady state: the seconds of every granted check but the last over the time from
    the first one's start to the last one's (each check's own interval, whole); and of this process's CPU."""
    from webapp.runs.services import run_metrics_append
    from webapp.sweeps.services import claim_policy_check, sweep_apply_policy

    start, step, starts, walls, cpus = time.perf_counter(), first_step, [], [], []
    while (now := time.perf_counter()) - start < window:
        step += 1
        for run_id in run_ids:
            run_metrics_append(run_id=run_id, points=[(step, METRIC, 0.5 + rng.normal(0, 0.05))])
        if claim_policy_check(sweep_id=sweep.pk):
            c0, w0 = time.process_time(), time.perf_counter()
            sweep_apply_policy(sweep_id=sweep.pk)
            starts.append(w0)
            cpus.append(time.process_time() - c0)
            walls.append(time.perf_counter() - w0)
        time.sleep(max(0.0, 0.1 - (time.perf_counter() - now)))  # (a bench's pace, not a test's wait)
    span = starts[-1] - starts[0] if len(starts) > 1 else math.nan
    return {"checks": len(starts), "wall_share": sum(walls[:-1]) / span, "cpu_share": sum(cpus[:-1]) / span}


def bench_size(runs: int, steps: int, repeat: int, window: float, policy_name: str = "median") -> dict:
    from webapp.runs.services import run_metrics_append
    from webapp.sweeps.models import SweepPlan
    from webapp.sweeps.policy_check import policy_check
    from webapp.sweeps.services import sweep_apply_policy

    rng = np.random.default_rng(0)
    t_seed, (sweep, run_ids) = timed(lambda: build_sweep(runs, steps, rng, policy_name))
    replays, whole, read = [], [], 0
    for k in range(1, repeat + 1):
        for run_id in run_ids:  # one new step of every run, through the ingest service
            run_metrics_append(run_id=run_id, points=[(steps + k, METRIC, 0.5 + rng.normal(0, 0.05))])
        plan = SweepPlan.objects.get(sweep=sweep)
        t_replay, check = timed(lambda: policy_check(sweep=sweep, plan=plan))
        replays.append(t_replay)
        read = check.points_read
        t_whole, _ = timed(lambda: sweep_apply_policy(sweep_id=sweep.pk))
        whole.append(t_whole)
    share = paced(sweep, run_ids, steps + repeat, window, rng) if window > 0 else None
    sweep.delete()
    return {"seed": t_seed, "replay": replays, "whole": whole, "read": read, "paced": share}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="32x10000", help="runs x steps, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--window", type=float, default=60.0, help="seconds of paced live checks (0: none)")
    parser.add_argument("--policy", choices=sorted(POLICIES), default="median",
                        help="median (min_delta 1: it stops no run) or bayes (risk 1e-9)")
    args = parser.parse_args()
    setup_django()
    from django.db import connection

    from webapp.runs.models import Run
    from webapp.sweeps.policy_check import PACE

    if Run.objects.exists():
        raise SystemExit("the database already holds runs: give bench/policy_check.py a fresh, empty database")
    target = 1 / PACE
    print(f"database: {connection.vendor}; policy {args.policy}; median of {args.repeat} checks, each after one new "
          f"step of every run; paced checks over {args.window:g} s (target <= {target:.0%} of one core)")
    print(f"{'size':>12} {'points':>11} {'replay':>10} {'whole check':>12} {'read':>8} {'checks':>7} "
          f"{'wall share':>11} {'cpu share':>10}")
    for size in args.sizes.split(","):
        runs, steps = (int(x) for x in size.lower().split("x"))
        r = bench_size(runs, steps, args.repeat, args.window, args.policy)
        replay, whole = statistics.median(r["replay"]), statistics.median(r["whole"])
        p = r["paced"] or {"checks": 0, "wall_share": math.nan, "cpu_share": math.nan}
        verdict = "" if r["paced"] is None else ("<= target" if p["wall_share"] <= target else "OVER target")
        print(f"{runs:>5} x {steps:<6} {runs * steps:>11,} {replay * 1000:>7.0f} ms {whole * 1000:>9.0f} ms "
              f"{r['read']:>8,} {p['checks']:>7} {p['wall_share']:>10.1%} {p['cpu_share']:>10.1%}  {verdict}")
        print(f"{'':>12} seeded in {r['seed']:.0f} s")


if __name__ == "__main__":
    main()
