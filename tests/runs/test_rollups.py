"""The pre-aggregated metric tier (webapp.runs.rollups) against the raw points it summarises: every level's
buckets equal a recomputation from the stored points after random flushes, re-emitted steps, non-finite values
and a resume that discards the tail; the charts' reads over the tier equal a bucketing of the raw points, edges
of a zoomed range included; a one-step spike is in its bucket's max at every level."""
from __future__ import annotations

import math
import random

import pytest

from webapp.runs import rollups, selectors, services
from webapp.runs.models import MetricPoint, MetricRollup

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def stored(run_id: int) -> dict[str, dict[int, float | None]]:
    out: dict[str, dict[int, float | None]] = {}
    for key, step, value in MetricPoint.objects.filter(run_id=run_id).values_list("key", "step", "value"):
        out.setdefault(key, {})[step] = value
    return out


def expected_level(points: dict[str, dict[int, float | None]], width: int) -> dict[tuple, tuple]:
    """Each bucket of ``width`` recomputed in Python from the raw points (finite values only)."""
    buckets: dict[tuple, list] = {}
    for key, series in points.items():
        for step, value in series.items():
            if value is None:
                continue
            buckets.setdefault((key, rollups.bucket_of(step, width)), []).append((step, value))
    return {b: (len(v), sum(x for _, x in v), min(x for _, x in v), max(x for _, x in v),
                min(s for s, _ in v), max(s for s, _ in v)) for b, v in buckets.items()}


def tier(run_id: int, width: int) -> dict[tuple, tuple]:
    return {(r.key, r.bucket): (r.n, r.total, r.lo, r.hi, r.first_step, r.last_step)
            for r in MetricRollup.objects.filter(run_id=run_id, width=width, n__gt=0)}


def assert_tier_matches(run_id: int) -> None:
    points = stored(run_id)
    logged = {(key, step): at.timestamp() for key, step, at in
              MetricPoint.objects.filter(run_id=run_id, value__isnull=False).values_list("key", "step", "logged_at")}
    for width in rollups.WIDTHS:
        want, got = expected_level(points, width), tier(run_id, width)
        assert got.keys() == want.keys(), f"width {width}: buckets differ"
        t_last = {(r.key, r.bucket): r.t_last for r in MetricRollup.objects.filter(run_id=run_id, width=width, n__gt=0)}
        for b, (n, total, lo, hi, first, last) in want.items():
            g = got[b]
            assert (g[0], g[2], g[3], g[4], g[5]) == (n, lo, hi, first, last), f"width {width} bucket {b}"
            assert math.isclose(g[1], total, rel_tol=1e-9, abs_tol=1e-9), f"width {width} bucket {b} sum"
            newest = max(logged[(b[0], s)] for s in range(first, last + 1) if (b[0], s) in logged)
            assert math.isclose(t_last[b], newest, abs_tol=1e-3), f"width {width} bucket {b} time"


def test_every_level_equals_the_raw_points_after_flushes_rewrites_and_a_resume(config):
    rng = random.Random(7)
    run = services.run_create(config=config)
    step = 0
    while step < 3000:
        n = rng.choice([1, 7, 40, 333])
        points = []
        for s in range(step + 1, step + n + 1):
            points.append((s, "reward/mean", rng.random()))
            if s % 10 == 0:  # a sparse key: an eval every 10 steps
                points.append((s, "eval/pass@1", rng.random()))
            if rng.random() < 0.01:
                points.append((s, "grad_norm", float("nan")))  # a gap, in no bucket
        services.run_metrics_append(run_id=run.pk, points=points)
        step += n
    assert_tier_matches(run.pk)
    # a step re-emitted with another value (the upsert replaces it) and a spike
    services.run_metrics_append(run_id=run.pk, points=[(1000, "reward/mean", 50.0), (2047, "reward/mean", -9.0)])
    assert_tier_matches(run.pk)
    # a resume from the checkpoint at step 1234: the tail is discarded, then training goes on
    services.run_discard_after(run_id=run.pk, step=1234)
    assert_tier_matches(run.pk)
    assert MetricRollup.objects.filter(run=run, last_step__gt=1234).count() == 0
    services.run_metrics_append(run_id=run.pk, points=[(s, "reward/mean", 0.5) for s in range(1235, 1400)])
    assert_tier_matches(run.pk)


def test_rebuild_from_scratch_gives_the_same_tier(config):
    from django.db import connection

    run = services.run_create(config=config)
    services.run_metrics_append(run_id=run.pk, points=[(s, "kl", s % 17 / 10) for s in range(1, 2500)])
    before = {w: tier(run.pk, w) for w in rollups.WIDTHS}
    with connection.cursor() as cursor:
        rollups.rebuild_run(cursor, run_id=run.pk)
    assert {w: tier(run.pk, w) for w in rollups.WIDTHS} == before


def python_buckets(series: dict[int, float | None], width: int, lo: int, hi: int) -> dict[int, tuple]:
    """Display buckets of the finite points in (lo, hi]: last step, mean, min, max."""
    buckets: dict[int, list] = {}
    for step, value in series.items():
        if lo < step <= hi and value is not None:
            buckets.setdefault(rollups.bucket_of(step, width), []).append((step, value))
    return {b: (max(s for s, _ in v), sum(x for _, x in v) / len(v), min(x for _, x in v), max(x for _, x in v))
            for b, v in buckets.items()}


@pytest.mark.parametrize("lo,hi,max_points", [(0, None, 1500), (0, None, 40), (333, 20_001, 50), (9_999, 10_457, 3),
                                              (1, 90, 20)])
def test_chart_reads_equal_a_bucketing_of_the_raw_points(config, lo, hi, max_points):
    rng = random.Random(lo)
    run = services.run_create(config=config)
    points = [(s, k, rng.gauss(0, 1)) for s in range(1, 24_001) for k in ("reward/mean", "entropy")]
    points.append((17_777, "spike", 1e6))
    points += [(s, "spike", 0.0) for s in range(1, 24_001, 3)]
    for i in range(0, len(points), 5000):
        services.run_metrics_append(run_id=run.pk, points=points[i:i + 5000])
    answer = selectors.run_metrics_bucketed(run_id=run.pk, since_step=lo, until_step=hi, max_points=max_points)
    width = answer["width"]
    raw = stored(run.pk)
    for key, series in answer["series"].items():
        want = python_buckets(raw[key], width, lo, hi or 10**9)
        assert len(series["step"]) == len(want) <= max_points + 2
        for i, b in enumerate(sorted(want)):
            last, mean, mn, mx = want[b]
            assert series["step"][i] == last and series["min"][i] == mn and series["max"][i] == mx
            assert math.isclose(series["value"][i], mean, rel_tol=1e-9, abs_tol=1e-12)
    if lo < 17_777 <= (hi or 10**9):
        assert max(answer["series"]["spike"]["max"]) == 1e6  # the one-step spike stays visible
    if width > 1:
        assert rollups.level_for(width) is not None or width < rollups.WIDTHS[0]


def test_a_zoom_to_a_narrow_range_returns_exactly_the_stored_points(config):
    run = services.run_create(config=config)
    services.run_metrics_append(run_id=run.pk, points=[(s, "reward/mean", s / 7) for s in range(1, 100_001, 1)])
    view = selectors.run_series_range(run_id=run.pk, keys=["reward/mean"], from_step=41_000, to_step=41_999)
    s = view["reward/mean"]
    assert s["width"] == 1 and s["x"] == list(range(41_000, 42_000))
    assert s["y"] == [x / 7 for x in range(41_000, 42_000)]
    whole = selectors.run_metrics_bucketed(run_id=run.pk, max_points=1500)
    assert whole["width"] == 96 and len(whole["series"]["reward/mean"]["step"]) <= 1500


def test_reads_take_rows_in_proportion_to_what_is_drawn(config):
    """A 100 k-step run is read through the tier: the rows fetched are the drawn buckets' level rows."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    run = services.run_create(config=config)
    services.run_metrics_append(run_id=run.pk, points=[(s, "x", 1.0) for s in range(1, 100_001)])
    with CaptureQueriesContext(connection) as queries:
        answer = selectors.run_metrics_bucketed(run_id=run.pk, max_points=1500)
    assert len(answer["series"]["x"]["step"]) == math.ceil(100_000 / 96)
    sql = " ".join(q["sql"] for q in queries.captured_queries)
    assert MetricRollup._meta.db_table in sql


def test_a_flush_that_looks_like_an_append_but_is_not_still_replaces_points_exactly(config):
    """The append fast paths (plain INSERT, additive tier) trust the run's last step; should it be behind what is
    stored, the points are still replaced once and the tier stays exact."""
    from webapp.runs.models import Run

    run = services.run_create(config=config)
    services.run_metrics_append(run_id=run.pk, points=[(s, "x", 1.0) for s in range(1, 101)])
    Run.objects.filter(pk=run.pk).update(last_step=50)  # behind the stored points
    services.run_metrics_append(run_id=run.pk, points=[(s, "x", 2.0) for s in range(60, 121)])
    assert stored(run.pk)["x"] == {**{s: 1.0 for s in range(1, 60)}, **{s: 2.0 for s in range(60, 121)}}
    assert_tier_matches(run.pk)
