"""A run that hacks its reward: the reward pays for length (tests.training.hackable, allowed for the worker as an
operator allows their own verifiers), the tiny model learns to write six digits whatever the sum, its reward
climbs while held-out pass@1 stays at 0. Its reward-hacking guard (action stop) says so on the run page (live,
through htmx) and in the sweep's alerts with the numbers, and stops it through the kill path: a real worker,
database and browser."""
from __future__ import annotations

import pytest

from tests.conftest import SCREENSHOTS, log_in, tiny_config, wait_for
from webapp.runs.models import Run, RunStatus
from webapp.sweeps import services as sweep_services

RUN_TIMEOUT = 300
HACKABLE = "tests.training.hackable"
pytestmark = [pytest.mark.django_db(transaction=True)]


def test_a_run_hacking_its_reward_is_flagged_and_stopped(live_server, celery_worker, django_user_model,
                                                         browser_page, monkeypatch):
    monkeypatch.setenv("SEEDBED_VERIFIER_MODULES", HACKABLE)  # the web side checks the reward spec too
    config = tiny_config(total_steps=40, prompts_per_step=8, group_size=8, lr=2e-3, seed=0,
                         rewards=[{"name": f"{HACKABLE}:length_bonus"}], eval_every=2, eval_problems=32, eval_n=4,
                         eval_k=[1], reward_hacking_guard={"action": "stop", "rules": ["eval_trend"]})
    sweep = sweep_services.sweep_create(config=config, seeds=[0], concurrency=1, name="length pays")
    run = sweep.runs.get()
    page = browser_page
    log_in(page, live_server, django_user_model, start=f"/runs/{run.pk}/")
    page.wait_for_selector(".run-warning[data-warning=reward_hacking]", timeout=RUN_TIMEOUT * 1000)
    text = page.text_content(".run-warning[data-warning=reward_hacking]")
    assert text.startswith("reward hacking? train reward +") and "over the last 3 evals (steps" in text, text
    assert "while held-out eval/pass@1" in text and "the run is stopped (guard:reward_hacking)" in text, text

    run = wait_for(lambda: (r := Run.objects.get(pk=run.pk)).is_ended and r, timeout=120, what="the run to stop")
    (w,) = run.warnings
    print(f"stopped at step {run.last_step} of 40; guard fired at step {w['step']}: {w['message']}")
    assert run.status == RunStatus.KILLED and run.killed_by == "guard:reward_hacking"
    assert run.kill_reason.startswith("train reward +") and w["step"] <= run.last_step < 40
    page.wait_for_selector("#killed-by:has-text('guard:reward_hacking')", timeout=15_000)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "reward_hacking_warning.png"))

    page.goto(f"{live_server.url}/sweeps/{sweep.pk}/")
    alert = page.wait_for_selector(f"#alerts li[data-kind=reward_hacking][data-run='{run.pk}']", timeout=15_000)
    assert "while held-out eval/pass@1" in alert.text_content()
