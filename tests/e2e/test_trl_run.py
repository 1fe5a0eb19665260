"""TRL from the browser, against a real Celery worker: launch a TRL run from the new-run form and see
its reward curve drawn, the engine's badge and TRL's resolved GRPOConfig beside Seedbed's config; launch a sweep
whose grid crosses engine = seedbed, trl and see both engines' curves side by side, coloured by grid cell, on
the step axis and on the wall-time axis."""
from __future__ import annotations

import pytest

from tests.conftest import SCREENSHOTS, log_in, wait_for
from webapp.runs.models import Checkpoint, MetricPoint, Run, RunStatus
from webapp.sweeps.models import Sweep

RUN_TIMEOUT = 240
pytestmark = [pytest.mark.django_db(transaction=True)]


def logs_of(run: Run, worker_env) -> str:
    """The run's worker.log and engine.log (its folder under the worker's $SEEDBED_HOME), for a failure's message."""
    folder = worker_env[1] / "runs" / str(run.uid)
    return "\n".join(f"--- {name}\n{(folder / name).read_text(errors='replace')[-4000:]}"
                     for name in ("worker.log", "engine.log") if (folder / name).is_file())


def ended(run_id: int) -> Run | None:
    run = Run.objects.get(pk=run_id)
    return run if run.is_ended else None


def drawn_points(page, chart_id: str) -> int:
    """Markers Plotly put in the chart's SVG (a short curve is drawn with lines and markers)."""
    return page.locator(f"#{chart_id} .scatterlayer path.point").count()


def test_a_trl_run_from_the_form_draws_its_curve_and_shows_trls_config(live_server, celery_worker, worker_env,
                                                                      django_user_model, browser_page):
    page = browser_page
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    log_in(page, live_server, django_user_model, start="/runs/new/")
    # the engine's own fields show where they apply (static/seedbed/engine_fields.js)
    assert page.is_visible("#field-strategy") and page.is_visible("#field-nnodes") and page.is_hidden("#field-command")
    page.select_option("#id_engine", "trl")
    assert page.is_visible("#field-nproc_per_node") and page.is_hidden("#field-command")
    assert page.is_hidden("#field-strategy") and page.is_hidden("#field-nnodes")  # the seedbed engine's own
    page.fill("#id_name", "trl from the form")
    page.fill("#id_seed", "5")
    for field, value in {"total_steps": "6", "prompts_per_step": "4", "group_size": "4", "max_new_tokens": "6"}.items():
        page.fill(f"#id_{field}", value)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "trl_run_form.png"))
    page.click("#launch")
    page.wait_for_url("**/runs/*/")
    run = Run.objects.get(name="trl from the form")
    assert (run.config["engine"], run.config["nproc_per_node"], run.config["task"]) == ("trl", 1, "arithmetic")
    assert page.text_content("#engine-badge") == "engine: trl · 1 process"

    finished = wait_for(lambda: ended(run.pk), timeout=RUN_TIMEOUT, what="the TRL run to end")
    assert finished.status == RunStatus.SUCCEEDED, f"{finished.status}: {finished.error}\n{logs_of(run, worker_env)}"
    steps = list(MetricPoint.objects.filter(run=run, key="reward/mean").order_by("step").values_list("step", flat=True))
    assert steps == [1, 2, 3, 4, 5, 6], logs_of(run, worker_env)
    assert Checkpoint.objects.filter(run=run, step=6).exists()
    assert finished.engine_config["num_generations"] == 4 and finished.engine_config["engine"] == "trl"

    # the reward curve: six points in Plotly's SVG; the status badge follows within its poll
    wait_for(lambda: drawn_points(page, "chart-0") == 6, timeout=30, what="six reward points drawn")
    page.wait_for_selector(".run-head .status[data-status=succeeded]", timeout=10_000)
    # TRL's resolved GRPOConfig, swapped in by htmx once the engine reported it; collapsed until opened
    page.wait_for_selector("#engine-config-section[data-stored=true]", timeout=10_000)
    assert page.is_hidden("#engine-config [data-key=num_generations]")
    page.click("#engine-config summary")
    assert page.text_content("#engine-config [data-key=num_generations] dd") == "4"
    assert page.text_content("#engine-config [data-key=loss_type] dd") == "grpo"
    assert "TRL's resolved GRPOConfig" in page.text_content("#engine-config-section h2")
    assert "TRL " in page.text_content("#engine-config summary")
    assert script_errors == []
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "trl_run_page.png"), full_page=True)


def test_a_sweep_over_engines_draws_both_side_by_side(live_server, celery_worker, worker_env, django_user_model,
                                                      chromium):
    page = chromium.new_page(viewport={"width": 1400, "height": 1100})
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    log_in(page, live_server, django_user_model, start="/sweeps/new/")
    page.fill("#id_name", "seedbed vs trl")
    page.fill("#id_seed", "21")
    for field, value in {"total_steps": "6", "prompts_per_step": "4", "group_size": "4", "max_new_tokens": "6",
                         "seeds": "1", "concurrency": "2", "grid": "engine = seedbed, trl"}.items():
        page.fill(f"#id_{field}", value)
    page.select_option("#id_policy_name", "manual")
    page.click("#launch")
    page.wait_for_url("**/sweeps/*/")
    sweep = Sweep.objects.get(name="seedbed vs trl")
    runs = {r.config["engine"]: r for r in sweep.runs.all()}
    assert sorted(runs) == ["seedbed", "trl"] and {r.seed for r in runs.values()} == {21}

    durations = {}
    for engine, run in runs.items():
        finished = wait_for(lambda: ended(run.pk), timeout=RUN_TIMEOUT, what=f"the {engine} run to end")
        assert finished.status == RunStatus.SUCCEEDED, f"{engine}: {finished.error}\n{logs_of(run, worker_env)}"
        durations[engine] = (finished.ended_at - finished.started_at).total_seconds()
        page.wait_for_selector(f"#runs-table tr[data-run='{run.pk}'][data-status=succeeded]", timeout=10_000)
    page.wait_for_selector("body[data-sweep-ended=true]", timeout=30_000)

    def traces():
        return {t["name"]: t for t in page.evaluate(
            "document.getElementById('sweep-chart').data.map(t => ({name: t.name, x: t.x, y: t.y, "
            "color: (t.line || {}).color || null}))")}

    shown = traces()
    seedbed, trl = shown["engine=seedbed · seed 21"], shown["engine=trl · seed 21"]
    assert seedbed["x"] == trl["x"] == [1, 2, 3, 4, 5, 6]
    assert seedbed["color"] != trl["color"]  # a colour per grid cell
    # one seed per cell: no cell has a mean (a mean is drawn only where at least two seeds have data)
    assert not [name for name in shown if name.startswith("mean")], sorted(shown)
    # in the SVG: both runs' lines, six vertices each
    vertices = page.eval_on_selector_all("#sweep-chart .scatterlayer path.js-line",
                                         "ps => ps.map(p => (p.getAttribute('d').match(/[ML]/g) || []).length)")
    assert vertices.count(6) >= 2, vertices
    # the runs table names each run's engine
    for engine, run in runs.items():
        row = page.locator(f"#runs-table tr[data-run='{run.pk}']")
        assert row.locator("td.engine").text_content() == ("seedbed" if engine == "seedbed" else "trl · 1 process")

    # wall time on x: each curve over the seconds since its run started (TRL's include torchrun's start)
    page.select_option("#xaxis", "time")
    timed = traces()
    for engine in ("seedbed", "trl"):
        xs = timed[f"engine={engine} · seed 21"]["x"]
        # when each step's points were stored (a flush holds several steps of the tiny model), within its run
        assert len(xs) == 6 and xs == sorted(xs) and 0 < xs[0] and xs[-1] <= durations[engine] + 1, (engine, xs)
    assert page.evaluate("document.getElementById('sweep-chart').layout.xaxis.title.text").startswith("seconds")
    assert script_errors == []
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "sweep_engines_wall_time.png"), full_page=True)
    page.select_option("#xaxis", "step")
    page.screenshot(path=str(SCREENSHOTS / "sweep_engines.png"), full_page=True)
