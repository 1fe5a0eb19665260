"""The runs table in a real browser: type a search, sort by a column, go to page 2; the URL holds all of it, so
reloading it (or opening it afresh) shows the same search in the box and the same rows."""
from __future__ import annotations

import pytest

from tests.conftest import SCREENSHOTS, log_in, tiny_config, wait_for
from webapp.projects.models import Project
from webapp.projects.services import default_project
from webapp.runs.models import Run

pytestmark = [pytest.mark.django_db(transaction=True)]


def table_state(page) -> dict:
    return {"q": page.input_value("#run-search"),
            "rows": [int(pk) for pk in page.eval_on_selector_all("#runs tbody tr[data-run]",
                                                                 "rows => rows.map(r => r.dataset.run)")],
            "count": page.text_content("#run-count"),
            "sorted": page.get_attribute("th[aria-sort=ascending] a", "data-sort")}


def test_search_sort_and_page_survive_a_reload(live_server, django_user_model, browser_page):
    lab = default_project()
    # 70 "alpha" runs, the first 10 with a small lr; "beta" runs and another project's "alpha" runs match too
    # much or must never show
    other = Project.objects.create(name="other lab")
    Run.objects.bulk_create(
        [Run(project=lab, name=f"alpha {i}", seed=i, config={**tiny_config(), "lr": 1e-6 if i < 10 else 1e-4,
                                                            "seed": i}) for i in range(70)]
        + [Run(project=lab, name=f"beta {i}", seed=100 + i, config={**tiny_config(), "lr": 1e-4}) for i in range(5)]
        + [Run(project=other, name=f"alpha other {i}", seed=200 + i, config={**tiny_config(), "lr": 1e-4})
           for i in range(5)])
    by_seed = {run.seed: run.pk for run in Run.objects.all()}
    page = browser_page
    log_in(page, live_server, django_user_model, start="/runs/")
    assert page.text_content("#run-count") == "runs 1–50 of 75"

    page.fill("#run-search", "alpha lr>1e-5")
    page.click("#run-search-submit")
    page.wait_for_url("**/runs/?q=alpha+lr%3E1e-5")
    assert page.text_content("#run-count") == "runs 1–50 of 60"

    page.click("#runs th a[data-sort=seed]")
    page.wait_for_url("**sort=seed")
    assert table_state(page)["rows"] == [by_seed[s] for s in range(10, 60)]

    page.click("#page-next")
    page.wait_for_url("**page=2")
    before = table_state(page)
    assert before == {"q": "alpha lr>1e-5", "rows": [by_seed[s] for s in range(60, 70)], "count": "runs 51–60 of 60",
                      "sorted": "seed"}
    url = page.url
    assert url.endswith("/runs/?q=alpha+lr%3E1e-5&sort=seed&page=2")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "runs_table.png"), full_page=True)

    page.reload()
    assert table_state(page) == before
    # and afresh, from the address alone
    fresh = page.context.new_page()
    fresh.goto(url)
    assert table_state(fresh) == before


def test_bulk_tagging_asks_first_and_keeps_the_search(live_server, django_user_model, browser_page, tiny_model_dir):
    from webapp.runs import services as run_services

    runs = [run_services.run_create(config=tiny_config(), name=f"bulk {i}") for i in range(3)]
    page = browser_page
    log_in(page, live_server, django_user_model, start="/runs/?q=bulk&sort=name")
    for run in runs[:2]:
        page.check(f"#pick-{run.pk}")
    page.select_option("#bulk-action", "tag")
    page.fill("#bulk-tags", "ablation")
    questions = []
    page.once("dialog", lambda dialog: (questions.append(dialog.message), dialog.dismiss()))
    page.click("#bulk-apply")
    wait_for(lambda: questions, timeout=10, what="the confirmation")
    assert all(not Run.objects.get(pk=r.pk).tags for r in runs)  # answered no: nothing happened
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#bulk-apply")
    page.wait_for_url("**/runs/?q=bulk&sort=name")
    assert [Run.objects.get(pk=r.pk).tags for r in runs] == [["ablation"], ["ablation"], []]
    assert page.locator(f"tr[data-run='{runs[0].pk}'] .tag").text_content() == "ablation"


def sorted_state(page) -> dict:
    """The table's state, its sort either way (``table_state`` reads an ascending one)."""
    return {"q": page.input_value("#run-search"),
            "rows": [int(pk) for pk in page.eval_on_selector_all("#runs tbody tr[data-run]",
                                                                 "rows => rows.map(r => r.dataset.run)")],
            "count": page.text_content("#run-count"),
            "sorted": page.eval_on_selector_all(
                "#runs th[aria-sort=ascending] a, #runs th[aria-sort=descending] a",
                "links => links.map(a => a.closest('th').getAttribute('aria-sort') + ' ' + a.dataset.sort)")}


def test_filter_by_tag_and_sort_by_a_final_value_survive_a_reload(live_server, django_user_model, browser_page):
    from webapp.runs.models import MetricPoint

    lab = default_project()
    # 8 runs of 20 steps; reward/mean ends at 0.1 * i for run i; the even ones tagged "keep", one "keeper"
    runs = [Run.objects.create(project=lab, name=f"curve {i}", seed=i, config={**tiny_config(), "seed": i},
                               last_step=20, tags=["keep"] if i % 2 == 0 else (["keeper"] if i == 1 else []))
            for i in range(8)]
    MetricPoint.objects.bulk_create([MetricPoint(run=run, step=s, key="reward/mean",
                                                 value=0.05 * i if s <= 18 else 0.1 * i)
                                     for i, run in enumerate(runs) for s in range(1, 21)])
    page = browser_page
    log_in(page, live_server, django_user_model, start="/runs/")
    page.fill("#run-search", "tag:keep")
    page.click("#run-search-submit")
    page.wait_for_url("**/runs/?q=tag%3Akeep")
    assert sorted(sorted_state(page)["rows"]) == [runs[i].pk for i in (0, 2, 4, 6)]  # not "keeper"

    page.click("#col-picker summary")
    page.check("input[name=cols][value='final:reward/mean']")
    page.click("#col-apply")
    page.wait_for_url("**cols=final%3Areward%2Fmean")
    page.click("#runs th a[data-sort='final:reward/mean']")  # best first
    page.wait_for_url("**sort=-final%3Areward%2Fmean**")
    before = sorted_state(page)
    assert before["rows"] == [runs[i].pk for i in (6, 4, 2, 0)]
    assert before["q"] == "tag:keep" and before["count"] == "runs 1–4 of 4"
    assert before["sorted"] == ["descending final:reward/mean"]
    finals = page.eval_on_selector_all("#runs tbody td.final-col", "cells => cells.map(c => c.textContent.trim())")
    assert finals == ["0.6000", "0.4000", "0.2000", "0.0000"]  # the mean of the last 2 of 20 steps
    assert page.get_attribute("#runs th.final-col", "aria-sort") == "descending"
    url = page.url
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "runs_table_final_sort.png"), full_page=True)

    page.reload()
    assert sorted_state(page) == before
    fresh = page.context.new_page()
    fresh.goto(url)
    assert sorted_state(fresh) == before
    assert fresh.is_checked("input[name=cols][value='final:reward/mean']")
    fresh.click("#runs th a[data-sort='final:reward/mean']")  # reversed
    fresh.wait_for_url("**sort=final%3Areward%2Fmean**")
    assert sorted_state(fresh)["rows"] == [runs[i].pk for i in (0, 2, 4, 6)]
