"""The run page's charts at size, checked by what Plotly drew (gd.calcdata), not by the arrays handed to it: a
100,000-step run is drawn as at most 1,500 buckets with its one-step spike in the band's max; zooming into 1 % of
the range draws every stored point there; a point stored while the page is open is drawn within a poll, merged
into the last bucket (or opening the next) so the chart keeps its resolution; the
metrics beyond the important charts are neither sent nor drawn until their chart is scrolled into view, then grow
live like the others."""
from __future__ import annotations

import pytest
from django.utils import timezone

from tests.conftest import log_in, tiny_config, wait_for
from webapp.projects.services import default_project
from webapp.runs import rollups, services
from webapp.runs.models import Run, RunStatus

pytestmark = [pytest.mark.django_db(transaction=True)]

STEPS, SPIKE_AT, SPIKE = 100_000, 50_003, 9.5


def drawn(page, chart: int | str, meta: str = "line") -> list[list[float]]:
    """The (x, y) points Plotly computed for the chart's first trace of that kind (what it drew)."""
    return page.evaluate(
        """([id, meta]) => { const gd = document.getElementById(id);
            if (!gd.data || !gd.calcdata) return [];
            const i = gd.data.findIndex(t => t.meta === meta);
            return i < 0 ? [] : gd.calcdata[i].map(p => [p.x, p.y]); }""",
        [f"chart-{chart}" if isinstance(chart, int) else chart, meta])


def test_a_long_run_is_bucketed_zooms_to_full_resolution_and_grows_live(live_server, django_user_model,
                                                                        browser_page, model_dir):
    # made as a worker would leave it, running (no task is sent: a worker of another test must not take it)
    config = services.as_config(tiny_config(model_path=model_dir, total_steps=200_000)).to_dict()
    run = Run.objects.create(project=default_project(), config=config, seed=0, status=RunStatus.RUNNING,
                             started_at=timezone.now(), heartbeat_at=timezone.now())
    value = {s: SPIKE if s == SPIKE_AT else (s % 100) / 100 for s in range(1, STEPS + 1)}
    for start in range(1, STEPS + 1, 5000):  # in flushes, as the worker's sink writes
        services.run_metrics_append(run_id=run.pk, points=[(s, "reward/mean", value[s])
                                                           for s in range(start, min(start + 5000, STEPS + 1))])
    page = browser_page
    log_in(page, live_server, django_user_model, start=f"/runs/{run.pk}/", username="ada")
    line = wait_for(lambda: drawn(page, 0), timeout=30, what="the reward chart to be drawn")
    assert 1000 <= len(line) <= 1500 and line[-1][0] == STEPS  # buckets, up to the last step
    band_max = drawn(page, 0, "band")  # the min trace; the max one follows it
    maxima = page.evaluate("""() => { const gd = document.getElementById('chart-0');
        const i = gd.data.findIndex(t => t.name === 'reward/mean max'); return gd.calcdata[i].map(p => p.y); }""")
    assert band_max and max(maxima) == SPIKE  # the one-step spike is in its bucket's max

    # zoom into 1 % of the range: every stored point there, as stored
    page.evaluate("() => Plotly.relayout('chart-0', {'xaxis.range': [49500, 50500]})")
    zoomed = wait_for(lambda: (pts := drawn(page, 0)) and len(pts) == 1001 and pts, timeout=10,
                      what="full-resolution points after the zoom")
    assert [x for x, _ in zoomed] == list(range(49_500, 50_501))
    assert dict(zoomed)[SPIKE_AT] == SPIKE and dict(zoomed)[50_050] == 0.5

    # back to the whole run; a point stored now is drawn within a poll
    page.evaluate("() => Plotly.relayout('chart-0', {'xaxis.autorange': true})")
    wait_for(lambda: len(drawn(page, 0)) <= 1500, timeout=10, what="the whole run again")
    # a live point joins the last bucket instead of growing the chart (width 96 here: bucket b holds the steps
    # (96 b, 96 (b + 1)]; the last one has steps 99,937..100,000 and room up to 100,032)
    width = rollups.display_width(STEPS, 1500)
    last_bucket = [value[s] for s in range((STEPS - 1) // width * width + 1, STEPS + 1)]
    before = drawn(page, 0)
    services.run_metrics_append(run_id=run.pk, points=[(STEPS + 1, "reward/mean", 0.77)])
    line = wait_for(lambda: (pts := drawn(page, 0))[-1][0] == STEPS + 1 and pts, timeout=10,
                    what="the live point to be drawn")
    assert len(line) == len(before) and line[-1][1] == pytest.approx((sum(last_bucket) + 0.77) / (len(last_bucket) + 1))
    # a point past the bucket opens the next one
    next_bucket = ((STEPS - 1) // width + 1) * width + 1
    services.run_metrics_append(run_id=run.pk, points=[(next_bucket, "reward/mean", 0.25)])
    line = wait_for(lambda: (pts := drawn(page, 0))[-1] == [next_bucket, 0.25] and pts, timeout=10,
                    what="a live point in a new bucket")
    assert len(line) == len(before) + 1


def test_other_metrics_load_when_scrolled_into_view_and_then_grow_live(live_server, django_user_model, browser_page,
                                                                      model_dir):
    from urllib.parse import parse_qs, urlparse

    config = services.as_config(tiny_config(model_path=model_dir, total_steps=20_000)).to_dict()
    run = Run.objects.create(project=default_project(), config=config, seed=0, status=RunStatus.RUNNING,
                             started_at=timezone.now(), heartbeat_at=timezone.now())
    others = [f"timing/part_{i:02d}" for i in range(12)]
    steps = 1_200
    services.run_metrics_append(run_id=run.pk, points=[(s, k, s / 1000 + i) for s in range(1, steps + 1)
                                                        for i, k in enumerate(["reward/mean", *others])])
    page = browser_page
    asked = []
    page.on("request", lambda request: "live.json" in request.url and asked.append(
        parse_qs(urlparse(request.url).query).get("keys", [""])[0].split(",")))
    log_in(page, live_server, django_user_model, start=f"/runs/{run.pk}/", username="ada")
    wait_for(lambda: len(drawn(page, 0)) == steps, timeout=30, what="the reward chart")
    assert page.locator("#other-metrics .chart").count() == 12
    # the polls ask only for the important charts' metrics; the last other chart, below the fold, has nothing yet
    assert asked and not set(asked[0]) & set(others) and "reward/mean" in asked[0]
    last = "chart-other-11"
    assert page.get_attribute(f"#{last}", "data-lazy-loaded") is None and drawn(page, last) == []

    page.locator(f"#{last}").scroll_into_view_if_needed()
    line = wait_for(lambda: (pts := drawn(page, last)) and len(pts) == steps and pts, timeout=15,
                    what="the scrolled-to chart to draw its whole series")
    assert [x for x, _ in line] == list(range(1, steps + 1)) and line[-1][1] == steps / 1000 + 12
    # (the page's events reach this process only while it calls Playwright: hence the short waits)
    wait_for(lambda: page.wait_for_timeout(100) or others[11] in asked[-1], timeout=10,
             what="the polls to ask for the opened chart's metric")

    services.run_metrics_append(run_id=run.pk, points=[(steps + 1, "reward/mean", 0.5),
                                                       (steps + 1, others[11], 42.0)])
    wait_for(lambda: drawn(page, last)[-1] == [steps + 1, 42.0], timeout=10,
             what="the live point on the lazily loaded chart")
