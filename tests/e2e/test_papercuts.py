"""Papercuts a new user met, in a real browser: the sweep chart says "no such metric" for a key its
runs do not log (and "no data yet" only while nothing is logged), the Kill question names the step the run is
at when it is asked (not when the page was drawn), and an ended sweep offers no "Kill selected". The runs'
curves are written by the test: their configs ask for a GPU (queue gpu, which no test worker takes)."""
from __future__ import annotations

import pytest

from tests.conftest import log_in, tiny_config, wait_for
from tests.sweeps.conftest import log_points, make_running
from webapp.runs.models import Run, RunStatus
from webapp.sweeps import services as sweep_services

pytestmark = [pytest.mark.django_db(transaction=True)]


def annotation(page) -> str:
    return page.evaluate("(() => { const a = (document.getElementById('sweep-chart').layout || {}).annotations;"
                         " return a && a.length ? a[0].text : ''; })()")


def test_an_unknown_metric_is_named_and_an_unlogged_one_is_not_yet_there(live_server, django_user_model,
                                                                        browser_page, tiny_model_dir):
    sweep = sweep_services.sweep_create(config=tiny_config(device="cuda"), seeds=[0, 1], concurrency=2, name="keys",
                                        policy={"name": "manual"})
    page = browser_page
    log_in(page, live_server, django_user_model, start=f"/sweeps/{sweep.pk}/?metric=reward/mean")
    wait_for(lambda: annotation(page) == "no data yet", timeout=30, what="the empty chart")  # nothing logged yet
    for run in sweep.runs.all():
        log_points(make_running(run), "reward/mean", [0.1, 0.2, 0.3])
        log_points(run, "entropy", [1.0, 0.9, 0.8])
    page.goto(f"{live_server.url}/sweeps/{sweep.pk}/?metric=reward/meen")
    wait_for(lambda: annotation(page).startswith("no such metric: reward/meen"), timeout=30, what="the typo named")
    assert annotation(page) == "no such metric: reward/meen (logged: entropy, reward/mean)"
    assert page.get_attribute("#sweep-chart", "data-unknown-metric") == "reward/meen"
    page.fill("#metric", "reward/mean")  # the picker: a key that is logged draws, and the note goes
    page.dispatch_event("#metric", "change")
    wait_for(lambda: int(page.get_attribute("#sweep-chart", "data-points") or 0) > 0, timeout=30, what="the curves")
    assert annotation(page) == "" and page.get_attribute("#sweep-chart", "data-unknown-metric") is None
    page.fill("#metric", "eval/pass@4")  # logged now and then: not a typo
    page.dispatch_event("#metric", "change")
    wait_for(lambda: annotation(page) == "no data yet", timeout=30, what="a periodic key without points")


def test_the_kill_question_names_the_step_the_run_is_at_now(live_server, django_user_model, browser_page,
                                                          tiny_model_dir):
    from webapp.runs import services as run_services

    run = make_running(run_services.run_create(config=tiny_config(device="cuda", total_steps=50), name="watched"))
    log_points(run, "reward/mean", [0.1] * 7)
    page = browser_page
    log_in(page, live_server, django_user_model, start=f"/runs/{run.pk}/")
    questions = []
    page.on("dialog", lambda dialog: (questions.append(dialog.message), dialog.dismiss()))
    page.click("#kill")
    wait_for(lambda: questions, timeout=10, what="the kill question")
    assert questions[-1].startswith("Kill ") and "It is at step 7 of 50;" in questions[-1]
    log_points(run, "reward/mean", [0.2] * 5, start=8)  # the run goes on while the page stays open
    wait_for(lambda: page.text_content("#last-step") == "12", timeout=15, what="the page to hear of step 12")
    page.click("#kill")
    wait_for(lambda: len(questions) == 2, timeout=10, what="the second question")
    assert "It is at step 12 of 50;" in questions[-1] and "checkpoint" in questions[-1]
    assert Run.objects.get(pk=run.pk).kill_requested_at is None  # answered no both times


def test_an_ended_sweep_offers_no_kill_selected(live_server, django_user_model, browser_page, tiny_model_dir):
    sweep = sweep_services.sweep_create(config=tiny_config(device="cuda"), seeds=[0, 1], concurrency=2, name="done",
                                        policy={"name": "manual"})
    page = browser_page
    log_in(page, live_server, django_user_model, start=f"/sweeps/{sweep.pk}/")
    assert page.locator("#kill-selected").count() == 1  # queued runs can be killed
    sweep.runs.update(status=RunStatus.SUCCEEDED)
    page.reload()
    assert page.locator("#kill-selected").count() == 0
    assert page.locator("#runs-table input[name=run]:not([disabled])").count() == 0
