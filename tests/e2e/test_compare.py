"""The compare page in a browser: runs of two sweeps drawn together, smoothed with the app's setting, on the step
and the wall-time axis. The runs' curves are written by the test: their configs ask for a GPU (queue gpu, which no
test worker takes), so a Celery worker alive in the session never trains them."""
import pytest

from tests.conftest import SCREENSHOTS, log_in, tiny_config, wait_for
from tests.sweeps.conftest import log_points, make_running
from webapp.sweeps import services as sweep_services

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_two_sweeps_runs_drawn_together(live_server, django_user_model, browser_page, tiny_model_dir):
    runs = []
    for seed, level in ((1, 0.2), (2, 0.6)):
        sweep = sweep_services.sweep_create(config=tiny_config(device="cuda"), seeds=[seed], concurrency=1,
                                            name=f"sweep {seed}", policy={"name": "manual"})
        run = make_running(sweep.runs.get())
        log_points(run, "reward/mean", [level, level + 0.2] * 5)
        runs.append(run)
    page = browser_page
    log_in(page, live_server, django_user_model, start=f"/runs/compare/?ids={runs[0].pk}+{runs[1].pk}",
           lands_on=f"/runs/compare/?ids={runs[0].pk}+{runs[1].pk}")
    page.select_option("#smoothing", "none")
    wait_for(lambda: page.get_attribute("#compare-chart", "data-traces") == "2", timeout=30, what="two curves")
    ys = page.evaluate("document.getElementById('compare-chart').data.map(t => t.y)")
    assert ys[0][:2] == pytest.approx([0.2, 0.4]) and ys[1][:2] == pytest.approx([0.6, 0.8])
    page.select_option("#smoothing", "mean")
    page.fill("#smooth-param", "2")
    page.dispatch_event("#smooth-param", "change")
    wait_for(lambda: page.evaluate("document.getElementById('compare-chart').data[0].y[1]") == pytest.approx(0.3),
             timeout=10, what="the smoothed curve")
    # the summary's smoothed final and best smoothed follow the page's smoothing: a running mean of 2 bucket means
    # ends at (level + level + 0.2) / 2 and peaks there too
    row = f"#compare-summary tr[data-run='{runs[0].pk}']"
    wait_for(lambda: page.text_content(f"{row} .smoothed-final") == "0.3", timeout=10, what="the smoothed final")
    assert page.text_content(f"{row} .best-smoothed") == "0.3"
    assert page.text_content(f"#compare-summary tr[data-run='{runs[1].pk}'] .smoothed-final") == "0.7"
    page.select_option("#smoothing", "none")
    wait_for(lambda: page.text_content(f"{row} .smoothed-final") == "0.4", timeout=10, what="the raw last value")
    assert page.text_content(f"{row} .best-smoothed") == "0.4" and page.text_content(f"{row} .auc") == "3"
    page.screenshot(path=str(SCREENSHOTS / "compare.png"), full_page=True)  # step axis (test-written points share a time)
    page.select_option("#xaxis", "time")
    assert page.evaluate("document.getElementById('compare-chart').layout.xaxis.title.text").startswith("seconds")
    assert page.locator("#config-diff tr[data-key=seed]").count() == 1


def test_a_sweeps_parallel_coordinates_are_drawn(live_server, django_user_model, browser_page, tiny_model_dir):
    sweep = sweep_services.sweep_create(config=tiny_config(device="cuda"), seeds=[0, 1], concurrency=2,
                                        name="grid", grid={"lr": [1e-4, 3e-4]}, policy={"name": "manual"})
    for i, run in enumerate(sweep.runs.order_by("pk")):
        log_points(make_running(run), "reward/mean", [0.1 * i] * 10)
    page = browser_page
    log_in(page, live_server, django_user_model, start=f"/sweeps/{sweep.pk}/parallel/")
    wait_for(lambda: page.get_attribute("#parallel-chart", "data-dims") == "3", timeout=30, what="the plot")
    drawn = page.evaluate("(() => { const gd = document.getElementById('parallel-chart');"
                          " return [gd.data.length, gd.layout.xaxis.ticktext, gd.data.map(t => t.y[2])]; })()")
    assert drawn[0] == 4 and drawn[1] == ["lr", "seed", "final reward/mean"]
    assert drawn[2] == pytest.approx([0, 1 / 3, 2 / 3, 1])  # the final axis, scaled to its range
    # Plotly drew a line per run (SVG paths), not only took the data
    assert page.locator("#parallel-chart .scatterlayer .trace").count() == 4
