"""A 2-rank run from the browser, against a real Celery worker: launched from the new-run form with
nproc_per_node 2 and strategy ddp, its ranks listed on its page while it trains, killed with the Kill button
(both ranks stop after the same step and save), then resumed on one rank from that checkpoint."""
from __future__ import annotations

import os

import pytest

from tests.conftest import SCREENSHOTS, log_in, wait_for
from webapp.runs.models import Checkpoint, Run, RunStatus

RUN_TIMEOUT = 240
pytestmark = [pytest.mark.django_db(transaction=True)]


def test_a_two_rank_run_from_the_form_is_killed_and_resumed_on_one_rank(live_server, celery_worker, worker_env,
                                                                       django_user_model, browser_page):
    page = browser_page
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    log_in(page, live_server, django_user_model, start="/runs/new/")
    page.fill("#id_name", "two ranks from the form")
    for field, value in {"nproc_per_node": "2", "total_steps": "3000", "prompts_per_step": "4", "group_size": "4",
                         "max_new_tokens": "6", "seed": "9"}.items():
        page.fill(f"#id_{field}", value)
    page.select_option("#id_strategy", "ddp")
    page.click("#launch")
    page.wait_for_url("**/runs/*/")
    run = Run.objects.get(name="two ranks from the form")
    assert (run.config["nproc_per_node"], run.config["strategy"]) == (2, "ddp")
    assert page.text_content("#engine-badge") == "engine: seedbed · 2 ranks, ddp"

    # the ranks table appears by itself (htmx) once the ranks reported, with both ranks' processes
    page.wait_for_selector("#ranks tbody tr[data-rank='1']", timeout=RUN_TIMEOUT * 1000)
    pids = [int(page.text_content(f"#ranks tr[data-rank='{r}'] td:nth-child(4)")) for r in (0, 1)]
    assert len(set(pids)) == 2 and all(os.path.exists(f"/proc/{p}") for p in pids)
    wait_for(lambda: Run.objects.get(pk=run.pk).last_step >= 3, timeout=RUN_TIMEOUT, what="3 steps")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "two_rank_run.png"), full_page=True)
    page.once("dialog", lambda dialog: dialog.accept())  # the Kill confirmation
    page.click("#kill")
    page.wait_for_selector(".run-head .status[data-status=killed]", timeout=90_000)
    run = Run.objects.get(pk=run.pk)
    assert run.error == "" and Checkpoint.objects.filter(run=run, step=run.last_step).exists()
    wait_for(lambda: not any(os.path.exists(f"/proc/{p}") for p in pids), timeout=15, what="both ranks gone")

    killed_at = run.last_step
    page.select_option("#resume-ranks", "1")
    page.click("#resume")
    wait_for(lambda: Run.objects.get(pk=run.pk).last_step >= killed_at + 2, timeout=RUN_TIMEOUT,
             what="the run resumed on one rank to train past its checkpoint")
    run = Run.objects.get(pk=run.pk)
    assert run.config["nproc_per_node"] == 1 and run.status == RunStatus.RUNNING
    page.wait_for_selector(".run-head .status[data-status=running]", timeout=15_000)
    page.once("dialog", lambda dialog: dialog.accept())  # the Kill confirmation
    page.click("#kill")
    page.wait_for_selector(".run-head .status[data-status=killed]", timeout=90_000)
    assert script_errors == []
