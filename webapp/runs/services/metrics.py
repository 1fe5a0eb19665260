"""The metrics the training loop emits (through workers.sink.DatabaseSink), with the charts' tier kept in the same
transaction, and what a resumed run forgets (docs/architecture.md#where-state-lives)."""
from __future__ import annotations

import math
from datetime import timedelta

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from webapp.runs import rollups
from webapp.runs.models import MetricPoint, Run, Sample


def finite_or_none(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


METRIC_ROWS_PER_INSERT = 500  # 2,500 parameters a statement: under SQLite's and PostgreSQL's limits


@transaction.atomic
def run_metrics_append(*, run_id: int, points: list[tuple[int, str, float]]) -> int:
    """Bulk-insert (step, key, value) points; a point already stored for (run, key, step) is replaced."""
    if not points:
        return 0
    last = max(step for step, _, _ in points)
    # Plain SQL, many rows per statement (the ORM's objects and per-row round trips cost more than the database
    # itself), then the chart tier, in one transaction: a flush is stored whole or not at all.
    now = timezone.now()
    latest = {(step, key): finite_or_none(value) for step, key, value in points}  # one row per (key, step)
    stored_last = Run.objects.filter(pk=run_id).values_list("last_step", flat=True).first() or 0
    with connection.cursor() as cursor:
        if min(step for step, _ in latest) > stored_last:
            # steps after every stored one (training appends): a plain INSERT, cheaper than the upsert's
            # speculative insertion on PostgreSQL; should a point be there after all, the upsert does it
            try:
                with transaction.atomic():
                    _insert_points(cursor, run_id, latest, now, upsert=False)
            except IntegrityError:
                _insert_points(cursor, run_id, latest, now, upsert=True)
        else:
            _insert_points(cursor, run_id, latest, now, upsert=True)
        # the charts' tier: the buckets these points fall in, brought up to date in the same transaction
        rollups.add_points(cursor, run_id=run_id, points=latest, logged_at=now)
    if last > stored_last:  # the step advanced: the stall rule's clock and pace (webapp.runs.stall)
        Run.objects.filter(pk=run_id, last_step__lt=last).update(
            last_step=last, step_advanced_at=now, median_step_s=_median_step_s(run_id, last, now))
    if stored_last == 0:  # the run's first metrics: when its first step began (wall-time axes start there)
        first = min(step for step, _ in latest)
        took = latest.get((first, "step_time_s")) or 0.0
        Run.objects.filter(pk=run_id, first_step_at__isnull=True).update(
            first_step_at=now - timedelta(seconds=min(max(took, 0.0), 86_400.0)))
    return len(points)


def _median_step_s(run_id: int, last_step: int, now) -> float | None:
    """The run's median step time over its last ``stall.MEDIAN_WINDOW`` timed steps (``step_time_s``, just
    stored); for an engine that does not time its steps, the mean since its first step (``stall.median_step_s``)."""
    from webapp.runs import stall

    times = list(MetricPoint.objects.filter(run_id=run_id, key="step_time_s", value__isnull=False)
                 .order_by("-step").values_list("value", flat=True)[:stall.MEDIAN_WINDOW])
    first = None
    if not times:
        first_at = Run.objects.filter(pk=run_id).values_list("first_step_at", flat=True).first()
        first = (now - first_at).total_seconds() if first_at else None
    return stall.median_step_s(times, seconds_since_first_step=first, last_step=last_step)


def _insert_points(cursor, run_id: int, points: dict[tuple[int, str], float | None], now, *, upsert: bool) -> None:
    """One statement per flush on PostgreSQL (three arrays: psycopg parses a query of thousands of placeholders
    slower than PostgreSQL inserts the rows), 500-row VALUES on SQLite; ``upsert``: a point already stored for
    (run, key, step) is replaced (a resumed run repeats the steps after its checkpoint; run_discard_after already
    dropped what an interrupted attempt left after it)."""
    table = connection.ops.quote_name(MetricPoint._meta.db_table)
    conflict = (" ON CONFLICT (run_id, key, step) DO UPDATE SET value = excluded.value, logged_at = excluded.logged_at"
                if upsert else "")
    if connection.vendor == "postgresql":
        cursor.execute(
            f"INSERT INTO {table} (run_id, step, key, value, logged_at) SELECT %s, s, k, v, %s "
            f"FROM unnest(%s::integer[], %s::varchar[], %s::double precision[]) AS p(s, k, v)" + conflict,
            [run_id, now, [s for s, _ in points], [k for _, k in points], list(points.values())])
        return
    rows = [(s, k, v) for (s, k), v in points.items()]
    for start in range(0, len(rows), METRIC_ROWS_PER_INSERT):
        chunk = rows[start:start + METRIC_ROWS_PER_INSERT]
        cursor.execute(f"INSERT INTO {table} (run_id, step, key, value, logged_at) VALUES "
                       + ", ".join(["(%s, %s, %s, %s, %s)"] * len(chunk)) + conflict,
                       [x for s, k, v in chunk for x in (run_id, s, k, v, now)])


@transaction.atomic
def run_discard_after(*, run_id: int, step: int) -> None:
    """Forget metrics and samples after ``step`` (a resumed run restarts from its checkpoint at ``step``)."""
    MetricPoint.objects.filter(run_id=run_id, step__gt=step).delete()
    with connection.cursor() as cursor:
        rollups.discard_after(cursor, run_id=run_id, step=step)
    Sample.objects.filter(run_id=run_id, step__gt=step).delete()
    Run.objects.filter(pk=run_id).update(last_step=step)
