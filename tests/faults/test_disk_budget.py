"""Disk budgets with real workers (two training slots, real Redis): a run writing a checkpoint every step past its
run's disk budget fails alone, naming the budget, while a run of another project trains on to its end, and it is
not restarted as a full-disk run; a project's budget likewise; checkpoints are pruned to the newest 3 by default."""
from __future__ import annotations

import time

import pytest

from tests.conftest import tiny_config
from tests.faults.conftest import status, wait_until
from webapp.projects.models import AuditEvent, Project
from webapp.runs import services
from webapp.runs.disk_budget import folder_bytes
from webapp.runs.models import Checkpoint, Run, RunStatus

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_run_past_its_budget_fails_alone_and_its_neighbour_trains_on(stack):
    stack.start_worker()  # (a second slot: the neighbour trains while the filler does)
    filler_project = Project.objects.create(name="filler", run_disk_budget_mb=12)
    neighbour_project = Project.objects.create(name="neighbour")
    neighbour = services.run_create(project=neighbour_project, config=tiny_config(total_steps=30, checkpoint_every=1,
                                                                                  max_restarts=2))
    wait_until(lambda: status(neighbour) == RunStatus.RUNNING, 240, "the neighbour to start")
    filler = services.run_create(project=filler_project, config=tiny_config(
        total_steps=200, checkpoint_every=1, keep_checkpoints=0, max_restarts=2))
    wait_until(lambda: status(filler) not in (RunStatus.QUEUED, RunStatus.RUNNING), 240, "the filler to end")
    filler.refresh_from_db()
    assert filler.status == RunStatus.FAILED, (filler.status, filler.error)
    assert filler.error.startswith("run's disk budget of 12.0 MB reached: its folder takes "), filler.error
    assert 12e6 <= filler.disk_bytes < 40e6, filler.disk_bytes  # (measured with each 0.5 s heartbeat)
    assert filler.last_step < 200
    assert AuditEvent.objects.filter(action="run.disk_budget", target_id=filler.pk).exists()
    assert status(neighbour) in (RunStatus.RUNNING, RunStatus.SUCCEEDED)  # its neighbour went on
    # its partial checkpoint is gone, and it stays failed through maintenance passes (every 1 s): its own doing
    # (the run is failed first, then its worker kills its process and removes what it was writing)
    wait_until(lambda: not list((stack.run_folder(filler) / "checkpoints").glob("*.tmp")), 30, "no partial left")
    print(f"filler: failed at step {filler.last_step} with {filler.disk_bytes:,} bytes: {filler.error}")
    time.sleep(4)
    filler.refresh_from_db()
    assert (filler.status, filler.restarts) == (RunStatus.FAILED, 0), filler.error
    wait_until(lambda: status(neighbour) != RunStatus.RUNNING, 240, "the neighbour to end")
    neighbour.refresh_from_db()
    assert neighbour.status == RunStatus.SUCCEEDED, neighbour.error
    # pruned by default: a checkpoint every step, the newest 3 kept, in rows and on disk
    assert list(Checkpoint.objects.filter(run=neighbour).order_by("step").values_list("step", flat=True)) == \
        [28, 29, 30]
    on_disk = sorted(p.name for p in (stack.run_folder(neighbour) / "checkpoints").iterdir())
    assert on_disk == ["step_000028", "step_000029", "step_000030"], on_disk
    assert neighbour.disk_bytes > 0


def test_a_project_past_its_budget_fails_the_run_that_finds_it(stack):
    project = Project.objects.create(name="full-project", disk_budget_mb=20)
    # an earlier run of the project (ended) already takes 15 MB of its 20
    Run.objects.create(project=project, name="earlier", config=tiny_config(), status=RunStatus.SUCCEEDED, seed=0,
                       disk_bytes=15_000_000)
    run = services.run_create(project=project, config=tiny_config(total_steps=200, checkpoint_every=1,
                                                                  keep_checkpoints=0))
    wait_until(lambda: status(run) not in (RunStatus.QUEUED, RunStatus.RUNNING), 240, "the run to end")
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED, (run.status, run.error)
    assert run.error.startswith("project's disk budget of 20.0 MB reached: its runs take "), run.error
    assert 5e6 <= run.disk_bytes < 30e6, run.disk_bytes
    assert folder_bytes(stack.run_folder(run)) < 30e6
    print(f"project run: failed at step {run.last_step} with {run.disk_bytes:,} bytes: {run.error}")
