"""The disk under the runs folder fills up while a run writes a checkpoint: that run fails, saying so ("no space
left on device under <folder>: <free> free", carried from its training process through a pipe, not through its
log on the full disk), in errors.log too; the workers stay up; once space is freed the maintenance pass restarts
it from its last whole checkpoint (a restart under max_restarts) and it ends with every step stored once.

The runs folder is a small tmpfs of its own (root only: mount); the database is elsewhere, as it is when
$SEEDBED_HOME's runs live on a data disk."""
from __future__ import annotations

import os
import subprocess
import time

import pytest

from tests.conftest import tiny_config, wait_for
from tests.faults.conftest import status, wait_until
from webapp.projects.models import AuditEvent, Project
from webapp.projects.services import default_project
from webapp.runs import services
from webapp.runs.models import Checkpoint, MetricPoint, RunStatus

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs (root only)")]

STEPS = 40


def maintenance_passes(home) -> str:
    try:
        return (home / "maintenance.json").read_text()
    except OSError:
        return ""


def test_a_full_disk_fails_the_run_clearly_and_it_restarts_once_space_is_back(stack):
    runs = stack.home / "runs"
    runs.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(runs)], check=True)
    filler = runs / "filler"
    try:
        # a resume needs 1 MB free here (and room for two checkpoints), not the default 512 MB
        stack.maintenance.stop()
        stack.env["SEEDBED_DISK_RESUME_MB"] = "1"
        stack.start_maintenance()
        # (a disk this small would make the default budgets, fractions of it, end the run before it fills)
        Project.objects.filter(pk=default_project().pk).update(run_disk_budget_mb=10**6, disk_budget_mb=10**6)
        run = services.run_create(config=tiny_config(total_steps=STEPS, checkpoint_every=2, keep_checkpoints=2,
                                                     max_restarts=2))
        wait_until(lambda: Checkpoint.objects.filter(run=run).exists(), 240, "the run's first checkpoint")
        # the disk fills up: the next checkpoint cannot be written
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M"], capture_output=True)
        filled_at = time.monotonic()
        wait_until(lambda: status(run) != RunStatus.RUNNING, 120, "the run to end on the full disk")
        failed_s = time.monotonic() - filled_at
        run.refresh_from_db()
        folder = str(stack.run_folder(run))  # (this process's settings name another home)
        assert run.status == RunStatus.FAILED and run.failure_kind == "disk_full", (run.status, run.error)
        first = run.error.splitlines()[0]
        assert first.startswith(f"no space left on device under {folder}: ") and first.endswith(" free"), run.error
        assert "no space left on device under" in (stack.home / "logs" / "errors.log").read_text()
        for worker in stack.workers[-2:]:  # the training worker and the maintenance worker stayed up
            assert worker.proc.poll() is None, worker.log()[-3000:]
        # no restart while the disk is still full (two maintenance passes later)
        for _ in range(2):
            seen = maintenance_passes(stack.home)
            wait_until(lambda: maintenance_passes(stack.home) != seen, 60, "a maintenance pass")
        run.refresh_from_db()
        assert run.status == RunStatus.FAILED and run.restarts == 0
        # space is freed: the run restarts by itself from its last whole checkpoint and ends
        filler.unlink()
        freed_at = time.monotonic()
        wait_until(lambda: status(run) != RunStatus.FAILED, 60, "the run to restart once space is back")
        restarted_s = time.monotonic() - freed_at
        wait_until(lambda: status(run) in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.LOST), 300,
                   "the restarted run to end")
        run.refresh_from_db()
        assert run.status == RunStatus.SUCCEEDED, run.error
        assert run.restarts == 1
        assert AuditEvent.objects.filter(action="run.restart", target_type="run", target_id=run.pk).exists()
        stored = list(MetricPoint.objects.filter(run=run, key="reward/mean").order_by("step")
                      .values_list("step", flat=True))
        assert stored == list(range(1, STEPS + 1))  # no metric point lost, none twice
        print(f"\nfault: disk full during a checkpoint -> run failed {failed_s:.1f} s after "
              f"(said why); restarted {restarted_s:.1f} s after space was freed, succeeded")
    finally:
        for worker in stack.workers:
            worker.stop()
        wait_for(lambda: subprocess.run(["umount", str(runs)], capture_output=True).returncode == 0,
                 timeout=60, every=1, what=f"{runs} to be unmounted")


def test_the_doctor_reports_a_full_runs_disk(tmp_path, monkeypatch):
    """The doctor's disk line covers the runs folder when it is another disk, and fails when that one is full."""
    from workers.doctor import check_disk

    runs = tmp_path / "runs"
    runs.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(runs)], check=True)
    try:
        monkeypatch.setenv("SEEDBED_HOME", str(tmp_path))
        finding = check_disk()
        assert not finding.ok and f"GiB free under {runs}" in finding.found, finding
    finally:
        wait_for(lambda: subprocess.run(["umount", str(runs)], capture_output=True).returncode == 0,
                 timeout=60, every=1, what=f"{runs} to be unmounted")
