"""Disk budgets without a worker: the service that stores a run's measured size fails it past its run's or its
project's budget, naming the budget, and only it; the budgets' defaults come from the runs folder's disk; staff's
values are bounded; a full-disk run past its budget is not restarted; checkpoints are pruned by default."""
from __future__ import annotations

import shutil

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError

from tests.conftest import tiny_config
from webapp.projects.models import Project
from webapp.runs import services
from webapp.runs.disk_budget import budgets, folder_bytes
from webapp.runs.models import FailureKind, Run, RunStatus
from webapp.runs.stall import bounded_setting
from training.config import TrainConfig

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def running(project, **fields) -> Run:
    return Run.objects.create(project=project, config=tiny_config(), status=RunStatus.RUNNING, worker="w:1", seed=0,
                              **fields)


def test_a_run_past_its_budget_fails_naming_it_and_its_neighbours_go_on():
    small = Project.objects.create(name="small", run_disk_budget_mb=2)
    other = Project.objects.create(name="other")
    filler, mate, neighbour = running(small), running(small), running(other)
    assert services.run_disk_check(run_id=filler.pk, used=1_500_000) == ""
    why = services.run_disk_check(run_id=filler.pk, used=2_300_000)
    assert why.startswith("run's disk budget of 2.0 MB reached: its folder takes 2.3 MB"), why
    filler.refresh_from_db()
    assert (filler.status, filler.error, filler.disk_bytes) == (RunStatus.FAILED, why, 2_300_000)
    for run in (mate, neighbour):
        run.refresh_from_db()
        assert run.status == RunStatus.RUNNING
    assert services.run_disk_check(run_id=neighbour.pk, used=50_000_000) == ""  # its own default budget


def test_a_project_past_its_budget_fails_the_run_that_finds_it():
    project = Project.objects.create(name="shared", disk_budget_mb=10)
    Run.objects.create(project=project, config=tiny_config(), status=RunStatus.SUCCEEDED, seed=0,
                       disk_bytes=8_000_000)
    run = running(project)
    assert services.run_disk_check(run_id=run.pk, used=1_000_000) == ""
    why = services.run_disk_check(run_id=run.pk, used=2_500_000)
    assert why.startswith("project's disk budget of 10.0 MB reached: its runs take 10.5 MB, this one 2.5 MB"), why
    assert Run.objects.get(pk=run.pk).status == RunStatus.FAILED


def test_the_defaults_are_fractions_of_the_runs_disk(tmp_path):
    settings.SEEDBED_RUNS_DIR.mkdir(parents=True, exist_ok=True)
    size = shutil.disk_usage(settings.SEEDBED_RUNS_DIR).total
    assert budgets(Project(name="p")) == (int(0.25 * size), int(0.5 * size))
    assert budgets(Project(name="p", run_disk_budget_mb=3, disk_budget_mb=7)) == (3_000_000, 7_000_000)
    with pytest.raises(ValueError, match="SEEDBED_RUN_DISK_FRACTION: 2 is out of bounds"):
        bounded_setting("SEEDBED_RUN_DISK_FRACTION", 0.25, (0.001, 1.0), environ={"SEEDBED_RUN_DISK_FRACTION": "2"})


@pytest.mark.parametrize("field", ["run_disk_budget_mb", "disk_budget_mb"])
@pytest.mark.parametrize("value", [0, 100_000_001])
def test_staffs_budgets_are_bounded(field, value):
    with pytest.raises(ValidationError) as caught:
        Project(name="p", **{field: value}).full_clean()
    assert field in caught.value.message_dict


def test_the_admin_edits_the_budgets(admin_client):
    project = Project.objects.create(name="edited")
    answer = admin_client.get(f"/admin/projects/project/{project.pk}/change/")
    assert b'name="run_disk_budget_mb"' in answer.content and b'name="disk_budget_mb"' in answer.content


def test_a_full_disk_run_past_its_budget_is_not_restarted(tmp_path):
    project = Project.objects.create(name="filler", run_disk_budget_mb=1)
    run = Run.objects.create(project=project, config=tiny_config(max_restarts=2), status=RunStatus.FAILED, seed=0,
                             disk_bytes=5_000_000, error=f"no space left on device under {tmp_path}: 0 B free",
                             failure_kind=FailureKind.DISK_FULL)
    assert services.runs_restart_after_disk_full(min_free_bytes=0) == []
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.restarts == 0
    assert run.error.startswith("run's disk budget of 1.0 MB reached"), run.error


def test_checkpoints_are_pruned_by_default():
    assert TrainConfig().keep_checkpoints == 3


def test_folder_bytes_counts_blocks_once(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 100_000)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b").hardlink_to(tmp_path / "a")
    with open(tmp_path / "sparse", "wb") as fh:
        fh.truncate(10_000_000)
    assert 100_000 <= folder_bytes(tmp_path) < 200_000
    assert folder_bytes(tmp_path / "gone") == 0


def test_files_removed_from_an_ended_run_give_the_project_its_budget_back(tmp_path):
    import socket

    project = Project.objects.create(name="freed", disk_budget_mb=10)
    here = Run.objects.create(project=project, config=tiny_config(), status=RunStatus.SUCCEEDED, seed=0,
                              disk_bytes=8_000_000, worker=f"{socket.gethostname()}:1")
    elsewhere = Run.objects.create(project=project, config=tiny_config(), status=RunStatus.SUCCEEDED, seed=0,
                                   disk_bytes=1_000_000, worker="another-machine:1")
    run = running(project)
    # the run that ran here has had its folder removed: measured again, 0; the other machine's run keeps its size
    assert services.run_disk_check(run_id=run.pk, used=2_500_000) == ""
    assert Run.objects.get(pk=here.pk).disk_bytes == 0
    assert Run.objects.get(pk=elsewhere.pk).disk_bytes == 1_000_000
    assert services.run_disk_check(run_id=run.pk, used=9_500_000).startswith(
        "project's disk budget of 10.0 MB reached: its runs take 10.5 MB")


def test_a_restart_after_a_full_disk_is_decided_by_the_failure_kind_not_the_error_text(tmp_path):
    project = Project.objects.create(name="kinds")
    said = Run.objects.create(project=project, config=tiny_config(max_restarts=1), status=RunStatus.FAILED, seed=0,
                              error=f"no space left on device under {tmp_path}: 0 B free",
                              failure_kind=FailureKind.ERROR)  # its own error, whose words happen to say so
    full = Run.objects.create(project=project, config=tiny_config(max_restarts=1), status=RunStatus.FAILED, seed=1,
                              error="OSError: [Errno 28] write failed", failure_kind=FailureKind.DISK_FULL)
    assert services.runs_restart_after_disk_full(min_free_bytes=0) == [full.pk]
    said.refresh_from_db(), full.refresh_from_db()
    assert said.status == RunStatus.FAILED and full.status == RunStatus.QUEUED and full.restarts == 1
    assert full.failure_kind == ""  # back in the queue: no failure now
