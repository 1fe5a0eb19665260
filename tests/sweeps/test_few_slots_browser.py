"""A sweep run one seed at a time on a real worker (real Redis, the tiny model), watched in a real browser: the
median policy compares each run with the curves of the runs that ran before it at the same steps, so it stops
one; and every row the policy cannot decide about says why, in the dashboard's data and on the page."""
from __future__ import annotations

import pytest

from tests.conftest import SCREENSHOTS, log_in, tiny_config, wait_for
from webapp.runs.models import RunStatus
from webapp.sweeps import selectors, services
from webapp.sweeps.models import PolicyDecision

RUN_TIMEOUT = 240  # generous: 2 shared cores
pytestmark = [pytest.mark.django_db(transaction=True)]

# The grid's second learning rate is a thousand times smaller, and the policy watches the logged learning rate
# itself: the third run (seed 2's small rate) is below the median of the two runs before it at every step it
# shares with them, so it stops, every time. The first run has no peer (concurrency 1): it waits, and says so.
POLICY = {"name": "median", "metric": "lr", "mode": "max", "grace_steps": 2, "min_peers": 1, "min_delta": 0.0,
          "smoothing": "none"}


@pytest.fixture
def page(chromium):
    return chromium.new_page(viewport={"width": 1400, "height": 1100})


def test_a_sweep_run_one_at_a_time_is_decided_and_each_waiting_row_says_why(live_server, celery_worker,
                                                                             django_user_model, page):
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    log_in(page, live_server, django_user_model, start="/sweeps/")
    # 60 steps: the policy checks (at most one a second) and the page's polls must see each run mid-way, and the
    # tiny loop runs 12 steps in about 1.5 s on a quiet machine
    sweep = services.sweep_create(config=tiny_config(total_steps=60), seeds=[1, 2], grid={"lr": [1e-7, 1e-4]},
                                  concurrency=1, policy=POLICY, name="one at a time")
    first, second, third, fourth = sweep.runs.order_by("pk")
    page.goto(f"{live_server.url}/sweeps/{sweep.pk}/")

    def cell(run) -> str:
        return page.locator(f"#runs-table tr[data-run='{run.pk}'] td.next-check").inner_text()

    # the dashboard's data: every live row the policy cannot decide about now says why
    seen: dict[int, set[str]] = {run.pk: set() for run in (first, second, third, fourth)}

    def rows_say_why() -> bool:
        panel = selectors.sweep_panel(sweep=sweep, metric="lr")
        for row in panel["runs"]:
            if row["ended"] or row["kill_requested"]:
                continue
            if row["status"] == RunStatus.QUEUED or row["last_step"] < 2 or row["id"] == first.pk:
                assert row["waiting"], f"run {row['id']} ({row['status']}, step {row['last_step']}) says nothing"
            seen[row["id"]].add(row["waiting"] or "")
        return PolicyDecision.objects.filter(sweep=sweep, action="stop", outcome="applied").exists()

    def first_waits() -> bool:
        rows_say_why()
        return "waiting for peers at step" in cell(first)

    # on the page: the queued seeds, and the first run, which has no peer to be compared with
    wait_for(lambda: "queued; judged from step" in cell(fourth), timeout=30, what="the queued seed's reason")
    wait_for(first_waits, timeout=RUN_TIMEOUT, what="the first run's row to say it waits for peers")
    assert cell(first).endswith("0 of 1")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "sweep_c1_waiting.png"), full_page=True)
    wait_for(rows_say_why, timeout=RUN_TIMEOUT, what="a stop")
    decision = PolicyDecision.objects.get(sweep=sweep, action="stop", outcome="applied")
    assert decision.run_id == third.pk and decision.n_peers == 2 and "below the median" in decision.reason
    assert any(w.startswith("waiting for peers at step") and w.endswith("0 of 1") for w in seen[first.pk])
    assert any(w.startswith("queued; judged from step 2") for w in seen[fourth.pk])

    # the stop and the reasons side by side on the page (kept for the closing note of the change)
    page.wait_for_selector(f"#decisions tr[data-run='{third.pk}'][data-action=stop]", timeout=10_000)
    page.wait_for_selector(f"#runs-table tr[data-run='{third.pk}'][data-status=killed]", timeout=10_000)
    page.screenshot(path=str(SCREENSHOTS / "sweep_c1.png"), full_page=True)
    assert script_errors == []

    wait_for(lambda: not sweep.runs.exclude(status__in=[RunStatus.KILLED, RunStatus.SUCCEEDED]).exists(),
             timeout=RUN_TIMEOUT, what="every run of the sweep to end")
    assert PolicyDecision.objects.filter(sweep=sweep, action="stop").count() == 1
