"""A sweep with a budget on a real Celery worker (real Redis, real training on the tiny task): a policy stop frees
compute, the freed slot starts a new seed (a seed number never used before), and the seeds started never need
more than the budget (policies.budget: a new seed starts only if it can run to its end within it)."""
from __future__ import annotations

import pytest

from tests.conftest import tiny_config, wait_for
from webapp.runs.models import RunStatus
from webapp.sweeps import services
from webapp.sweeps.models import FreeSlotUse, PolicyDecision, SweepPlan

pytestmark = [pytest.mark.django_db(transaction=True)]
RUN_TIMEOUT = 300  # generous: 2 shared cores
# long enough that the policy's checks (at most one a second per sweep) see the runs mid-way: the tiny loop now
# runs 12 steps in about 1.5 s on a quiet machine, so a 12-step sweep could end before any check compared its seeds
STEPS = 60
# as tests/sweeps/test_worker.py: entropy differs between seeds at every step, so with one peer and no margin the
# lower one stops at the first step both reached after the grace period
POLICY = {"name": "median", "metric": "entropy", "mode": "max", "grace_steps": 2, "min_peers": 1, "min_delta": 0.0,
          "smoothing": "none"}


def test_a_stop_starts_a_new_seed_and_no_more_seeds_than_the_budget_of_3_runs_pays_for(celery_worker):
    sweep = services.sweep_create(config=tiny_config(total_steps=STEPS), seeds=[31, 32], concurrency=2,
                                  policy=POLICY, free_slot_use=FreeSlotUse.NEW_SEED, budget=3, name="budget sweep")

    def running_count() -> int:
        count = sweep.runs.filter(status=RunStatus.RUNNING).count()
        assert count <= 2, "the concurrency limit was exceeded"
        return count

    first = wait_for(lambda: running_count() <= 2 and PolicyDecision.objects.filter(sweep=sweep, action="stop").first(),
                     timeout=RUN_TIMEOUT, what="the policy's first stop")
    assert first.outcome == "applied" and "started fresh seed 33" in first.note and "budget 3 runs: " in first.note
    wait_for(lambda: running_count() <= 2 and not sweep.runs.exclude(
                 status__in=[RunStatus.KILLED, RunStatus.SUCCEEDED, RunStatus.FAILED]).exists(),
             timeout=RUN_TIMEOUT, what="every run of the sweep to end")

    runs = list(sweep.runs.order_by("pk"))
    assert all(run.status != RunStatus.FAILED for run in runs), [(r.pk, r.error) for r in runs]
    sweep.refresh_from_db()
    plan = SweepPlan.objects.get(sweep=sweep)
    fresh = runs[2:]
    assert len(fresh) == plan.new_seeds_started >= 1
    # fresh seed numbers, never one the sweep had, and the sweep lists them
    assert [r.seed for r in runs] == sweep.seeds == list(range(31, 31 + len(runs)))
    # what the runs needed, counting a stopped run up to its stop (it may log a step while it winds down, which
    # the stop's accounting could not know): never more than the budget of 3 runs
    stops = {d.run_id: d.step for d in PolicyDecision.objects.filter(sweep=sweep, action="stop", outcome="applied")}
    needed = sum(min(run.last_step, stops[run.pk]) if run.pk in stops else STEPS for run in runs)
    assert needed <= 3 * STEPS, (needed, [(r.pk, r.last_step, stops.get(r.pk)) for r in runs])
    # and no more seeds than that allows: one more full run would not have fitted when the last slot was freed
    assert len(runs) <= 3 + len(stops)
    # every run not stopped ran to its end: no seed was started that the budget could not finish
    assert all(run.last_step == STEPS for run in runs if run.pk not in stops)
