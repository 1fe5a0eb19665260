"""One smoothing setting for every chart: the run page's charts draw a smoothed line over the faint raw
one (debiased EMA by default, as the sweep dashboard), the setting changes every chart at once, and it is kept in
the browser: the sweep dashboard opens with it, and so does the next run page."""
from __future__ import annotations

import pytest

from tests.conftest import log_in, tiny_config, wait_for
from webapp.runs import services
from webapp.runs.models import Run, RunStatus
from webapp.sweeps import services as sweep_services

pytestmark = [pytest.mark.django_db(transaction=True)]


def trace(page, chart: str, meta: str) -> list:
    return page.evaluate("""([id, meta]) => { const gd = document.getElementById(id);
        if (!gd.data || !gd.calcdata) return null;
        const i = gd.data.findIndex(t => t.meta === meta);
        return i < 0 ? null : gd.calcdata[i].map(p => p.y); }""", [chart, meta])


def ema(values, w):
    out, m = [], 0.0
    for t, v in enumerate(values, start=1):
        m = w * m + (1 - w) * v
        out.append(m / (1 - w ** t))
    return out


def test_smoothing_is_one_remembered_setting_for_every_chart(live_server, django_user_model, browser_page,
                                                             tiny_model_dir):
    config = tiny_config(device="cuda")  # queue gpu: no test worker trains it (its curve is the test's)
    run = services.run_create(config=config)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
    values = [0.0, 1.0, 0.0, 1.0, 0.5, 0.25]
    services.run_metrics_append(run_id=run.pk, points=[(s, "reward/mean", v) for s, v in enumerate(values, 1)] +
                                [(s, "entropy", 1.0 - v) for s, v in enumerate(values, 1)])
    page = browser_page
    log_in(page, live_server, django_user_model, start=f"/runs/{run.pk}/")
    smoothed = wait_for(lambda: trace(page, "chart-0", "smoothed"), timeout=30, what="the smoothed reward line")
    assert trace(page, "chart-0", "line") == values  # the raw values, still drawn under it
    assert smoothed == pytest.approx(ema(values, 0.6))  # the default: debiased EMA 0.6
    assert page.input_value("#smoothing") == "ema"

    page.select_option("#smoothing", "mean")  # every chart follows: a running mean of 5
    page.fill("#smooth-param", "2")
    page.dispatch_event("#smooth-param", "change")
    mean2 = [values[0]] + [(a + b) / 2 for a, b in zip(values, values[1:])]
    wait_for(lambda: trace(page, "chart-0", "smoothed") == pytest.approx(mean2), timeout=10, what="reward smoothed")
    wait_for(lambda: trace(page, "chart-2", "smoothed") == pytest.approx([1 - v for v in mean2]), timeout=10,
             what="entropy smoothed the same way")

    sweep = sweep_services.sweep_create(config=config, seeds=[0], concurrency=1, policy={"name": "manual"})
    page.goto(f"{live_server.url}/sweeps/{sweep.pk}/")
    page.wait_for_selector("#smoothing")
    assert (page.input_value("#smoothing"), page.input_value("#smooth-param")) == ("mean", "2")
    page.select_option("#smoothing", "none")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    wait_for(lambda: trace(page, "chart-0", "line") == values, timeout=30, what="the raw line")
    assert page.input_value("#smoothing") == "none" and trace(page, "chart-0", "smoothed") is None
