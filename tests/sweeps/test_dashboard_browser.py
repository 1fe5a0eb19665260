"""A person's path through a seed sweep in a real browser (Playwright driving Debian's Chromium) against a real
worker: launch 4 seeds of the tiny task with concurrency 2 and a median policy from the sweep form, watch the
curves, see the policy stop a seed (its line ended with a marker, the reason on hover and in the table and the
decision list), the queued seed take its slot, zoom kept across live updates, samples side by side.
"""
from __future__ import annotations

import pytest

from tests.conftest import SCREENSHOTS, log_in, wait_for
from webapp.runs.models import Run, RunStatus
from webapp.sweeps.models import Sweep
from webapp.sweeps import services
from webapp.sweeps.models import PolicyDecision

RUN_TIMEOUT = 240
pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def page(chromium):
    """A 1400 x 1100 page (100 px taller than the shared ``browser_page``) for the dashboard."""
    return chromium.new_page(viewport={"width": 1400, "height": 1100})


def chart_attr(page, name: str) -> int:
    return int(page.get_attribute("#sweep-chart", f"data-{name}") or 0)


def test_a_median_policy_stops_a_seed_live_on_the_dashboard(live_server, celery_worker, django_user_model, page):
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    log_in(page, live_server, django_user_model, start="/sweeps/new/")

    page.fill("#id_name", "browser sweep")
    page.fill("#id_seed", "31")
    page.fill("#id_total_steps", "40")
    page.fill("#id_prompts_per_step", "4")
    page.fill("#id_group_size", "4")
    page.fill("#id_max_new_tokens", "6")
    page.fill("#id_seeds", "4")
    page.fill("#id_concurrency", "2")
    page.select_option("#id_policy_name", "median")
    page.fill("#id_policy_metric", "entropy")
    # entropy differs between seeds at every step: with one peer and no margin a seed stops within seconds
    page.fill("#id_policy_params", '{"grace_steps": 2, "min_peers": 1, "min_delta": 0, "smoothing": "none"}')
    page.click("#launch")
    page.wait_for_url("**/sweeps/*/")
    # polled from here: a page-side poll (wait_for_function) would need eval, which the pages' CSP forbids
    wait_for(lambda: page.evaluate("typeof Plotly !== 'undefined'"), timeout=30, what="Plotly to load")
    sweep = Sweep.objects.get(name="browser sweep")
    runs = list(sweep.runs.order_by("pk"))
    assert [r.seed for r in runs] == [31, 32, 33, 34] and sweep.policy["metric"] == "entropy"

    wait_for(lambda: chart_attr(page, "points") >= 4, timeout=RUN_TIMEOUT, what="curves on the chart")
    # zoom in; live updates must keep it
    page.evaluate("Plotly.relayout('sweep-chart', {'xaxis.range': [0, 3]})")
    points_when_zoomed = chart_attr(page, "points")

    wait_for(lambda: chart_attr(page, "stopped") >= 1, timeout=RUN_TIMEOUT, what="a run stopped by the policy")
    decision = PolicyDecision.objects.filter(sweep=sweep, action="stop", outcome="applied").order_by("pk").first()
    stopped = Run.objects.get(pk=decision.run_id)
    assert stopped.status == RunStatus.KILLED and stopped.killed_by == "policy:median"

    # its line ends at its last stored step, dotted, with a marker carrying the reason on hover
    traces = page.evaluate("document.getElementById('sweep-chart').data.map(t => "
                           "({name: t.name, x: t.x, text: t.text || null, dash: (t.line || {}).dash || null}))")
    line = next(t for t in traces if t["name"] == f"seed {stopped.seed}")
    assert line["x"][-1] == stopped.last_step and line["dash"] == "dot"
    marker = next(t for t in traces if t["name"] == "stopped")
    assert any("median rule" in text and f"seed {stopped.seed}" in text for text in marker["text"])
    wait_for(lambda: chart_attr(page, "points") > points_when_zoomed, timeout=60, what="more points while zoomed")
    assert page.evaluate("document.getElementById('sweep-chart').layout.xaxis.range") == [0, 3]

    # the reason in the runs table and in the decisions list (server-rendered fragments, polled every second)
    page.wait_for_selector(f"#runs-table tr[data-run='{stopped.pk}'][data-status=killed]", timeout=10_000)
    page.wait_for_selector(f"#decisions tr[data-run='{stopped.pk}'][data-action=stop]", timeout=10_000)
    row = page.locator(f"#runs-table tr[data-run='{stopped.pk}']")
    assert "median rule" in row.locator("td.reason").text_content()
    assert row.get_attribute("data-status") == "killed"
    decision_row = page.locator(f"#decisions tr[data-run='{stopped.pk}'][data-action=stop]")
    assert "median" in decision_row.text_content() and "below the median" in decision_row.text_content()

    # the queued seed took the slot, and the page shows it started
    third = runs[2]
    wait_for(lambda: Run.objects.get(pk=third.pk).started_at is not None, timeout=60, what="the queued seed to start")
    page.wait_for_selector(f"#runs-table tr[data-run='{third.pk}']:not([data-status=queued])", timeout=10_000)
    assert Run.objects.filter(sweep=sweep, status=RunStatus.RUNNING).count() <= 2

    # sampled completions of one step, side by side across seeds: step 1, which the first two seeds both
    # logged (the default, the lowest step any run has reached, may be one that only the new seed stored yet)
    page.fill("#sample-step", "1")
    page.click("#show-samples")
    page.wait_for_selector("#samples .column", timeout=10_000)
    assert page.locator("#samples .column").count() >= 2

    # the controls redraw without errors: mean with a 95 % band, running average, wall-time x
    page.select_option("#band", "ci95")
    page.select_option("#smoothing", "mean")
    page.select_option("#xaxis", "time")
    assert page.evaluate("document.getElementById('sweep-chart').data.some(t => t.name === 'band (ci95)')")
    assert page.evaluate("document.getElementById('sweep-chart').layout.xaxis.title.text").startswith("seconds")
    page.select_option("#xaxis", "step")
    assert script_errors == []
    page.evaluate("Plotly.relayout('sweep-chart', {'xaxis.autorange': true})")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "sweep_dashboard.png"), full_page=True)

    live = list(sweep.runs.filter(status__in=[RunStatus.RUNNING, RunStatus.QUEUED], kill_requested_at__isnull=True)
                .values_list("pk", flat=True))
    services.sweep_kill_runs(sweep_id=sweep.pk, run_ids=live, killed_by="user:test")
    wait_for(lambda: not sweep.runs.exclude(status__in=[RunStatus.KILLED, RunStatus.SUCCEEDED]).exists(),
             timeout=120, what="every run of the sweep to end")
