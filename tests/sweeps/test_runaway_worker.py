"""A sweep whose seeds fail before their first step cannot run away, and Stop ends a live sweep (real Redis, a real
Celery worker, the tiny model). The data file's row 1,001 is not an object: the launch checks the first 1,000 rows
(training.data.CHECKED_ROWS) and passes it; the worker reads every row and fails each run at step 0, its error
naming the row as the upload's check names a bad row. On b1d04b3 such a sweep (budget 1 run) made 66 runs in the
60 s after its first failure on this 2-core machine (the budget counted steps run: a run failing at step 0 was
free), and went on until the database was edited."""
from __future__ import annotations

import json
import time

import pytest

from tests.conftest import tiny_config, wait_for
from training.data import CHECKED_ROWS
from webapp.runs.models import ENDED_STATUSES, RunStatus
from webapp.sweeps import halting, services
from webapp.sweeps.models import FreeSlotUse, SweepPlan

pytestmark = [pytest.mark.django_db(transaction=True)]
RUN_TIMEOUT = 300  # generous: 2 shared cores
SETTLE_S = 10  # after the sweep went quiet: long enough for a few more ~1 s failing runs, were any started
# the math verifier reads a boxed answer: without this the launch's reward dry-run refuses the config
ANSWER_FORM = "Put your final answer within \\boxed{}."


def late_bad_rows(folder) -> str:
    """A data file (inside the worker's allowed folders) whose rows 1..CHECKED_ROWS are good and the next a list."""
    folder.mkdir(exist_ok=True)
    path = folder / "late_bad.jsonl"
    rows = [json.dumps({"prompt": f"What is {i} + 1?", "answer": str(i + 1)}) for i in range(CHECKED_ROWS)]
    path.write_text("\n".join([*rows, "[1, 2]"]) + "\n")
    return str(path)


def settled(sweep) -> int:
    """Wait until no run of the sweep is queued or running, then ``SETTLE_S`` more; the number of its runs."""
    wait_for(lambda: sweep.runs.exists() and not sweep.runs.exclude(status__in=ENDED_STATUSES).exists(),
             timeout=RUN_TIMEOUT, what=f"every run of sweep {sweep.pk} to end")
    time.sleep(SETTLE_S)
    assert not sweep.runs.exclude(status__in=ENDED_STATUSES).exists(), "a run was started after the sweep settled"
    return sweep.runs.count()


def test_seeds_failing_at_step_0_make_a_bounded_number_of_runs(celery_worker):
    data = late_bad_rows(celery_worker.home / "data")
    config = tiny_config(task="file", data_path=data, total_steps=4, answer_instruction=ANSWER_FORM)
    one = services.sweep_create(config=config, seeds=[1], concurrency=1, free_slot_use=FreeSlotUse.NEW_SEED,
                                budget=1, name="budget 1")
    assert settled(one) == 1  # b1d04b3: 66 in a minute; now its one run spent the budget
    run = one.runs.get()
    assert run.status == RunStatus.FAILED and run.last_step == 0
    assert f"late_bad.jsonl:{CHECKED_ROWS + 1}: expected an object, got list" in run.error

    ten = services.sweep_create(config=config, seeds=[1], concurrency=1, free_slot_use=FreeSlotUse.NEW_SEED,
                                budget=10, name="budget 10")
    # 10 runs x 4 steps would pay for 40 one-step failures: the rule ends new seeds after 3 in a row
    assert settled(ten) == 1 + halting.FAILED_IN_A_ROW
    assert SweepPlan.objects.get(sweep=ten).new_seeds_halted.startswith("3 new seeds in a row failed")


def test_stop_ends_a_live_sweep_on_a_real_worker(celery_worker):
    sweep = services.sweep_create(config=tiny_config(total_steps=400), seeds=[1, 2], concurrency=1,
                                  free_slot_use=FreeSlotUse.NEW_SEED, budget=4, name="to stop")
    first = sweep.runs.order_by("pk").first()
    wait_for(lambda: sweep.runs.filter(pk=first.pk, last_step__gte=1).exists(), timeout=RUN_TIMEOUT,
             what="the first run's first step")
    _, killed = halting.sweep_stop(sweep_id=sweep.pk, reason="enough")
    assert len(killed) == 2
    assert settled(sweep) == 2  # b1d04b3: the killed run's freed slot started the next seed, then fresh ones
    assert set(sweep.runs.values_list("status", flat=True)) == {RunStatus.KILLED}
    assert SweepPlan.objects.get(sweep=sweep).new_seeds_started == 0
