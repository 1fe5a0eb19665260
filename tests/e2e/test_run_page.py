"""A person's path through Seedbed in a real browser (Playwright driving Debian's Chromium):
log in, launch a run on the tiny task from the form, watch its chart grow, kill it, see it killed with
every metric up to the kill on the chart and in the database.
"""
from __future__ import annotations

import json
import time

import pytest

from tests.conftest import SCREENSHOTS, log_in, wait_for
from webapp.runs.models import Checkpoint, MetricPoint, Run, RunStatus

pytestmark = [pytest.mark.django_db(transaction=True)]


def chart_points(page, index: int = 0) -> int:
    """Points Plotly drew on the chart's line (its calcdata), not those it was handed."""
    return page.evaluate("""(id) => { const gd = document.getElementById(id);
        if (!gd.data || !gd.calcdata) return 0;
        const i = gd.data.findIndex(t => t.meta === 'line');
        return i < 0 ? 0 : gd.calcdata[i].filter(p => p.x !== undefined && !Number.isNaN(p.x)).length; }""",
                         f"chart-{index}")


def test_launch_watch_and_kill_a_run_from_the_browser(live_server, celery_worker, django_user_model, browser_page):
    page = browser_page
    # every page needs a login: asking for the form lands on the login page first
    log_in(page, live_server, django_user_model, start="/runs/new/")

    page.fill("#id_name", "browser run")
    page.select_option("#id_preset", "dapo")
    page.fill("#id_seed", "11")
    page.fill("#id_total_steps", "400")
    page.fill("#id_prompts_per_step", "4")
    page.fill("#id_group_size", "4")
    page.fill("#id_max_new_tokens", "6")
    clicked_launch = time.monotonic()
    page.click("#launch")
    page.wait_for_url("**/runs/*/")
    # polled from here: a page-side poll (wait_for_function) would need eval, which the pages' CSP forbids
    wait_for(lambda: page.evaluate("typeof Plotly !== 'undefined'"), timeout=30, what="Plotly to load")
    run_page_s = time.monotonic() - clicked_launch
    run = Run.objects.get(name="browser run")
    assert run.config["preset"] == "dapo" and run.config["eps_high"] == 0.28 and run.seed == 11

    wait_for(lambda: chart_points(page) >= 1, timeout=240, what="the first point on the chart")
    first_point_s = time.monotonic() - clicked_launch
    wait_for(lambda: chart_points(page) >= 3, timeout=120, what="3 steps on the chart")
    # the status badge is an htmx fragment polled every second: it follows within that second
    page.wait_for_selector(".run-head .status[data-status=running]", timeout=10_000)
    assert page.text_content(".run-head .status") == "running"

    # Kill asks first; answering no sends nothing and the run goes on
    questions = []
    page.once("dialog", lambda dialog: (questions.append(dialog.message), dialog.dismiss()))
    page.click("#kill")
    wait_for(lambda: questions, timeout=10, what="the kill confirmation")
    assert questions[0].startswith("Kill browser run? It is at step ") and "checkpoint" in questions[0]
    asked_at = int(questions[0].split("It is at step ")[1].split()[0])  # the step when asked, not when drawn
    assert 3 <= asked_at <= Run.objects.get(pk=run.pk).last_step
    # the run goes on: two more steps trained after the answer, and still no kill request
    wait_for(lambda: Run.objects.get(pk=run.pk).last_step >= asked_at + 2, timeout=60,
             what="two more steps after the dismissed kill")
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.kill_requested_at is None
    assert page.text_content(".run-head .status") == "running"
    page.once("dialog", lambda dialog: dialog.accept())
    clicked_kill = time.monotonic()
    page.click("#kill")
    page.wait_for_selector(".run-head .status[data-status=killed]", timeout=60_000)
    killed_s = time.monotonic() - clicked_kill
    page.wait_for_selector("body[data-run-ended=true]", timeout=10_000)

    run.refresh_from_db()
    assert run.status == RunStatus.KILLED and run.killed_by == "user:ada" and run.error == ""
    steps = list(MetricPoint.objects.filter(run=run, key="reward/mean").order_by("step")
                 .values_list("step", flat=True))
    assert run.last_step >= 3 and steps == list(range(1, run.last_step + 1))
    assert Checkpoint.objects.filter(run=run).order_by("-step").first().step == run.last_step
    # the chart draws every stored step, in order (what Plotly computed to draw, not the arrays it was given)
    wait_for(lambda: page.evaluate("document.getElementById('chart-0').calcdata[0].map(p => p.x)") == steps,
             timeout=10, what="every step drawn")
    # the samples table (an htmx fragment) shows the last step's samples once its last poll answered
    page.wait_for_selector(f"#samples tbody tr[data-step='{run.last_step}']", timeout=10_000)
    shown_steps = page.eval_on_selector_all("#samples tbody tr", "rows => rows.map(r => Number(r.dataset.step))")
    assert shown_steps and max(shown_steps) == run.last_step
    # each step's sampled completions appear once (samples_per_step rows at most), newest step first
    assert all(shown_steps.count(s) <= run.config["samples_per_step"] for s in set(shown_steps))
    assert shown_steps == sorted(shown_steps, reverse=True)
    assert "killed" in page.text_content(".run-head .status")

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "run_page.png"), full_page=True)
    first_metric_at = MetricPoint.objects.filter(run=run, step=1).order_by("logged_at").first().logged_at
    timings = {"launch_to_first_point_s": round(first_point_s, 2), "launch_to_run_page_loaded_s": round(run_page_s, 2), "kill_to_killed_s": round(killed_s, 2),
               "steps_before_kill": run.last_step,
               # the server's share: run created -> started -> step 1 stored; kill flag -> status killed
               "server_created_to_started_s": round((run.started_at - run.created_at).total_seconds(), 2),
               "server_started_to_first_metric_s": round((first_metric_at - run.started_at).total_seconds(), 2),
               "server_kill_flag_to_killed_s": round((run.ended_at - run.kill_requested_at).total_seconds(), 2)}
    (SCREENSHOTS / "e2e_timings.json").write_text(json.dumps(timings, indent=2))
    print("e2e timings:", timings)
