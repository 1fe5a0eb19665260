"""How long "what would policy X have done?" (the sweep's replay page, webapp/sweeps/what_if.py) takes on a finished
sweep of 32 runs x 1,000 steps, per policy, through Django's test client, and the same replay on every raw point
(what the 200-point cap saves).

    python bench/sweep_replay.py [--seeds 32] [--steps 1000] [--spread 0.01] [--repeat 3]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/seedbed_bench python bench/sweep_replay.py

The worst case for bayes is seeds whose levels differ by less than their noise (``--spread``, default 0.01): it
then stops few runs, so every tick compares every pair of runs. It prints the median and worst of ``--repeat``
timings of the page per policy, and, for bayes, the replay on every raw point for comparison.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchkit import setup_django  # noqa: E402  (bench/ is on sys.path: the script's folder)

POLICIES = {
    "bayes": "{}",
    "median": "{}",
    "asha": "{}",
    "threshold": '{"patience": 100}',
}


def build_sweep(seeds: int, steps: int, spread: float):
    """A finished sweep: ``seeds`` runs of ``steps`` steps of reward/mean, levels 0.5 +- ``spread``, noise sd 0.05."""
    import random

    from django.db import connection, transaction
    from django.utils import timezone

    from webapp.projects.services import default_project
    from webapp.runs import rollups
    from webapp.runs.models import MetricPoint, Run, RunStatus
    from webapp.sweeps.models import Sweep, SweepPlan

    Sweep.objects.all().delete()
    config = {"total_steps": steps, "preset": "grpo", "seed": 0}
    project = default_project()
    sweep = Sweep.objects.create(project=project, name="bench", config=config, seeds=list(range(seeds)),
                                 concurrency=seeds, policy={})
    SweepPlan.objects.create(sweep=sweep)
    runs = Run.objects.bulk_create([
        Run(sweep=sweep, project=project, config={**config, "seed": s}, seed=s, status=RunStatus.SUCCEEDED,
            last_step=steps, name=f"bench / seed {s}") for s in range(seeds)])
    sql = f"INSERT INTO {MetricPoint._meta.db_table} (run_id, step, key, value, logged_at) VALUES (%s, %s, %s, %s, %s)"
    rng, now = random.Random(0), timezone.now()
    for run in runs:
        level = 0.5 + rng.uniform(-spread, spread)
        rows = [(run.pk, t, "reward/mean", level * (1 - 0.5 ** (t / 100)) + rng.gauss(0, 0.05), now)
                for t in range(1, steps + 1)]
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(sql, rows)
            rollups.rebuild_run(cursor, run_id=run.pk)
    return sweep, runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=32)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--spread", type=float, default=0.01)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    setup_django()
    from django.contrib.auth import get_user_model
    from django.core.cache import cache
    from django.test import Client

    from webapp.sweeps.policies import replay

    sweep, runs = build_sweep(args.seeds, args.steps, args.spread)
    user, _ = get_user_model().objects.get_or_create(username="bench", defaults={"is_staff": True})
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    url = f"/sweeps/{sweep.pk}/replay/"
    print(f"finished sweep of {args.seeds} runs x {args.steps} steps (levels 0.5 +- {args.spread}, noise sd 0.05)")
    for name, params in POLICIES.items():
        times, html = [], ""
        for _ in range(args.repeat):
            cache.clear()
            t0 = time.perf_counter()
            response = client.get(url, {"policy_name": name, "policy_metric": "reward/mean", "policy_mode": "max",
                                        "policy_params": params})
            times.append(time.perf_counter() - t0)
            html = response.content.decode()
            assert response.status_code == 200, (name, response.status_code, html[-2000:])
        saved = html.split('data-saved="', 1)[1].split('"', 1)[0]
        stops = html.count("<tr data-run=")
        print(f"replay page, {name:<9s} median {statistics.median(times) * 1000:6.0f} ms   worst {max(times) * 1000:6.0f} ms"
              f"   saved {float(saved) * 100:.0f} %, {stops} runs stopped")
    # the same bayes replay on every raw point, as the page would without its cap
    from webapp.runs.models import MetricPoint

    curves = {}
    for run_id, step, value in (MetricPoint.objects.filter(run__sweep=sweep, key="reward/mean")
                                .order_by("run_id", "step").values_list("run_id", "step", "value")):
        curves.setdefault(run_id, []).append((step, value))
    t0 = time.perf_counter()
    result = replay({"name": "bayes", "metric": "reward/mean", "max_steps": args.steps}, curves,
                    concurrency=args.seeds)
    print(f"bayes on every raw point ({args.steps} per run): {(time.perf_counter() - t0) * 1000:.0f} ms, "
          f"saved {result.compute_saved * 100:.0f} %, {len(result.stopped_at)} runs stopped")


if __name__ == "__main__":
    main()
