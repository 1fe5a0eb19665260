"""The pass@k page in a real browser (Playwright + Debian's Chromium): one line per model on a log-x chart,
the coverage table, a problem's completions on click, and Plotly's own PNG/SVG export."""
from __future__ import annotations

import pytest

from tests.conftest import SCREENSHOTS, log_in
from tests.evals.conftest import make_job_with_results

pytestmark = [pytest.mark.django_db(transaction=True)]


def log_in_as_kat(page, live_server, django_user_model) -> None:
    """Straight to the login form; after it, the runs list (where a login lands by default)."""
    log_in(page, live_server, django_user_model, start="/accounts/login/", lands_on="/runs/", username="kat")


def test_the_pass_at_k_page_shows_base_and_checkpoint(live_server, django_user_model, browser_page,
                                                      run_with_checkpoints):
    run = run_with_checkpoints
    # a gpu-queue job: no test worker consumes it, so the hand-made results stay as they are
    run.config = {**run.config, "device": "cuda"}
    run.save()
    job = make_job_with_results(run)
    page = browser_page
    log_in_as_kat(page, live_server, django_user_model)

    # from the run page, the evaluation is one click away
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.click(f"#evaluations a[href='/evals/{job.pk}/']")
    page.wait_for_selector("#passk-chart[data-ready=true]", timeout=30_000)

    traces = page.evaluate("""() => document.getElementById('passk-chart').data.map(
        t => ({name: t.name, x: Array.from(t.x), y: Array.from(t.y)}))""")
    assert [t["name"] for t in traces] == ["base", "step 4"]
    assert traces[0]["x"] == [1, 2, 4]
    assert traces[0]["y"][0] == pytest.approx(3 / 20) and traces[1]["y"][-1] == pytest.approx(3 / 5)
    assert page.evaluate("() => document.getElementById('passk-chart')._fullLayout.xaxis.type") == "log"
    assert page.locator("#passk-chart .scatterlayer .trace").count() == 2  # two lines drawn

    # coverage: base only 1, checkpoint only 2, both 1, neither 1
    cells = {cell: page.text_content(f"#coverage tr[data-cell={cell}] td") for cell in
             ("a_only", "b_only", "both", "neither")}
    assert cells == {"a_only": "1", "b_only": "2", "both": "1", "neither": "1"}
    assert "base only" in page.text_content("#coverage tr[data-cell=a_only] th")

    # clicking a problem shows a few completions of each model with their verdicts
    page.click("#problem-1")
    page.wait_for_selector("#problem-detail .problem-detail[data-problem='1']")
    detail = page.text_content("#problem-detail")
    assert "base: 0 / 4 correct" in detail and "step 4: 4 / 4 correct" in detail
    assert page.locator("#problem-detail td.verdict.ok").count() == 2
    assert page.locator("#problem-detail td.verdict.wrong").count() == 2

    # export: PNG from the modebar's camera, SVG from the added button (both Plotly's own toImage)
    with page.expect_download() as svg:
        page.click("#passk-chart .modebar-btn[data-title='Download plot as SVG']")
    assert svg.value.suggested_filename == f"seedbed-eval-{job.pk}-passk.svg"
    assert "<svg" in open(svg.value.path(), encoding="utf-8").read(2000)
    with page.expect_download() as png:
        page.click("#passk-chart .modebar-btn[data-title='Download plot as a PNG']")
    assert png.value.suggested_filename.endswith(".png")

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "passk_page.png"), full_page=True)


def test_evaluate_from_the_run_page_opens_the_form_and_queues_a_job(live_server, django_user_model, browser_page,
                                                                    run_with_checkpoints):
    from webapp.evals.models import EvalJob, EvalStatus

    run = run_with_checkpoints
    run.config = {**run.config, "device": "cuda"}  # gpu queue: nothing in the tests consumes it
    run.save()
    page = browser_page
    log_in_as_kat(page, live_server, django_user_model)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.click("#evaluate")
    page.wait_for_url(f"**/evals/new/?run={run.pk}")
    # a bad k is refused on its field, and the form keeps what was typed
    page.fill("#id_n", "4")
    page.fill("#id_k", "1,8")
    page.click("#start-eval")
    assert "every k must lie in 1..n (n = 4)" in page.text_content("#field-k .errorlist")
    assert EvalJob.objects.count() == 0
    page.fill("#id_k", "1,4")
    page.fill("#id_problems", "3")
    page.click("#start-eval")
    page.wait_for_url("**/evals/*/")
    job = EvalJob.objects.get()
    assert (job.n, job.ks, job.problems, job.queue, job.status) == (4, [1, 4], 3, "gpu", EvalStatus.QUEUED)
    assert [m.label for m in job.models.all()] == ["base", "step 4"]  # the defaults: base + last checkpoint
    assert page.text_content(".run-head .status") == "queued"
    assert page.get_attribute("#progress", "max") == "6"
    page.screenshot(path=str(SCREENSHOTS / "eval_queued.png"), full_page=True)
