"""A run a worker took while the built-in model is being built, in a real browser (Playwright driving Debian's
Chromium): its page says ``waiting`` with the build's progress (not ``running``), the runs list counts no duration
for the wait, and once its first step is stored it shows ``running``. The build is another process's lock on the
model folder (training.tiny): the test holds that lock itself."""
from __future__ import annotations

import fcntl
import json
import os
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.conftest import SCREENSHOTS, log_in, tiny_config
from webapp.runs import services
from webapp.runs.models import Run, RunStatus

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def building(tmp_path, monkeypatch):
    """The built-in model's folder with its build under way (its lock held, its progress file written)."""
    out = tmp_path / "tiny"
    monkeypatch.setenv("SEEDBED_TINY_MODEL", str(out))
    with open(f"{out}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        (tmp_path / "tiny.progress.json").write_text(json.dumps(
            {"step": 120, "pass1": 0.08, "target": 0.15, "started_at": time.time() - 30, "pid": os.getpid()}))
        yield out
        fcntl.flock(lock, fcntl.LOCK_UN)


def test_a_run_waiting_for_the_model_build_shows_waiting_and_no_duration(live_server, django_user_model,
                                                                          browser_page, building):
    page = browser_page
    run = services.run_create(config=tiny_config(device="cuda", total_steps=20), name="waits for the build")
    # a worker took it 90 s ago; it has stored no step: its training waits for the build
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=timezone.now() - timedelta(seconds=90),
                                         heartbeat_at=timezone.now(), worker="test:1")
    log_in(page, live_server, django_user_model, start=f"/runs/{run.pk}/")  # (a member of its project)
    if os.environ.get("SEEDBED_SCREENSHOT_AS"):
        page.screenshot(path=os.environ["SEEDBED_SCREENSHOT_AS"], full_page=False)
    badge = page.locator("#run-state h1 .status")
    assert badge.text_content() == "waiting" and badge.get_attribute("data-status") == "waiting"
    reason = page.locator("#run-state h1 .wait-reason").text_content()
    assert reason == "the built-in model is being built (SFT step 120, pass@1 0.080 of 0.15)"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "run_waiting_for_build.png"))

    # the runs list says so too (its duration, counted from the first step: tests/runs/test_waiting.py)
    page.goto(f"{live_server.url}/runs/")
    row = page.locator("tr", has=page.locator(f"a[href='/runs/{run.pk}/']"))
    assert row.locator(".status[data-status=waiting]").count() == 1

    # its first step: running from then on (the page polls its state)
    services.run_metrics_append(run_id=run.pk, points=[(1, "reward/mean", 0.1)])
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.wait_for_selector("#run-state h1 .status[data-status=running]", timeout=10_000)
    assert page.locator("#run-state h1 .wait-reason").count() == 0
