"""What the sweep dashboard says while seeds finish at different times, in a real browser (Playwright driving
Debian's Chromium): the mean across seeds and its band are drawn only where at least two seeds have data, each
point's hover says how many seeds it covers, the "mean final ± 95 % CI" covers only the runs that reached their
last step (a running and a stopped run shown apart, "so far"), and a queued seed says what it waits for. The runs'
curves are written by the test: their configs ask for a GPU (queue gpu, which no test worker takes)."""
from __future__ import annotations

import os
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.conftest import SCREENSHOTS, log_in, tiny_config, wait_for
from tests.sweeps.conftest import log_points, make_running
from webapp.runs.models import Run, RunStatus
from webapp.sweeps import services

pytestmark = [pytest.mark.django_db(transaction=True)]

TOTAL = 80


def values(level: float, steps: int) -> list[float]:
    return [level * t / TOTAL for t in range(1, steps + 1)]


@pytest.fixture
def page(chromium):
    return chromium.new_page(viewport={"width": 1400, "height": 1100})


def mean_traces(page) -> list[dict]:
    return page.evaluate("document.getElementById('sweep-chart').data.filter(t => t.name.startsWith('mean') || "
                         "t.name.startsWith('band')).map(t => ({name: t.name, x: t.x, customdata: t.customdata || null,"
                         " hovertemplate: t.hovertemplate || null}))")


def test_mean_band_and_finals_cover_what_the_seeds_reached_and_a_queued_seed_says_why(live_server, django_user_model,
                                                                                       page):
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    sweep = services.sweep_create(config=tiny_config(device="cuda", total_steps=TOTAL), seeds=[0, 1, 2, 3],
                                  concurrency=1, name="uneven seeds")
    done, stopped, running, queued = sweep.runs.order_by("pk")
    for run, level, steps in ((done, 0.6, TOTAL), (stopped, 0.2, 40), (running, 0.4, 26)):
        make_running(run)
        log_points(run, "reward/mean", values(level, steps))
    now = timezone.now()
    Run.objects.filter(pk=done.pk).update(status=RunStatus.SUCCEEDED, ended_at=now)
    Run.objects.filter(pk=stopped.pk).update(status=RunStatus.KILLED, ended_at=now, killed_by="user:ada")
    # 26 steps in 260 s: 54 steps left, about 9 min at its pace
    Run.objects.filter(pk=running.pk).update(first_step_at=now - timedelta(seconds=260))

    log_in(page, live_server, django_user_model, start=f"/sweeps/{sweep.pk}/")
    wait_for(lambda: page.evaluate("(document.getElementById('sweep-chart').data || []).length > 3"), timeout=60,
             what="the curves on the chart")
    page.wait_for_selector("#cells-table")
    if os.environ.get("SEEDBED_SCREENSHOT_AS"):  # the closing note's before/after pictures
        page.screenshot(path=os.environ["SEEDBED_SCREENSHOT_AS"], full_page=True)

    # the mean and its band stop where the second-longest seed stops (step 40): beyond, seed 0 alone
    traces = {t["name"]: t for t in mean_traces(page)}
    mean, low, high = traces["mean"], traces["band low"], traces["band (minmax)"]
    assert max(mean["x"]) == 40 and max(low["x"]) == max(high["x"]) == 40
    # each point says how many seeds it covers: 3 up to step 26, then 2
    covered = dict(zip(mean["x"], [row[0] for row in mean["customdata"]]))
    assert covered[1] == 3 and covered[26] == 3 and covered[27] == 2 and covered[40] == 2
    assert "seeds" in mean["hovertemplate"] and "customdata[0]" in mean["hovertemplate"]

    # the finals: seed 0 alone reached its last step (its final, no interval from one run); the running and the
    # stopped seed apart, "so far"
    cell = page.locator("#cells-table tbody tr").first
    assert cell.locator("td.cell-finished").text_content().strip() == "1 of 4"
    mean_text = cell.locator("td.cell-mean").text_content()
    assert "±" not in mean_text and "one run: no interval" in mean_text
    so_far = cell.locator("td.cell-so-far").text_content()
    assert "so far" in so_far and "1 running" in so_far and "1 stopped" in so_far

    # the queued seed says what it waits for: the sweep's one slot, held by the running seed, with its time left
    reason = page.locator(f"#runs-table tr[data-run='{queued.pk}'] .wait-reason").text_content()
    assert reason.startswith(f"sweep slot held by run {running.pk}, uneven seeds / seed 2, about "), reason
    assert re.search(r"about \d+ min left$", reason), reason  # (the minutes: waiting.seconds_left's doctest)
    assert script_errors == []
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "sweep_uneven_seeds.png"), full_page=True)

    # the queued run's own page says the same
    page.goto(f"{live_server.url}/runs/{queued.pk}/")
    assert page.text_content("#queue-reason").startswith(f"sweep slot held by run {running.pk}, uneven seeds")


def test_kill_selected_goes_once_every_run_of_an_open_sweep_has_ended(live_server, django_user_model, page):
    sweep = services.sweep_create(config=tiny_config(device="cuda", total_steps=TOTAL), seeds=[0, 1], concurrency=2,
                                  name="ends while open")
    runs = [make_running(run) for run in sweep.runs.order_by("pk")]
    for run in runs:
        log_points(run, "reward/mean", values(0.5, 10))
    log_in(page, live_server, django_user_model, start=f"/sweeps/{sweep.pk}/")
    assert page.is_visible("#kill-selected") and not page.is_visible("#sweep-ended-note")

    Run.objects.filter(pk__in=[r.pk for r in runs]).update(status=RunStatus.SUCCEEDED, ended_at=timezone.now())
    page.wait_for_selector("#sweep-ended-note", state="visible", timeout=15_000)
    assert not page.is_visible("#kill-selected")
    assert page.text_content("#sweep-ended-note") == "Every run of this sweep has ended: nothing is left to kill."
