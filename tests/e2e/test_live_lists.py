"""The runs list and the run page as a researcher leaves them open, in a real browser (Playwright driving Debian's
Chromium): "Compare selected" is a plain link (no bulk question, no csrf token or action in its address); the runs
list's rows follow their runs live and keep the boxes checked and the focus; the run page's live header keeps its
Kill button (the same element, focused, a press that straddles an update still clicks it); a finished run of a
sweep shows its final, not a forecast of it; the nav stays on one line at 1,200 px; a personal project's title
says whose it is. The runs' steps are written by the test: their configs ask for a GPU (queue gpu, which no test
worker takes)."""
from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import pytest

from tests.conftest import SCREENSHOTS, log_in, tiny_config, wait_for
from tests.sweeps.conftest import log_points, make_running
from webapp.runs import services as run_services
from webapp.runs.models import Run, RunStatus
from webapp.sweeps import services as sweep_services

pytestmark = [pytest.mark.django_db(transaction=True)]


def gpu_run(name: str, model_dir: str, **overrides) -> Run:
    return run_services.run_create(config=tiny_config(device="cuda", model_path=model_dir, **overrides), name=name)


def test_compare_selected_is_a_plain_link_that_asks_nothing(live_server, django_user_model, browser_page,
                                                            model_dir):
    runs = [gpu_run(f"cmp {i}", model_dir) for i in range(3)]
    page = browser_page
    log_in(page, live_server, django_user_model, start="/runs/")
    questions = []
    page.on("dialog", lambda dialog: (questions.append(dialog.message), dialog.dismiss()))
    page.check(f"#pick-{runs[0].pk}")
    page.check(f"#pick-{runs[2].pk}")
    page.click("#bulk-compare")
    page.wait_for_url("**/runs/compare/**")
    query = parse_qsl(urlsplit(page.url).query)
    assert sorted(query) == sorted([("run", str(runs[0].pk)), ("run", str(runs[2].pk))])
    assert questions == []  # the bulk kill's question was not asked
    assert page.locator("#compare-summary tbody tr").count() == 2
    # the bulk actions still ask first
    page.go_back()
    page.wait_for_url("**/runs/")
    page.check(f"#pick-{runs[1].pk}")
    page.select_option("#bulk-action", "kill")
    page.click("#bulk-apply")
    wait_for(lambda: questions, timeout=10, what="the bulk action's question")
    assert questions[0].startswith("Kill ") and questions[0].endswith("after its current step, with a checkpoint.")
    assert all(Run.objects.get(pk=r.pk).kill_requested_at is None for r in runs)  # answered no


def test_the_runs_list_follows_live_rows_and_keeps_the_selection(live_server, django_user_model, browser_page,
                                                                model_dir):
    running = make_running(gpu_run("live one", model_dir, total_steps=4))
    queued = gpu_run("waiting one", model_dir, total_steps=4)
    page = browser_page
    log_in(page, live_server, django_user_model, start="/runs/")
    row = f"#runs tr[data-run='{running.pk}']"
    assert "0 / 4" in page.text_content(row)
    page.check(f"#pick-{running.pk}")
    page.focus(f"#pick-{queued.pk}")
    page.evaluate(f"document.getElementById('pick-{running.pk}').seedbedMark = 'same box'")

    log_points(running, "reward/mean", [0.1, 0.2, 0.3])  # the run goes on: the page is not reloaded
    wait_for(lambda: "3 / 4" in page.text_content(row), timeout=20, what="the row to show step 3")
    assert page.is_checked(f"#pick-{running.pk}")
    assert page.evaluate(f"document.getElementById('pick-{running.pk}').seedbedMark") == "same box"
    assert page.evaluate("document.activeElement.id") == f"pick-{queued.pk}"
    assert page.get_attribute("#bulk-compare", "href").endswith(f"?run={running.pk}")

    # once no row shown is live, the rows stop polling (the answer after the end is 286)
    log_points(running, "reward/mean", [0.4], start=4)
    run_services.run_finish(run_id=running.pk, status=RunStatus.SUCCEEDED)
    run_services.run_kill(run_id=queued.pk, reason="not needed")  # (a queued run ends at once)
    wait_for(lambda: page.get_attribute("#runs-rows", "data-live") == "false", timeout=20, what="the end of polling")
    assert "succeeded" in page.text_content(row) and page.get_attribute("#runs-rows", "hx-get") is None
    assert page.is_checked(f"#pick-{running.pk}")


def test_the_run_page_keeps_its_kill_button_through_live_updates(live_server, django_user_model, browser_page,
                                                                model_dir):
    run = make_running(gpu_run("kept", model_dir, total_steps=50))
    log_points(run, "reward/mean", [0.1] * 3)
    page = browser_page
    log_in(page, live_server, django_user_model, start=f"/runs/{run.pk}/")
    questions = []
    page.on("dialog", lambda dialog: (questions.append(dialog.message), dialog.dismiss()))
    page.focus("#kill")
    page.evaluate("document.getElementById('kill').seedbedMark = 'same button'")
    for last in (6, 9):  # two live updates, each seen on the page
        log_points(run, "reward/mean", [0.2] * 3, start=last - 2)
        wait_for(lambda: page.text_content("#last-step") == str(last), timeout=15, what=f"step {last} on the page")
    assert page.evaluate("document.getElementById('kill').seedbedMark") == "same button"
    assert page.evaluate("document.activeElement.id") == "kill"

    # a press and a release that straddle an update: still a click on Kill (which asks its question)
    box = page.locator("#kill").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    log_points(run, "reward/mean", [0.3] * 3, start=10)
    wait_for(lambda: page.text_content("#last-step") == "12", timeout=15, what="step 12 while Kill is pressed")
    page.mouse.up()
    wait_for(lambda: questions, timeout=10, what="the kill question")
    assert "It is at step 12 of 50;" in questions[0]
    assert page.evaluate("document.getElementById('kill').seedbedMark") == "same button"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "run_page_live_header.png"))

    # the run ends: Kill goes, and the header stops polling
    run_services.run_finish(run_id=run.pk, status=RunStatus.FAILED, error="no space left on device under /x: 0 B free",
                            failure_kind="disk_full")
    wait_for(lambda: page.locator("#kill").count() == 0, timeout=15, what="Kill to go once the run has ended")
    assert page.get_attribute("#run-state", "hx-get") is None
    assert page.locator("#run-state .status").first.text_content() == "failed"
    assert page.is_visible("#resume") and page.text_content("#run-error").startswith("no space left on device")
    assert page.text_content("#run-failure-kind") == "Why: the disk was full"  # the field, in words
    page.screenshot(path=str(SCREENSHOTS / "run_page_failed_disk_full.png"))


def test_a_finished_run_of_a_sweep_shows_its_final_not_a_forecast(live_server, django_user_model, browser_page,
                                                                 model_dir):
    sweep = sweep_services.sweep_create(config=tiny_config(device="cuda", total_steps=40, model_path=model_dir), seeds=[0, 1],
                                        concurrency=2, policy={"name": "bayes", "metric": "reward/mean"})
    done, going = [make_running(r) for r in sweep.runs.order_by("pk")]
    log_points(done, "reward/mean", [0.4 * (1 - 0.5 ** (t / 6)) for t in range(1, 41)])
    run_services.run_finish(run_id=done.pk, status=RunStatus.SUCCEEDED)
    log_points(going, "reward/mean", [0.3 * (1 - 0.5 ** (t / 6)) for t in range(1, 21)])
    page = browser_page
    log_in(page, live_server, django_user_model, start=f"/sweeps/{sweep.pk}/")
    going_row, done_row = (f"#runs-table tr[data-run='{r.pk}']" for r in (going, done))
    wait_for(lambda: " to " in (page.text_content(f"{going_row} td.forecast") or ""), timeout=30,
             what="the running run's forecast")
    assert page.text_content(f"{done_row} td.forecast").strip() == "–"
    assert page.text_content(f"{done_row} td.final").strip() not in ("", "–")
    assert page.locator("#runs-table th:has-text('Final (higher is better)')").count() == 1
    assert page.locator("#runs-table th:has-text('(max)')").count() == 0


def test_the_nav_stays_on_one_line_at_1200_px_and_a_personal_project_says_whose(live_server, django_user_model,
                                                                               chromium):
    page = chromium.new_page(viewport={"width": 1200, "height": 800})
    log_in(page, live_server, django_user_model, start="/runs/", username="admin")
    django_user_model.objects.filter(username="admin").update(is_staff=True)
    page.reload()
    middles = page.eval_on_selector_all("header.top nav a, header.top .logout button", "links => links.map(a => "
                                        "{ const r = a.getBoundingClientRect(); return r.top + r.height / 2; })")
    heights = page.eval_on_selector_all("header.top nav a", "links => links.map(a => a.getBoundingClientRect().height)")
    assert max(middles) - min(middles) < 4, middles  # one line: every link on the same line ...
    assert max(heights) < 1.5 * min(heights), heights  # ... and none broken over two lines inside ...
    right = page.evaluate("document.querySelector('header.top .logout button').getBoundingClientRect().right")
    assert right <= page.evaluate("document.documentElement.clientWidth"), right  # ... nor pushed off the page
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "nav_1200.png"))

    page.goto(f"{live_server.url}/projects/admin/")
    assert page.text_content("#project-title") == "Personal project of user admin"
    assert page.title().startswith("admin's personal project")
