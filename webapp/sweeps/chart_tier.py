"""The chart tier a sweep's curves are read at: what its charts draw, its live check replays
(``policy_check``) and its finished sweeps' history holds (``history``), all at one width (docs/architecture.md,
"Dashboards"). Read-only queries over ``runs.rollups`` and the stored points.
"""
from __future__ import annotations

from webapp.runs import rollups
from webapp.runs.models import MetricPoint, Run

__all__ = ["TARGET_BUCKETS", "bucket_width", "tier_width", "chart_points", "chart_buckets"]

TARGET_BUCKETS = 400       # per run and metric: ~800 drawn points per seed at most


def bucket_width(max_step: int, target: int = TARGET_BUCKETS) -> int:
    """A width that puts ``max_step`` steps into at most about ``target`` buckets and that a level of the metric
    tier tiles (``webapp.runs.rollups.display_width``).

    >>> bucket_width(100), bucket_width(10_000), bucket_width(100_000), bucket_width(0)
    (1, 32, 256, 1)
    """
    return rollups.display_width(max_step, target)


def tier_width(runs: dict[int, Run]) -> int:
    """The bucket width the sweep's charts read its curves at once its longest run has run its planned steps
    (``bucket_width``: 1, the raw points, up to 400 steps; 8 from 2,400 steps). Planned, not reached, so
    that a sweep is read at one width throughout (an extension may widen it)."""
    return bucket_width(max([max(run.total_steps, run.last_step) for run in runs.values()] or [0]))


def chart_points(metrics: list[str], runs: dict[int, Run]):
    """Every stored point of ``metrics`` of the sweep's runs, in the replay's order (step, run, metric)."""
    return (MetricPoint.objects.filter(run_id__in=list(runs), key__in=metrics, value__isnull=False)
            .order_by("step", "run_id", "key").values_list("run_id", "step", "value", "key")
            .iterator(chunk_size=5000))


def chart_buckets(metrics: list[str], runs: dict[int, Run], width: int) -> list[tuple]:
    """The chart tier's complete buckets of ``width`` steps of each run, as (run, the bucket's last step, its mean,
    metric), in the replay's order (step, run, metric). A live run's last bucket is fed once it is complete (its
    mean moves until then), an ended run's as it is."""
    rows = rollups.bucketed(run_ids=list(runs), keys=metrics, width=width)
    complete_to = {pk: rollups.NO_END if run.is_ended else run.last_step for pk, run in runs.items()}
    return sorted(((run_id, b[2], b[4] / b[3], key) for (run_id, key), buckets in rows.items() for b in buckets
                   if complete_to[run_id] >= (b[0] + 1) * width),
                  key=lambda point: (point[1], point[0], point[3]))
