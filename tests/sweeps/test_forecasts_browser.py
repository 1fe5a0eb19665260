"""Forecasts on the sweep dashboard and the replay of a policy, in a real browser (Playwright driving Debian's
Chromium): a bayes sweep half-way through shows each live run's forecast dashed after its curve, in its colour, over
a light band, and the runs table's forecast columns; the chart and the rows agree (each path ends on its row's
forecast worth, its band on the row's interval, within the reward's [0, 1]), a stopped seed shows the numbers of its
stop, and the page says what P(near-best) means; once the sweep has ended, its replay form says what another
policy would have done. The runs' curves are written by the test: their configs ask for a GPU (queue gpu, which no
test worker takes)."""
from __future__ import annotations

import random

import pytest

from tests.conftest import SCREENSHOTS, log_in, tiny_config, wait_for
from tests.sweeps.conftest import log_points, make_running
from webapp.runs.models import Run, RunStatus
from webapp.sweeps import services
from webapp.sweeps.models import PolicyDecision
from webapp.sweeps.policies import make_policy

pytestmark = [pytest.mark.django_db(transaction=True)]

LEVELS = [0.8, 0.72, 0.65, 0.5, 0.3]
TOTAL = 120


def curve(level: float, first: int, last: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    values = [level * (1 - 0.5 ** (t / 15)) + rng.gauss(0, 0.03) for t in range(1, last + 1)]
    return values[first - 1:]


@pytest.fixture
def page(chromium):
    return chromium.new_page(viewport={"width": 1400, "height": 1100})


def chart_traces(page) -> list[dict]:
    return page.evaluate("document.getElementById('sweep-chart').data.map(t => ({name: t.name, x: t.x, y: t.y, "
                         "dash: (t.line || {}).dash || null, color: (t.line || {}).color || null, "
                         "fill: t.fill || null, meta: t.meta || null}))")


def test_a_bayes_sweep_shows_forecasts_and_a_finished_one_replays_a_policy(live_server, django_user_model, page,
                                                                            tiny_model_dir):
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    sweep = services.sweep_create(config=tiny_config(device="cuda", total_steps=TOTAL), seeds=list(range(5)),
                                  concurrency=5, policy={"name": "bayes", "metric": "reward/mean"})
    runs = [make_running(r) for r in sweep.runs.order_by("pk")]
    for i, (run, level) in enumerate(zip(runs, LEVELS)):
        log_points(run, "reward/mean", curve(level, 1, 60, seed=i))

    log_in(page, live_server, django_user_model, start=f"/sweeps/{sweep.pk}/")
    assert page.is_checked("#forecast-toggle")  # on by default for a bayes sweep
    wait_for(lambda: int(page.get_attribute("#sweep-chart", "data-forecasts") or 0) == 5, timeout=60,
             what="five forecasts on the chart")
    traces = chart_traces(page)
    for run in runs:
        line = next(t for t in traces if t["name"] == f"seed {run.seed}")
        forecast = next(t for t in traces if t["name"] == f"forecast seed {run.seed}")
        band = next(t for t in traces if t["name"] == f"forecast band seed {run.seed}")
        assert line["dash"] == "solid" and forecast["dash"] == "dash"
        assert forecast["color"] == line["color"] == band["color"] and band["fill"] == "tonexty"
        assert forecast["x"][0] == line["x"][-1] == 60 and forecast["x"][-1] == TOTAL  # after its last point

    # the runs table's two columns, filled for every live run
    page.wait_for_selector("#runs-table th:has-text('Forecast worth (95 % interval)')")
    assert page.locator("#runs-table th:has-text('P(near-best)')").count() == 1
    for run in runs:
        row = page.locator(f"#runs-table tr[data-run='{run.pk}']")
        assert " to " in row.locator("td.forecast span.ci").text_content()
        assert 0.0 <= float(row.locator("td.p-near-best").text_content()) <= 1.0
    worst = page.locator(f"#runs-table tr[data-run='{runs[-1].pk}'] td.p-near-best").text_content()
    best = page.locator(f"#runs-table tr[data-run='{runs[0].pk}'] td.p-near-best").text_content()
    assert float(worst) < float(best)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "sweep_forecasts.png"), full_page=True)

    # live: the runs log 5 more steps; each forecast now starts at step 65
    for i, (run, level) in enumerate(zip(runs, LEVELS)):
        log_points(run, "reward/mean", curve(level, 61, 65, seed=i), start=61)

    def forecast_start():
        traces = chart_traces(page)
        return [t["x"][0] for t in traces if t["meta"] == "forecast"]

    wait_for(lambda: forecast_start() == [65] * 5, timeout=30, what="the forecasts to follow the new points")

    page.uncheck("#forecast-toggle")  # the toggle takes them away, and back
    wait_for(lambda: page.get_attribute("#sweep-chart", "data-forecasts") == "0", timeout=10, what="no forecasts")
    page.check("#forecast-toggle")
    wait_for(lambda: page.get_attribute("#sweep-chart", "data-forecasts") == "5", timeout=20, what="forecasts back")

    # the sweep ends (the weakest seed killed at step 65, the others run to their end): replay another policy
    for i, (run, level) in enumerate(zip(runs[:-1], LEVELS)):
        log_points(run, "reward/mean", curve(level, 66, TOTAL, seed=i), start=66)
    Run.objects.filter(pk__in=[r.pk for r in runs[:-1]]).update(status=RunStatus.SUCCEEDED)
    Run.objects.filter(pk=runs[-1].pk).update(status=RunStatus.KILLED, killed_by="user:test")
    page.goto(f"{live_server.url}/sweeps/{sweep.pk}/")
    page.wait_for_selector("#replay-section")
    page.select_option("#replay-form #id_policy_name", "median")
    page.fill("#replay-form #id_policy_params", '{"grace_steps": 10, "min_peers": 2, "nope": 1}')
    page.click("#replay-submit")
    page.wait_for_selector("ul.errorlist[data-field=policy_params]")
    assert "nope: unknown key" in page.text_content("ul.errorlist[data-field=policy_params]")
    page.fill("#replay-form #id_policy_params", '{"grace_steps": 10, "min_peers": 2}')
    page.click("#replay-submit")
    page.wait_for_selector("#replay-result")
    saved = page.text_content("#replay-saved")
    assert "Compute saved:" in saved and "545 of its 600 planned steps: 9 % saved by its own stops" in saved
    assert page.locator("#replay-stops tr[data-run]").count() >= 1
    assert page.get_attribute("#replay-result", "data-kept") == str(runs[0].pk)
    assert page.get_attribute("#replay-verdict", "data-verdict") == "best"
    page.screenshot(path=str(SCREENSHOTS / "sweep_replay.png"), full_page=True)
    assert PolicyDecision.objects.filter(sweep=sweep).count() == 0  # the replay touched nothing
    assert script_errors == []


def row_numbers(page, run) -> tuple[float, float, float, str]:
    """(forecast worth, 95 % low, 95 % high, P(near-best) cell) of a run's row, as the page shows them."""
    row = page.locator(f"#runs-table tr[data-run='{run.pk}']")
    low, high = row.locator("td.forecast span.ci").text_content().strip("()").split(" to ")
    return (float(row.locator("td.forecast span.worth").text_content()), float(low), float(high),
            row.locator("td.p-near-best").text_content())


def test_a_bayes_sweeps_chart_and_rows_agree_and_a_stopped_seed_keeps_its_stop(live_server, django_user_model,
                                                                               page, tiny_model_dir):
    """bayes at risk 0.2, 5 seeds at step 60 of 120: the policy stops the seeds it stops (its decisions, stored as
    the live check stores them); the others run on to step 80. Every drawn forecast ends on its row's numbers."""
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    policy = {"name": "bayes", "metric": "reward/mean", "risk": 0.2}
    sweep = services.sweep_create(config=tiny_config(device="cuda", total_steps=TOTAL), seeds=list(range(5)),
                                  concurrency=5, policy=policy)
    runs = [make_running(r) for r in sweep.runs.order_by("pk")]
    judge = make_policy({**policy, "max_steps": TOTAL})
    for i, (run, level) in enumerate(zip(runs, LEVELS)):
        log_points(run, "reward/mean", curve(level, 1, 60, seed=i))
        for step, value in enumerate(curve(level, 1, 60, seed=i), 1):
            judge.observe(run.pk, step, value)
    stops = judge.decide()
    assert stops, "bayes at risk 0.2 stops the weakest seeds at step 60"
    for d in stops:
        PolicyDecision.objects.create(sweep=sweep, run_id=d.run_id, action="stop", rule="bayes", step=d.step,
                                      value=d.value, threshold=d.threshold, n_peers=d.n_peers, details=d.details,
                                      reason=d.reason)
    stopped = {d.run_id for d in stops}
    Run.objects.filter(pk__in=stopped).update(status=RunStatus.KILLED, killed_by="policy:bayes")
    for i, (run, level) in enumerate(zip(runs, LEVELS)):
        if run.pk not in stopped:
            log_points(run, "reward/mean", curve(level, 61, 80, seed=i), start=61)

    log_in(page, live_server, django_user_model, start=f"/sweeps/{sweep.pk}/")
    wait_for(lambda: int(page.get_attribute("#sweep-chart", "data-forecasts") or 0) == 5, timeout=60,
             what="five forecasts on the chart")
    page.wait_for_selector(f"#runs-table tr[data-run='{runs[0].pk}'] td.forecast span.worth")
    traces = chart_traces(page)
    for run in runs:
        path = next(t for t in traces if t["name"] == f"forecast seed {run.seed}")
        low = next(t for t in traces if t["name"] == f"forecast low seed {run.seed}")
        high = next(t for t in traces if t["name"] == f"forecast band seed {run.seed}")
        worth, ci_low, ci_high, p = row_numbers(page, run)
        assert path["x"][0] == (60 if run.pk in stopped else 80) and path["x"][-1] == TOTAL
        # the chart ends on the row (the row rounds to 4 significant digits)
        for drawn, shown in ((path["y"][-1], worth), (low["y"][-1], ci_low), (high["y"][-1], ci_high)):
            assert drawn == pytest.approx(shown, rel=1e-3, abs=1e-4)
        assert all(0.0 <= y <= 1.0 for t in (path, low, high) for y in t["y"])  # a reward in [0, 1]
        assert 0.0 <= ci_low <= worth <= ci_high <= 1.0
        assert ("at its stop (step 60)" in p) == (run.pk in stopped)
    for d in stops:  # a stopped seed's numbers are its decision's
        run = next(r for r in runs if r.pk == d.run_id)
        worth, ci_low, ci_high, p = row_numbers(page, run)
        assert worth == pytest.approx(d.details["forecast"], rel=1e-3)
        assert ci_low == pytest.approx(max(0.0, d.details["ci_low"]), rel=1e-3, abs=1e-4)
        assert float(p.split()[0]) == pytest.approx(d.details["probability"], abs=0.005)
    meaning = page.text_content("#forecast-meaning")
    assert meaning.startswith("P(near-best) = the chance this seed ends within 0.02 of the best seed's final, by the "
                              "bayes policy's calibrated forecast")
    assert meaning.rstrip().endswith("the level that kept the realized loss within risk 0.2 on the tuning sweeps.")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "sweep_bayes_chart_and_rows_agree.png"), full_page=True)
    assert script_errors == []
