"""A run page's chart of a metric the run's config never logs says so from the start, with why (a DAPO run's KL:
DAPO has no KL term), while a running GRPO run's KL chart says "no data yet" until its first point. The runs ask
for a GPU (queue gpu, which no test worker takes); their points are written by the test."""
from __future__ import annotations

import pytest

from tests.conftest import log_in, tiny_config, wait_for
from tests.sweeps.conftest import log_points, make_running
from webapp.runs import services as run_services

pytestmark = [pytest.mark.django_db(transaction=True)]


def kl_chart_note(page) -> str | None:
    """The KL chart's note once Plotly drew it (None before)."""
    return page.evaluate("""(() => { const gd = Array.from(document.querySelectorAll('.chart'))
        .find(d => d.dataset.keys === 'kl'); if (!gd || !gd.layout) return null;
        const a = gd.layout.annotations; return a && a.length ? a[0].text : ''; })()""")


def test_a_dapo_runs_kl_chart_says_not_logged_from_the_start_and_grpo_waits_for_data(
        live_server, django_user_model, browser_page, tiny_model_dir):
    dapo = make_running(run_services.run_create(config=tiny_config(device="cuda", preset="dapo"), name="dapo"))
    grpo = make_running(run_services.run_create(config=tiny_config(device="cuda"), name="grpo"))
    log_points(dapo, "reward/mean", [0.1, 0.2])
    page = browser_page
    log_in(page, live_server, django_user_model, start=f"/runs/{dapo.pk}/")
    note = wait_for(lambda: kl_chart_note(page), timeout=30, what="the KL chart")
    assert note == "not logged for this config (DAPO has no KL term)"

    page.goto(f"{live_server.url}/runs/{grpo.pk}/")
    assert wait_for(lambda: kl_chart_note(page), timeout=30, what="the KL chart") == "no data yet"
    log_points(grpo, "kl", [0.01, 0.02])
    wait_for(lambda: kl_chart_note(page) == "", timeout=30, what="the KL points to be drawn")
