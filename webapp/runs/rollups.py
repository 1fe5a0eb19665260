"""The pre-aggregated tier of metrics: every (run, key) curve kept also as buckets of 8, 32, 128, 512, 2048 and
8192 steps, each with its point count, sum, min, max, first and last step and the time of its last point.

Why a tier and not window queries over the raw points: a chart shows at most ~1,500 buckets, so a page over a
100 k-step run must read thousands of rows, not 100 k per metric; a GROUP BY over an index on (run, key, step)
still visits every point in the range (350-700 ms for 320 k points measured on the sweep page before). With the
tier a read picks the coarsest level that still gives the chart its resolution (at most 4 stored buckets per
drawn bucket), so a chart over any length reads 1,500-6,000 rows per series. Levels grow by 4 so that the
finest level reached (8) costs 1/8 of the raw rows, all levels together about 1/6, and ingest refreshes six
small ranges per flush.

Bucket b of width W holds the steps (b*W, (b+1)*W] (step 0 goes with bucket 0): b = (step - 1) / W in SQL's
integer division, which truncates towards 0 on SQLite and PostgreSQL alike (``bucket_of``). A bucket of a
coarser level is the union of 4 buckets of the level below, so a level is refreshed from the one below it, and
the finest from the raw points. Non-finite values (stored as null) are gaps: they count in no bucket.

The tier is exact and idempotent: a refresh recomputes the touched buckets from their source (delete, then
INSERT ... SELECT ... GROUP BY), so a point re-emitted for a step (an upsert) or discarded after a checkpoint
leaves no trace of its old value. Writes happen inside the ingest transaction (``runs.services``).
"""
from __future__ import annotations

from django.db import connection
from django.db.models import Count, F, IntegerField, Max, Min, Q, Sum
from django.db.models.functions import Cast

from .models import MetricPoint, MetricRollup

WIDTHS = (8, 32, 128, 512, 2048, 8192)   # each 4x the one before
FANOUT = 4
KEYS_PER_STATEMENT = 400                  # parameters per statement stay far under SQLite's and PostgreSQL's limits


def bucket_of(step: int, width: int) -> int:
    """The bucket of ``step`` at ``width``, as SQL computes (step - 1) / width (truncating towards 0).

    >>> bucket_of(1, 8), bucket_of(8, 8), bucket_of(9, 8), bucket_of(0, 8)
    (0, 0, 1, 0)
    """
    return (step - 1) // width if step > 0 else 0


def level_for(width: int) -> int | None:
    """The coarsest stored level whose buckets tile a display bucket of ``width`` steps (it divides it); None
    when no level does (the display is then built from the raw points).

    >>> level_for(1), level_for(8), level_for(96), level_for(256), level_for(100)
    (None, 8, 32, 128, None)
    """
    fitting = [w for w in WIDTHS if w <= width and width % w == 0]
    return fitting[-1] if fitting else None


def display_width(span: int, max_points: int) -> int:
    """A bucket width that shows ``span`` steps in at most about ``max_points`` buckets and that a stored level
    tiles: the smallest such width is rounded up to a multiple of the coarsest level not above it (so a read
    takes at most 4 stored buckets per drawn one). A width of 6 or 7 becomes the finest level's 8 (at most a
    quarter fewer buckets, read from the tier instead of 7 raw points each); smaller widths stay as they are (raw
    reads of at most 5 points per drawn bucket).

    >>> display_width(1_000, 1_500), display_width(7_000, 1_500), display_width(10_000, 1_500)
    (1, 5, 8)
    >>> display_width(100_000, 1_500)
    96
    """
    width = max(1, -(-span // max(1, max_points)))
    if width < WIDTHS[0] and 4 * width >= 3 * WIDTHS[0]:
        return WIDTHS[0]
    fitting = [w for w in WIDTHS if w <= width]
    if not fitting:
        return width
    level = fitting[-1]
    return -(-width // level) * level


def _tables():
    quote = connection.ops.quote_name
    return quote(MetricPoint._meta.db_table), quote(MetricRollup._meta.db_table)


def _epoch(column: str) -> str:
    """SQL for a timestamp column as seconds since 1970 (the tier keeps t_last as a number: a datetime costs a
    parse per row when read, and a sweep page reads tens of thousands of buckets)."""
    if connection.vendor == "postgresql":
        return f"EXTRACT(EPOCH FROM {column})::double precision"
    return f"(julianday({column}) - 2440587.5) * 86400.0"  # SQLite stores 'YYYY-MM-DD HH:MM:SS.ffffff' (UTC)


def refresh(cursor, *, run_id: int, keys: list[str] | None, first_step: int, last_step: int) -> None:
    """Recompute, at every level, the buckets of ``run_id``'s ``keys`` (None: every key) that hold steps in
    [``first_step``, ``last_step``], from the raw points (finest level) and from the level below (the others).

    One upsert per level (a bucket's row is replaced by its recomputed aggregates): a bucket whose points are all
    non-finite keeps a row with n = 0 and null aggregates, which SUM/MIN/MAX and the readers skip."""
    points, rollups = _tables()
    key_groups = [None] if keys is None else [keys[i:i + KEYS_PER_STATEMENT]
                                              for i in range(0, len(keys), KEYS_PER_STATEMENT)]
    replace = (" ON CONFLICT (run_id, width, key, bucket) DO UPDATE SET n = excluded.n, total = excluded.total, "
               "lo = excluded.lo, hi = excluded.hi, first_step = excluded.first_step, "
               "last_step = excluded.last_step, t_last = excluded.t_last")
    for group in key_groups:
        key_sql = "" if group is None else " AND key IN (" + ", ".join(["%s"] * len(group)) + ")"
        key_params = [] if group is None else list(group)
        lo, hi = bucket_of(first_step, WIDTHS[0]), bucket_of(last_step, WIDTHS[0])
        below = None
        for width in WIDTHS:
            if below is None:  # the finest level, from the raw points; a null value counts in no aggregate
                step_lo = lo * width + 1 if lo > 0 else 0
                cursor.execute(
                    f"INSERT INTO {rollups} (run_id, key, width, bucket, n, total, lo, hi, first_step, last_step, "
                    f"t_last) SELECT run_id, key, %s, (step - 1) / %s, COUNT(value), SUM(value), MIN(value), "
                    f"MAX(value), MIN(CASE WHEN value IS NOT NULL THEN step END), "
                    f"MAX(CASE WHEN value IS NOT NULL THEN step END), MAX(CASE WHEN value IS NOT NULL THEN "
                    f"{_epoch('logged_at')} END) FROM {points} WHERE run_id = %s AND step >= %s AND step <= %s" + key_sql
                    + " GROUP BY run_id, key, (step - 1) / %s" + replace,
                    [width, width, run_id, step_lo, (hi + 1) * width, *key_params, width])
            else:
                cursor.execute(
                    f"INSERT INTO {rollups} (run_id, key, width, bucket, n, total, lo, hi, first_step, last_step, "
                    f"t_last) SELECT run_id, key, %s, bucket / {FANOUT}, SUM(n), SUM(total), MIN(lo), MAX(hi), "
                    f"MIN(first_step), MAX(last_step), MAX(t_last) FROM {rollups} WHERE run_id = %s AND width = %s "
                    f"AND bucket >= %s AND bucket <= %s" + key_sql + f" GROUP BY run_id, key, bucket / {FANOUT}"
                    + replace,
                    [width, run_id, below, lo * FANOUT, hi * FANOUT + FANOUT - 1, *key_params])
            below = width
            lo, hi = lo // FANOUT, hi // FANOUT


def add_points(cursor, *, run_id: int, points: dict[tuple[int, str], float | None], logged_at) -> None:
    """Bring the tier up to date with a flush's ``points`` ({(step, key): value or None}, just stored).

    The common case, a flush of steps after everything stored for its keys (training appends), merges the
    flush's own aggregates into the buckets: count and sum added, min and max widened, at every level in one
    upsert. Otherwise (a step stored again, an out-of-order step) the touched buckets are recomputed from their
    source (``refresh``). Both are exact; the first costs one statement instead of one per level."""
    keys = sorted({key for _, key in points})
    first, last = min(step for step, _ in points), max(step for step, _ in points)
    _, rollups = _tables()
    stored_last = None
    for i in range(0, len(keys), KEYS_PER_STATEMENT):
        group = keys[i:i + KEYS_PER_STATEMENT]
        cursor.execute(f"SELECT MAX(last_step) FROM {rollups} WHERE run_id = %s AND width = %s AND key IN ("
                       + ", ".join(["%s"] * len(group)) + ")", [run_id, WIDTHS[-1], *group])
        found = cursor.fetchone()[0]
        stored_last = found if stored_last is None or (found is not None and found > stored_last) else stored_last
    if stored_last is not None and first <= stored_last:
        refresh(cursor, run_id=run_id, keys=keys, first_step=first, last_step=last)
        return
    rows = _aggregates(points)
    if not rows:
        return  # nothing finite: no bucket changes
    table = rollups
    if connection.vendor == "postgresql":
        least, greatest = "LEAST", "GREATEST"
    else:  # SQLite's scalar MIN/MAX return null when an argument is null: the stored side may be (n = 0)
        least, greatest = "MIN", "MAX"

    def widened(fn: str, column: str) -> str:
        return f"{column} = {fn}(COALESCE({table}.{column}, excluded.{column}), excluded.{column})"

    merge = (f" ON CONFLICT (run_id, width, key, bucket) DO UPDATE SET n = {table}.n + excluded.n, "
             f"total = COALESCE({table}.total, 0) + excluded.total, {widened(least, 'lo')}, {widened(greatest, 'hi')}, "
             f"{widened(least, 'first_step')}, {widened(greatest, 'last_step')}, {widened(greatest, 't_last')}")
    columns = "(run_id, key, width, bucket, n, total, lo, hi, first_step, last_step, t_last)"
    if connection.vendor == "postgresql":
        cursor.execute(
            f"INSERT INTO {table} {columns} SELECT %s, k, w, b, n, tot, lo, hi, f, l, %s FROM unnest(%s::varchar[], "
            f"%s::integer[], %s::integer[], %s::integer[], %s::double precision[], %s::double precision[], "
            f"%s::double precision[], %s::integer[], %s::integer[]) AS u(k, w, b, n, tot, lo, hi, f, l)" + merge,
            [run_id, logged_at.timestamp(), *[list(column) for column in zip(*rows)]])
        return
    per_statement = 2500 // 11
    for start in range(0, len(rows), per_statement):
        chunk = rows[start:start + per_statement]
        cursor.execute(f"INSERT INTO {table} {columns} VALUES "
                       + ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"] * len(chunk)) + merge,
                       [x for row in chunk for x in (run_id, *row, logged_at.timestamp())])


def _aggregates(points: dict[tuple[int, str], float | None]) -> list[tuple]:
    """The flush's own buckets at every level: (key, width, bucket, n, total, lo, hi, first_step, last_step),
    finite values only; each level from the one below."""
    level: dict[tuple[str, int], list] = {}
    for (step, key), value in points.items():
        if value is None:
            continue
        b = bucket_of(step, WIDTHS[0])
        agg = level.get((key, b))
        if agg is None:
            level[(key, b)] = [1, value, value, value, step, step]
        else:
            agg[0] += 1
            agg[1] += value
            agg[2], agg[3] = min(agg[2], value), max(agg[3], value)
            agg[4], agg[5] = min(agg[4], step), max(agg[5], step)
    rows = []
    for width in WIDTHS:
        rows += [(key, width, b, *agg) for (key, b), agg in level.items()]
        coarser: dict[tuple[str, int], list] = {}
        for (key, b), (n, total, lo, hi, first, last) in level.items():
            agg = coarser.get((key, b // FANOUT))
            if agg is None:
                coarser[(key, b // FANOUT)] = [n, total, lo, hi, first, last]
            else:
                agg[0] += n
                agg[1] += total
                agg[2], agg[3] = min(agg[2], lo), max(agg[3], hi)
                agg[4], agg[5] = min(agg[4], first), max(agg[5], last)
        level = coarser
    return rows


def discard_after(cursor, *, run_id: int, step: int) -> None:
    """After the raw points past ``step`` were deleted (a run resumed from its checkpoint at ``step``): drop the
    buckets from the one holding ``step`` on, then recompute the ones that straddle it from what is left (a key
    with no point left there gets no row back)."""
    _, rollups = _tables()
    for width in WIDTHS:
        cursor.execute(f"DELETE FROM {rollups} WHERE run_id = %s AND width = %s AND bucket >= %s",
                       [run_id, width, bucket_of(step, width)])
    refresh(cursor, run_id=run_id, keys=None, first_step=step, last_step=step)


def rebuild_run(cursor, *, run_id: int) -> None:
    """Every bucket of a run from its raw points (a migration's backfill; a repair)."""
    points, rollups = _tables()
    cursor.execute(f"DELETE FROM {rollups} WHERE run_id = %s", [run_id])
    cursor.execute(f"SELECT MIN(step), MAX(step) FROM {points} WHERE run_id = %s", [run_id])
    first, last = cursor.fetchone()
    if first is not None:
        refresh(cursor, run_id=run_id, keys=None, first_step=first, last_step=last)


# --- reading ------------------------------------------------------------------------------------------------

NO_END = 2**31 - 1  # steps are 32-bit integers in the table


def bucketed(*, run_ids: list[int], keys: list[str] | None, width: int, after: dict[int, int] | None = None,
             until: int | None = None) -> dict[tuple[int, str], list[list]]:
    """The points with ``after[run]`` < step <= ``until`` of each run's ``keys`` (None: all), in display buckets
    of ``width`` steps (bucket b = (step - 1) / width, as stored levels are aligned):
    ``{(run_id, key): [[b, first_step, last_step, n, total, lo, hi, t_last], ...]}`` ascending by b, t_last in
    seconds since 1970.

    Reads the coarsest stored level that tiles ``width`` for the level buckets that lie wholly inside the range,
    and the raw points only for the partial level buckets at its two ends (at most 2 x (level - 1) points per
    series), so each display bucket is exact; with no such level (``width`` < 8) it reads the raw points."""
    after = after or {}
    until = NO_END if until is None else until
    level = level_for(width)
    # The runs grouped by the ranges they ask for (usually one group: the whole curve of every run), each term of
    # the query naming the run, level and key, so that it is a range of the (run, width, key, bucket) index.
    tier_ranges: dict[tuple[int, int], list[int]] = {}
    raw_ranges: dict[tuple[int, int], list[int]] = {}
    for run_id in run_ids:
        lo = after.get(run_id, 0)
        if level is None:
            raw_ranges.setdefault((lo, until), []).append(run_id)
            continue
        first_full = -(-lo // level)                              # level bucket k holds steps (kL, (k+1)L]
        last_full = until // level - 1 if until != NO_END else NO_END // level
        if first_full > last_full:
            raw_ranges.setdefault((lo, until), []).append(run_id)
            continue
        tier_ranges.setdefault((first_full, last_full), []).append(run_id)
        raw_ranges.setdefault((lo, first_full * level), []).append(run_id)
        if until != NO_END:
            raw_ranges.setdefault(((last_full + 1) * level, until), []).append(run_id)
    key_terms = {} if keys is None else {"key__in": keys}
    rollup_q, raw_q = Q(pk__in=[]), Q(pk__in=[])
    for (a, b), ids in tier_ranges.items():
        rollup_q |= Q(run_id__in=ids, width=level, bucket__gte=a, bucket__lte=b, **key_terms)
    for (a, b), ids in raw_ranges.items():
        if a < b:
            raw_q |= Q(run_id__in=ids, step__gt=a, step__lte=b, **key_terms)
    out: dict[tuple[int, str], dict[int, list]] = {}

    def merge(run_id, key, b, first, last, n, total, lo, hi, t):
        buckets = out.setdefault((run_id, key), {})
        have = buckets.get(b)
        if have is None:
            buckets[b] = [b, first, last, n, total, lo, hi, t]
        else:
            have[1], have[2] = min(have[1], first), max(have[2], last)
            have[3], have[4] = have[3] + n, have[4] + total
            have[5], have[6] = min(have[5], lo), max(have[6], hi)
            have[7] = t if have[7] is None or (t is not None and t > have[7]) else have[7]

    if tier_ranges:
        rows = MetricRollup.objects.filter(rollup_q, n__gt=0)
        ratio = width // level
        for row in (rows.annotate(b=Cast(F("bucket") / ratio, IntegerField())).values("run_id", "key", "b")
                    .annotate(first=Min("first_step"), last=Max("last_step"), nn=Sum("n"), tot=Sum("total"),
                              mn=Min("lo"), mx=Max("hi"), t=Max("t_last"))
                    .values_list("run_id", "key", "b", "first", "last", "nn", "tot", "mn", "mx", "t")):
            merge(*row)
    points = MetricPoint.objects.filter(raw_q, value__isnull=False)
    bucket = Cast((F("step") - 1) / width, IntegerField())
    for row in (points.annotate(b=bucket).values("run_id", "key", "b")
                .annotate(first=Min("step"), last=Max("step"), nn=Count("value"), tot=Sum("value"),
                          mn=Min("value"), mx=Max("value"), t=Max("logged_at"))
                .values_list("run_id", "key", "b", "first", "last", "nn", "tot", "mn", "mx", "t")):
        merge(*row[:9], row[9].timestamp() if row[9] is not None else None)
    return {series: [buckets[b] for b in sorted(buckets)] for series, buckets in out.items()}
