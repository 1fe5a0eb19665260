"""User text in every Plotly chart is drawn as text, in a real browser. Plotly renders a subset of HTML in trace
names, hover texts, titles, tick labels and annotations: a run named ``<a href=...>`` drew a link on the compare
page and ``<span style="font-size:80px">`` drew giant red text. Runs, a sweep (a grid over a text knob, a stopped
seed with a hostile kill reason), a logged metric and an evaluation's model label carry such markup here; each
chart must show the characters themselves, with no link and no 80 px text anywhere in its SVG."""
from __future__ import annotations

import pytest

from tests.conftest import log_in, tiny_config, wait_for
from tests.evals.conftest import make_job_with_results, run_with_checkpoints  # noqa: F401 - a fixture
from tests.sweeps.conftest import log_points, make_running
from webapp.runs.models import Run, RunStatus
from webapp.sweeps import services as sweep_services

pytestmark = [pytest.mark.django_db(transaction=True)]

LINK = '<a href="https://evil.example/">x</a>'
BIG = '<span style="font-size:80px;color:red">big</span>'

# inside the chart's SVG layers (not the modebar's buttons, which are links of Plotly's own): the links, the
# elements styled 80 px and the text shown
DRAWN = """(selector) => {
  const svgs = Array.from(document.querySelectorAll(selector + ' svg.main-svg'));
  const all = (css) => svgs.flatMap(svg => Array.from(svg.querySelectorAll(css)));
  return {links: all('a').length,
          big: all('[style]').filter(e => /font-size:\\s*80px/.test(e.getAttribute('style'))).length,
          text: svgs.map(svg => svg.textContent).join('\\n')};
}"""


def drawn(page, selector: str) -> dict:
    return page.evaluate(DRAWN, selector)


def assert_shown_as_text(page, selector: str, *literals: str) -> None:
    found = drawn(page, selector)
    assert found["links"] == 0 and found["big"] == 0, found
    for literal in literals:
        assert literal in found["text"], (literal, found["text"][:2000])


def hover(page, chart_id: str, trace_meta_or_name: str) -> None:
    """Plotly's own hover on the first point of the named trace: the label it draws in the hover layer."""
    page.evaluate("""([id, name]) => { const gd = document.getElementById(id);
        const i = gd.data.findIndex(t => t.name === name || t.meta === name);
        Plotly.Fx.hover(gd, [{curveNumber: i, pointNumber: 0}]); }""", [chart_id, trace_meta_or_name])


def test_user_text_is_drawn_as_text_in_every_chart(live_server, django_user_model, browser_page, model_dir,
                                                   run_with_checkpoints):  # noqa: F811
    # two runs named with markup, for the compare page (gpu queue: no test worker takes them)
    runs = []
    for seed, name in ((1, LINK), (2, BIG)):
        sweep = sweep_services.sweep_create(config=tiny_config(device="cuda"), seeds=[seed], concurrency=1,
                                            name=f"plain {seed}", policy={"name": "manual"})
        run = make_running(sweep.runs.get())
        Run.objects.filter(pk=run.pk).update(name=name)
        log_points(run, "reward/mean", [0.1 * seed] * 6)
        runs.append(run)
    # a metric key with markup, on the first run's page (an "other" chart, drawn once scrolled to)
    log_points(runs[0], LINK, [0.5] * 6)
    # a sweep whose grid varies a text knob (the cells' names, the parallel plot's categories) and whose
    # stopped seed carries a kill reason with markup (the marker's hover)
    grid = sweep_services.sweep_create(config=tiny_config(device="cuda"), seeds=[0], concurrency=2, name="grid",
                                       grid={"system_prompt": [LINK, BIG]}, policy={"name": "manual"})
    cells = list(grid.runs.order_by("pk"))
    for i, run in enumerate(cells):
        log_points(make_running(run), "reward/mean", [0.2 + 0.1 * i] * 6)
    Run.objects.filter(pk=cells[1].pk).update(status=RunStatus.KILLED, killed_by="user:ada",
                                              kill_reason=f"{LINK} {BIG}")
    # an evaluation whose model label carries markup (a sweep's checkpoint is labelled with its run's name)
    job = make_job_with_results(run_with_checkpoints)
    job.models.filter(is_base=False).update(label=f"{LINK} step 4")

    page = browser_page
    ids = f"{runs[0].pk}+{runs[1].pk}"
    log_in(page, live_server, django_user_model, start=f"/runs/compare/?ids={ids}")

    # the compare page: the legend shows both names as written
    wait_for(lambda: page.get_attribute("#compare-chart", "data-traces") == "2", timeout=30, what="two curves")
    page.wait_for_selector("#compare-chart .legend .traces", timeout=10_000)
    assert_shown_as_text(page, "#compare-chart", LINK, BIG)

    # the sweep dashboard: the cells' names in the legend, the kill reason in the stopped marker's hover
    page.goto(f"{live_server.url}/sweeps/{grid.pk}/")
    wait_for(lambda: page.get_attribute("#sweep-chart", "data-stopped") == "1", timeout=30, what="the stopped marker")
    page.wait_for_selector("#sweep-chart .legend .traces", timeout=10_000)
    assert_shown_as_text(page, "#sweep-chart", f"system_prompt={LINK}", f"system_prompt={BIG}")
    hover(page, "sweep-chart", "stopped")
    page.wait_for_selector("#sweep-chart .hoverlayer .hovertext", timeout=10_000)
    assert_shown_as_text(page, "#sweep-chart", f"{LINK} {BIG}")

    # the parallel plot: the text knob's values as the axis's top and bottom labels, and in each line's hover
    page.goto(f"{live_server.url}/sweeps/{grid.pk}/parallel/")
    wait_for(lambda: page.get_attribute("#parallel-chart", "data-dims") is not None, timeout=30, what="the plot")
    assert_shown_as_text(page, "#parallel-chart", "<a href=", '<span style=')  # (the values quoted, as JSON)
    page.evaluate("""() => { const gd = document.getElementById('parallel-chart');
        Plotly.Fx.hover(gd, [{curveNumber: 0, pointNumber: 0}]); }""")
    page.wait_for_selector("#parallel-chart .hoverlayer .hovertext", timeout=10_000)
    assert_shown_as_text(page, "#parallel-chart", "system_prompt: \"<a href=")

    # the run page: the metric's chart title and its legend entry
    page.goto(f"{live_server.url}/runs/{runs[0].pk}/")
    other = page.locator("#chart-other-0")
    other.scroll_into_view_if_needed()
    wait_for(lambda: (other.get_attribute("data-points") or "0") != "0", timeout=30, what="the metric's chart")
    assert_shown_as_text(page, "#chart-other-0", LINK)

    # the pass@k page: the model's label in the legend
    page.goto(f"{live_server.url}/evals/{job.pk}/")
    page.wait_for_selector("#passk-chart[data-ready=true]", timeout=30_000)
    assert_shown_as_text(page, "#passk-chart", f"{LINK} step 4")
