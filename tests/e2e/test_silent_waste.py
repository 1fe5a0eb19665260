"""A run built to waste its compute silently: the tiny arithmetic model answers with bare digits and
the math verifier wants a final-answer marker, so every reward is 0. Within its first steps the run page (live,
through htmx), the sweep page and the API say so, with the verifier's most common reason."""
from __future__ import annotations

import pytest

from tests.conftest import SCREENSHOTS, log_in, tiny_config, wait_for
from webapp.runs.models import Run
from webapp.sweeps import services as sweep_services

RUN_TIMEOUT = 240
pytestmark = [pytest.mark.django_db(transaction=True)]


def test_a_zero_reward_run_is_flagged_on_its_page_and_its_sweep(live_server, celery_worker, django_user_model,
                                                               browser_page):
    config = tiny_config(total_steps=400, rewards=[{"name": "math", "weight": 1.0}], seed=3)
    sweep = sweep_services.sweep_create(config=config, seeds=[3], concurrency=1, name="bare answers")
    run = sweep.runs.get()
    page = browser_page
    log_in(page, live_server, django_user_model, start=f"/runs/{run.pk}/")
    # the warning appears by itself (the state fragment is polled) once the first 5 steps are in
    page.wait_for_selector(".run-warning[data-warning=zero_reward]", timeout=RUN_TIMEOUT * 1000)
    text = page.text_content(".run-warning[data-warning=zero_reward]")
    assert "reward 0 for every sample in the first 5 steps" in text
    assert 'math: "no final answer found" in 100 % of the logged samples' in text
    assert page.get_attribute(".run-warning a", "href") == "#samples"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "zero_reward_warning.png"))
    run = Run.objects.get(pk=run.pk)
    assert [w["kind"] for w in run.warnings] == ["zero_reward"]

    page.goto(f"{live_server.url}/sweeps/{sweep.pk}/")
    page.wait_for_selector(f"#alerts li[data-kind=zero_reward][data-run='{run.pk}']", timeout=15_000)
    page.once("dialog", lambda dialog: dialog.accept())
    page.check(f"input[name=run][value='{run.pk}']")
    page.click("#kill-selected")
    wait_for(lambda: Run.objects.get(pk=run.pk).is_ended, timeout=90, what="the run to be killed")
