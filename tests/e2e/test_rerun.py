""""Re-run with changes" in a browser: from a run's page, a sweep's page and the compare page, the form opens filled
with the original's settings, a change is listed before launch ("lr: 3e-05 → 2e-05"), and the launched run or
sweep says what it was copied from. The originals ask for a GPU (queue gpu, which no test worker takes): they and
their copies stay queued, nothing trains."""
import os

import pytest

from tests.conftest import log_in, tiny_config, wait_for
from webapp.runs import services as run_services
from webapp.runs.models import Run
from webapp.sweeps import services as sweep_services
from webapp.sweeps.models import Sweep

pytestmark = [pytest.mark.django_db(transaction=True)]

SCREENS = os.environ.get("SEEDBED_ISSUE_SCREENS", "")  # where a closing note's screenshots go, when asked
PARAMS = '{"min_terms": 2, "max_terms": 2, "max_digits": 1}'


def original_config(**overrides) -> dict:
    return tiny_config(**{"device": "cuda", "task": "reasoning_gym:basic_arithmetic", "lr": 3e-05, "seed": 12,
                          "task_params": {"min_terms": 2, "max_terms": 2, "max_digits": 1}, **overrides})


def changes_listed(page) -> list[str]:
    return page.eval_on_selector_all("#copy-diff li", "items => items.map(li => li.textContent)")


def test_a_run_re_run_with_a_change_shows_it_before_launch_and_says_copied_from(live_server, django_user_model,
                                                                                browser_page):
    original = run_services.run_create(config=original_config(), name="original run")
    page = browser_page
    log_in(page, live_server, django_user_model, start=f"/runs/{original.pk}/")
    page.click("#rerun-link")
    page.wait_for_url(f"**/runs/new/?copy_of={original.pk}")
    assert page.input_value("#id_lr") == "3e-05" and page.input_value("#id_seed") == "12"
    assert page.input_value("#id_task") == "reasoning_gym:basic_arithmetic"
    assert page.input_value("#id_task_params") == PARAMS and page.input_value("#id_device") == "cuda"
    assert page.is_visible("#copy-diff-none") and changes_listed(page) == []
    page.fill("#id_lr", "2e-05")
    wait_for(lambda: changes_listed(page) == ["lr: 3e-05 → 2e-05"], timeout=10, what="the change listed")
    assert not page.is_visible("#copy-diff-none")
    if SCREENS:  # the closing note's picture of the form's changes list
        page.locator("#copy-of").screenshot(path=os.path.join(SCREENS, "item2-rerun-form.png"))
    page.fill("#id_lr", "3e-05")  # back to the original's: no change any more
    wait_for(lambda: changes_listed(page) == [], timeout=10, what="the change gone")
    page.fill("#id_seed", "13")
    page.click("#launch")
    page.wait_for_url("**/runs/*/")
    copy = Run.objects.exclude(pk=original.pk).get()
    assert page.url.endswith(f"/runs/{copy.pk}/") and copy.copied_from_id == original.pk
    note = page.text_content("#copied-from")
    assert f"Copied from run {original.pk}, changed:" in note and "seed: 12 → 13" in note
    if SCREENS:
        page.locator("#copied-from").screenshot(path=os.path.join(SCREENS, "item2-copied-from.png"))
    assert {k: v for k, v in copy.config.items() if k != "seed"} == {
        k: v for k, v in original.config.items() if k != "seed"}


def test_a_sweep_re_run_keeps_seeds_grid_and_policy_and_lists_a_change(live_server, django_user_model,
                                                                       browser_page):
    original = sweep_services.sweep_create(config=original_config(), seeds=[4, 9], concurrency=3,
                                           name="original sweep", grid={"lr": [1e-4, 2e-4]},
                                           policy={"name": "median", "metric": "reward/mean", "grace_steps": 2,
                                                   "min_peers": 1})
    page = browser_page
    log_in(page, live_server, django_user_model, start=f"/sweeps/{original.pk}/")
    page.click("#rerun-link")
    page.wait_for_url(f"**/sweeps/new/?copy_of={original.pk}")
    assert page.input_value("#id_seeds") == "4, 9" and page.input_value("#id_grid") == "lr = 0.0001, 0.0002"
    assert page.input_value("#id_concurrency") == "3" and page.input_value("#id_policy_name") == "median"
    assert page.input_value("#id_task_params") == PARAMS
    page.fill("#id_concurrency", "1")
    wait_for(lambda: changes_listed(page) == ["concurrency: 3 → 1"], timeout=10, what="the change listed")
    page.click("#launch")
    page.wait_for_url("**/sweeps/*/")
    copy = Sweep.objects.exclude(pk=original.pk).get()
    assert page.url.endswith(f"/sweeps/{copy.pk}/") and copy.copied_from_id == original.pk
    note = page.text_content("#copied-from")
    assert f"Copied from sweep {original.pk}, changed:" in note and "concurrency: 3 → 1" in note
    assert copy.seeds == [4, 9] and copy.runs.count() == 4


def test_the_compare_page_re_runs_one_of_its_runs(live_server, django_user_model, browser_page):
    runs = [run_services.run_create(config=original_config(seed=s), name=f"seed {s}") for s in (1, 2)]
    page = browser_page
    ids = f"{runs[0].pk}+{runs[1].pk}"
    log_in(page, live_server, django_user_model, start=f"/runs/compare/?ids={ids}")
    page.click(f"#compare-summary tr[data-run='{runs[1].pk}'] .rerun-link")
    page.wait_for_url(f"**/runs/new/?copy_of={runs[1].pk}")
    assert page.input_value("#id_seed") == "2" and page.text_content("#copy-source") == f"run {runs[1].pk}"
