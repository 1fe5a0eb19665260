"""How long the sweep dashboard takes to load a big sweep (32 seeds x 5 metrics x 10,000 steps: under 1 s).

    python bench/sweep_dashboard.py [--seeds 32] [--metrics 5] [--steps 10000] [--repeat 5]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/seedbed_bench python bench/sweep_dashboard.py

It builds the sweep in a fresh database (a temporary SQLite file by default; with $DATABASE_URL, that
PostgreSQL database, which it empties first), then times through Django's test client, logged in:

- the dashboard page itself (HTML, with the live tables rendered in; the curves come from the JSON endpoint);
- the live tables' htmx poll (runs with last/best values, decisions, alerts): the first in a process reads
  every point of the metric for the best values, later ones only the points stored since;
- the first JSON answer for one metric: every seed's curve bucketed on the server (min, max, mean per
  bucket);
- a live update (``since`` = each run's last bucket) after one more step of every run;
- switching to another metric;
- the forecasts the chart draws with its forecast box on (computed from the chart tier after the cache is cleared,
  then cached; the live tables' forecast columns read the same cached answer);
- applying the sweep's median policy (the first time from every stored point of its metric, then going on
  from the curves the check before saved: bench/policy_check.py times both).

It prints the median and worst of ``--repeat`` timings of each, the answer's size, and the rows it covers.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import timedelta

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchkit import setup_django  # noqa: E402  (bench/ is on sys.path: the script's folder)

METRICS = ["reward/mean", "accuracy", "entropy", "length/mean", "kl", "loss/policy", "grad_norm", "lr"]


def build_sweep(seeds: int, metrics: list[str], steps: int):
    """A finished sweep: ``seeds`` runs, each ``steps`` steps of every metric (noisy curves with spikes)."""
    import random

    from django.db import connection, transaction
    from django.utils import timezone

    from webapp.projects.services import default_project
    from webapp.runs import rollups
    from webapp.runs.models import MetricPoint, Run, RunStatus
    from webapp.sweeps.models import Sweep
    from webapp.sweeps.models import SweepPlan

    Sweep.objects.all().delete()
    config = {"total_steps": steps, "preset": "grpo", "seed": 0}
    policy = {"name": "median", "metric": "reward/mean", "mode": "max", "max_steps": steps}
    project = default_project()
    sweep = Sweep.objects.create(project=project, name="bench", config=config, seeds=list(range(seeds)),
                                 concurrency=8, policy=policy)
    SweepPlan.objects.create(sweep=sweep)
    start = timezone.now() - timedelta(seconds=steps)
    runs = Run.objects.bulk_create([
        Run(sweep=sweep, project=project, config={**config, "seed": s}, seed=s, status=RunStatus.RUNNING, started_at=start,
            last_step=steps, name=f"bench / seed {s}") for s in range(seeds)])
    table = MetricPoint._meta.db_table
    sql = f"INSERT INTO {table} (run_id, step, key, value, logged_at) VALUES (%s, %s, %s, %s, %s)"
    rng = random.Random(0)
    for run in runs:
        rows = []
        level = rng.uniform(0.2, 0.8)
        for key in metrics:
            for step in range(1, steps + 1):
                value = level * (1 - 0.5 ** (step / 500)) + rng.gauss(0, 0.05)
                if rng.random() < 1e-3:
                    value += 5.0  # a spike the downsampling must keep
                rows.append((run.pk, step, key, value, start + timedelta(seconds=step)))
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(sql, rows)  # raw rows with their own timestamps, then the run's chart tier
            rollups.rebuild_run(cursor, run_id=run.pk)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {table}")
    return sweep, runs


def timed(fn, repeat: int) -> tuple[list[float], object]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return times, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=32)
    parser.add_argument("--metrics", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    setup_django()
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from webapp.runs.models import MetricPoint

    metrics = METRICS[:args.metrics]
    t0 = time.perf_counter()
    sweep, runs = build_sweep(args.seeds, metrics, args.steps)
    rows = MetricPoint.objects.filter(run__sweep=sweep).count()
    print(f"database: {connection.vendor}; sweep of {args.seeds} seeds x {len(metrics)} metrics x {args.steps} steps "
          f"= {rows:,} stored points (built in {time.perf_counter() - t0:.0f} s)")

    user, _ = get_user_model().objects.get_or_create(username="bench", defaults={"is_staff": True})  # sees every project
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    base = f"/sweeps/{sweep.pk}/"

    def get(url):
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        return response

    from django.core.cache import cache

    cold_page, _ = timed(lambda: get(base), 1)  # the process's first request: imports, template compilation
    page_times, _ = timed(lambda: get(base), args.repeat)
    cache.clear()
    panel_cold, _ = timed(lambda: get(base + "panel/?metric=reward/mean"), 1)
    panel_times, _ = timed(lambda: get(base + "panel/?metric=reward/mean"), args.repeat)
    first_times, first = timed(lambda: get(base + "live.json?metric=reward/mean"), args.repeat)
    data = first.json()
    width = data["series"]["width"]
    n_buckets = sum(len(s["b"]) for s in data["series"]["runs"].values())
    # one more step for every run, then the live update from each run's last bucket
    from webapp.runs.services import run_metrics_append

    for r in runs:
        run_metrics_append(run_id=r.pk, points=[(args.steps + 1, k, 0.5) for k in metrics])
    since = ",".join(f"{rid}:{s['b'][-1] * width}" for rid, s in data["series"]["runs"].items())
    live_times, live = timed(lambda: get(base + f"live.json?metric=reward/mean&width={width}&since={since}"),
                             args.repeat)
    switch_times, _ = timed(lambda: get(base + f"live.json?metric={metrics[-1]}"), args.repeat)
    forecast_cold = []
    for _ in range(args.repeat):  # each a miss (computed from the chart tier), then the cached answer
        cache.clear()
        forecast_cold += timed(lambda: get(base + "forecast.json?metric=reward/mean"), 1)[0]
    forecast_times, forecast = timed(lambda: get(base + "forecast.json?metric=reward/mean"), args.repeat)
    from webapp.sweeps.services import sweep_apply_policy

    policy_times, _ = timed(lambda: sweep_apply_policy(sweep_id=sweep.pk), args.repeat)

    def line(name, times, extra=""):
        print(f"{name:<42} median {statistics.median(times) * 1000:7.0f} ms   worst {max(times) * 1000:7.0f} ms  {extra}")

    line("dashboard page, first request (cold)", cold_page)
    line("dashboard page (HTML)", page_times)
    line("live tables, first poll in a process (HTML)", panel_cold)
    line("live tables, next polls (HTML)", panel_times)
    line("first load of one metric (JSON)", first_times,
         f"{len(first.content) / 1e6:.2f} MB, {n_buckets:,} buckets of {width} steps for {args.seeds * args.steps:,} points")
    line("live update, 1 new step per run (JSON)", live_times, f"{len(live.content) / 1e3:.1f} kB")
    line("switch metric (JSON)", switch_times)
    line("forecasts, computed (JSON)", forecast_cold, f"{len(forecast.content) / 1e3:.1f} kB")
    line("forecasts, cached (JSON)", forecast_times)
    line("apply the median policy (worst: 1st, all points)", policy_times, f"{args.seeds * args.steps:,} points stored")
    total = statistics.median(page_times) + statistics.median(first_times)
    print(f"page + first curves: {total * 1000:.0f} ms ({'under' if total < 1 else 'OVER'} the 1 s target)")


if __name__ == "__main__":
    main()
