"""How long one early-stopping policy check of a big sweep takes: going on from the state the last check saved,
against feeding every stored point as every check did before (a check of 32 runs x 10 k steps in
< 0.2 s, of 64 runs x 100 k steps in < 1 s).

    .venv/bin/python bench/policy_check.py [--sizes 32x10000,64x100000] [--repeat 5] [--full-once-above 2000000]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/seedbed_bench_policy .venv/bin/python bench/policy_check.py

What and how: for each size (runs x steps) a sweep of running runs, each with ``steps`` points of the policy
metric (noisy saturating curves, as bench/sweep_dashboard.py draws them), is written into a fresh SQLite database
in a temporary $SEEDBED_HOME, or into the PostgreSQL database $DATABASE_URL names (it must hold no runs; each
size's sweep is deleted afterwards). The points go in as raw multi-row INSERTs, the rows the ingest service writes,
and the chart tier is rebuilt from them: a check of runs over 400 planned steps reads the tier's complete buckets
as its points (``policy_check._buckets_after``: 32-step buckets at 10 k steps, 256-step ones at 100 k; one new
step seldom completes one, and such a check reads nothing new). The plan's ``policy_step`` is set to the last
step, as if checks had kept up with the runs, and one check (``sweep_apply_policy``, no state yet: every point)
saves the state. Then ``--repeat`` times: one new step for every run (``run_metrics_append``), and on those same points

- full rebuild: ``policy_check(..., rebuild=True)``: a fresh policy fed every stored point (computing only);
- incremental: ``policy_check`` going on from the saved state (computing only, the same decisions: checked);
- whole check: ``sweep_apply_policy`` as the worker runs it: the incremental check, then the decisions, the
  plan's policy_step and the new state stored under the sweep's lock.

Each figure is the median of the repeats (a size of more than ``--full-once-above`` points runs the full rebuild
once: it takes long), timed in this process on the same data; the ratio is full rebuild / incremental. The policy
is the median rule with ``min_delta`` 1 (``--policy bayes``: the bayes rule with ``risk`` 1e-9), so that no run
is stopped and every check judges every run (stops only make later checks cheaper).

With ``--late-start W``, each size also times one check after its last run was started again from step 1 (a late
seed: a live run far behind holds the plan's policy_step where it was) while the others went ``W`` steps on: a
check replays the steps from policy_step to the newest, as the full replay does, so it grows with W.
"""
from __future__ import annotations

import argparse
import json
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
    """A sweep of ``runs`` running runs at ``steps`` steps whose checks kept up (policy_step = steps)."""
    from django.db import connection
    from django.utils import timezone

    from webapp.projects.services import default_project
    from webapp.runs.models import MetricPoint, Run, RunStatus
    from webapp.sweeps.models import Sweep, SweepPlan

    config = {"total_steps": steps + 1000, "preset": "grpo", "seed": 0}
    policy = {**POLICIES[policy_name], "metric": METRIC, "mode": "max", "max_steps": steps + 1000}
    sweep = Sweep.objects.create(project=default_project(), name=f"bench {runs}x{steps}", config=config,
                                 seeds=list(range(runs)), concurrency=runs, policy=policy)
    SweepPlan.objects.create(sweep=sweep, policy_step=steps)
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


def late_start(sweep, run_ids: list[int], window: int) -> tuple[float, float, int]:
    """The last run starts again from step 1 (its points discarded), the others go ``window`` steps on, the late
    one logs a step: (incremental check s, full rebuild s, points the incremental check read)."""
    from webapp.runs.models import Run
    from webapp.runs.services import run_discard_after, run_metrics_append
    from webapp.sweeps.models import SweepPlan
    from webapp.sweeps.policy_check import policy_check
    from webapp.sweeps.services import sweep_apply_policy

    run_discard_after(run_id=run_ids[-1], step=0)
    run_metrics_append(run_id=run_ids[-1], points=[(1, METRIC, 0.5)])
    sweep_apply_policy(sweep_id=sweep.pk)  # feeds every point (the discard), saves the state
    for run_id in run_ids[:-1]:
        last = Run.objects.get(pk=run_id).last_step
        run_metrics_append(run_id=run_id, points=[(s, METRIC, 0.5) for s in range(last + 1, last + window + 1)])
    run_metrics_append(run_id=run_ids[-1], points=[(2, METRIC, 0.5)])
    plan = SweepPlan.objects.get(sweep=sweep)
    t_inc, inc = timed(lambda: policy_check(sweep=sweep, plan=plan))
    t_full, full = timed(lambda: policy_check(sweep=sweep, plan=plan, rebuild=True))
    assert inc.rebuilt == "" and inc.decisions == full.decisions
    return t_inc, t_full, inc.points_read


def bench_size(runs: int, steps: int, repeat: int, full_once_above: int, late_window: int,
               policy_name: str = "median") -> dict:
    from webapp.runs.services import run_metrics_append
    from webapp.sweeps.models import SweepPlan
    from webapp.sweeps.policy_check import policy_check
    from webapp.sweeps.services import sweep_apply_policy

    rng = np.random.default_rng(0)
    t_seed, (sweep, run_ids) = timed(lambda: build_sweep(runs, steps, rng, policy_name))
    t_first, _ = timed(lambda: sweep_apply_policy(sweep_id=sweep.pk))
    full, incremental, whole, read = [], [], [], {}
    for k in range(1, repeat + 1):
        for run_id in run_ids:  # one new step of every run, through the ingest service
            run_metrics_append(run_id=run_id, points=[(steps + k, METRIC, 0.5 + rng.normal(0, 0.05))])
        plan = SweepPlan.objects.get(sweep=sweep)
        t_inc, inc = timed(lambda: policy_check(sweep=sweep, plan=plan))
        assert inc.rebuilt == "", inc.rebuilt
        incremental.append(t_inc)
        read["incremental"] = (inc.points_read, inc.points_reread)
        if k == 1 or runs * steps <= full_once_above:
            t_full, rebuilt = timed(lambda: policy_check(sweep=sweep, plan=plan, rebuild=True))
            assert rebuilt.decisions == inc.decisions
            full.append(t_full)
            read["full rebuild"] = (rebuilt.points_read, 0)
        t_whole, _ = timed(lambda: sweep_apply_policy(sweep_id=sweep.pk))
        whole.append(t_whole)
    state_bytes = len(json.dumps(SweepPlan.objects.get(sweep=sweep).policy_state))
    late = late_start(sweep, run_ids, late_window) if late_window else None
    sweep.delete()
    return {"seed": t_seed, "first": t_first, "full": full, "incremental": incremental, "whole": whole,
            "read": read, "state_bytes": state_bytes, "late": late}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="32x10000,64x100000", help="runs x steps, comma-separated")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--full-once-above", type=int, default=2_000_000,
                        help="above this many points the full rebuild is timed once, not --repeat times")
    parser.add_argument("--late-start", type=int, default=0, metavar="W",
                        help="also time a check with a late-started run while the others went W steps on")
    parser.add_argument("--policy", choices=sorted(POLICIES), default="median",
                        help="median (min_delta 1) or bayes (risk 1e-9): neither stops a run")
    args = parser.parse_args()
    setup_django()
    from django.db import connection

    from webapp.runs.models import Run

    if Run.objects.exists():
        raise SystemExit("the database already holds runs: give bench/policy_check.py a fresh, empty database")
    targets = {(32, 10_000): 0.2, (64, 100_000): 1.0}
    print(f"database: {connection.vendor}; policy {args.policy}; median of {args.repeat} checks, each after one new "
          "step of every run")
    header = (f"{'size':>12} {'points':>11} {'full rebuild':>13} {'incremental':>12} {'whole check':>12} "
              f"{'ratio':>7} {'target':>7}  read (incremental / full)")
    print(header)
    for size in args.sizes.split(","):
        runs, steps = (int(x) for x in size.lower().split("x"))
        r = bench_size(runs, steps, args.repeat, args.full_once_above, args.late_start, args.policy)
        full, inc, whole = (statistics.median(r[k]) for k in ("full", "incremental", "whole"))
        target = targets.get((runs, steps))
        verdict = "" if target is None else f"{'<' if whole < target else 'OVER'} {target:g} s"
        print(f"{runs:>5} x {steps:<6} {runs * steps:>11,} {full * 1000:>10.0f} ms {inc * 1000:>9.1f} ms "
              f"{whole * 1000:>9.1f} ms {full / inc:>6.0f}x {verdict:>9}  "
              f"{r['read']['incremental'][0]:,} (+{r['read']['incremental'][1]:,} again) / "
              f"{r['read']['full rebuild'][0]:,} points")
        once = f"the full rebuild timed once (over {args.full_once_above:,} points); " if len(r["full"]) == 1 else ""
        print(f"{'':>12} {once}seeded in {r['seed']:.0f} s; first check (no saved state: every point) "
              f"{r['first']:.1f} s; saved state {r['state_bytes'] / 1000:.1f} kB")
        if r["late"]:
            t_inc, t_full, n = r["late"]
            print(f"{'':>12} late start, the others {args.late_start} steps past policy_step: incremental "
                  f"{t_inc * 1000:.0f} ms ({n:,} points read), full rebuild {t_full * 1000:.0f} ms")


if __name__ == "__main__":
    main()
