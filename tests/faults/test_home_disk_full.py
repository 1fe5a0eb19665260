"""$SEEDBED_HOME's disk, the database's own, filled by another writer while a run trains (real workers, real
Redis, real SQLite on a real full filesystem): reads answer (the API with a token, the run's page, the runs list)
while every write fails; the run's training process fails on the full disk and its worker keeps how it ended
until the database takes it, so the run is recorded as failed on a full disk (naming the disk), not as "worker
lost", and not restarted while the disk stays full. (It may be recorded before space is back: the training process
removes its partial checkpoint on its way out, which can free enough for that one write, never the room for two
checkpoints that a restart needs.) Once space is back the maintenance pass restarts it as a full-disk run and it
ends with every step once.

$SEEDBED_HOME is a small tmpfs of its own (root only: mount) holding the database (a copy of the test database,
which this test process uses too while it runs) and the runs folder; Redis keeps its file elsewhere."""
from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest
from django.utils import timezone

from tests.conftest import logged_in, tiny_config, wait_for
from tests.faults.conftest import FAST, process_alive, running_stack, status, wait_until
from tests.workers.test_train_run import assert_every_step_complete
from webapp.api.services import token_create
from webapp.projects.models import AuditEvent, Project
from webapp.projects.services import default_project
from webapp.runs import services
from webapp.runs.models import Checkpoint, Run, RunStatus
DISK_FULL = "no space left on device under "  # (workers.runner.disk_full_message)

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs (root only)")]

STEPS = 40


@pytest.fixture
def full_home(worker_env, tmp_path, monkeypatch, django_db_blocker):
    """A stack whose $SEEDBED_HOME is a 64 MB tmpfs holding its SQLite database, which this process uses too."""
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("the database on the full disk is a SQLite file here (PostgreSQL's disk is its server's)")
    home = tmp_path / "home"
    home.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(home)], check=True)
    original = connection.settings_dict["NAME"]
    database = home / "seedbed.sqlite3"
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    shutil.copyfile(original, database)
    connection.settings_dict["NAME"] = str(database)
    env, _ = worker_env
    try:
        with running_stack(({**env, "DATABASE_URL": f"sqlite:///{database}"}, home), tmp_path, monkeypatch,
                           django_db_blocker, {**FAST, "SEEDBED_DISK_RESUME_MB": "1"}) as stack:
            yield stack
    finally:
        connection.close()
        connection.settings_dict["NAME"] = original
        wait_for(lambda: subprocess.run(["umount", str(home)], capture_output=True).returncode == 0,
                 timeout=60, every=1, what=f"{home} to be unmounted")


def test_a_full_home_disk_keeps_reads_up_and_the_run_restarts_as_a_full_disk_run(full_home, user):
    stack = full_home
    _, token = token_create(user=user, name="reads")  # (never used yet: its first use writes last_used_at)
    client = logged_in(user)  # (a session written before the disk fills)
    # (a disk this small would make the default budgets, fractions of it, end the run before it fills)
    Project.objects.filter(pk=default_project().pk).update(run_disk_budget_mb=10**6, disk_budget_mb=10**6)
    run = services.run_create(config=tiny_config(total_steps=STEPS, checkpoint_every=2, keep_checkpoints=2,
                                                 max_restarts=2))
    wait_until(lambda: Checkpoint.objects.filter(run=run).exists(), 240, "the run's first checkpoint")
    pid = Run.objects.get(pk=run.pk).pid
    filler = stack.home / "filler"

    def filled():  # (another writer appends until the disk is full; the run may free an old checkpoint meanwhile)
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64K", "oflag=append", "conv=notrunc"],
                       capture_output=True)
        return shutil.disk_usage(stack.home).free < 1024 * 1024
    wait_until(filled, 30, "the home disk to be filled", every=0.2)
    filled_at = time.monotonic()
    wait_until(lambda: not process_alive(pid), 120, "the training process to end on the full disk")
    # reads answer on the full disk: the API with a token (whose last use cannot be written), the pages
    api = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    for url in (f"/api/v1/runs/{run.pk}", "/api/v1/runs"):
        answer = client.get(url, **api)
        assert answer.status_code == 200, (url, answer.status_code, answer.content[:300])
    for url in (f"/runs/{run.pk}/", "/runs/", f"/runs/{run.pk}/live.json"):
        assert client.get(url).status_code == 200, url
    # the run's last heartbeat ages to twice the lost threshold while the disk stays full: the run is never
    # recorded lost, nor restarted; its slot's record of how it ended may land meanwhile (the training process
    # removed its partial checkpoint on its way out, freeing less than the two checkpoints a restart needs)
    lost_after_s = float(FAST["SEEDBED_LOST_AFTER_S"])
    seen = set()

    def heartbeat_aged():
        now = Run.objects.get(pk=run.pk)
        seen.add(now.status)
        assert now.status in (RunStatus.RUNNING, RunStatus.FAILED), (now.status, now.error)
        if now.status == RunStatus.FAILED:  # (recorded while full: the full home disk named, no restart yet)
            assert now.error.startswith(f"{DISK_FULL}{stack.home}"), now.error
            assert now.restarts == 0, now.dispatch_note
        return now.heartbeat_at is not None and (timezone.now() - now.heartbeat_at).total_seconds() > 2 * lost_after_s
    wait_until(heartbeat_aged, 120, "the run's last heartbeat to age past twice the lost threshold", every=0.2)
    assert not AuditEvent.objects.filter(action="run.restart", target_id=run.pk).exists()
    free_while_full = shutil.disk_usage(stack.home).free
    filler.unlink()
    freed_at = time.monotonic()
    restart = wait_until(lambda: AuditEvent.objects.filter(action="run.restart", target_id=run.pk).first(), 60,
                         "the run to be recorded and restarted once space is back")
    restarted_s = time.monotonic() - freed_at
    assert restart.actor_name == "reconciler", restart.actor_name
    # (the database's folder, or the run's when a file write found the disk full first: both on the home disk)
    assert restart.detail["reason"].startswith(f"{DISK_FULL}{stack.home}"), restart.detail
    wait_until(lambda: status(run) in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.LOST), 300,
               "the restarted run to end")
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.restarts == 1 and run.error == ""
    assert AuditEvent.objects.filter(action="run.restart", target_id=run.pk).count() == 1  # no "worker lost"
    assert_every_step_complete(run.pk, STEPS)
    print(f"\nfault: home disk (the database's) full -> training process failed on it, reads answered; "
          f"space freed {freed_at - filled_at:.1f} s after the fill, run recorded as a full-disk failure and "
          f"restarted {restarted_s:.1f} s later, succeeded; while full it was {'/'.join(sorted(seen))} "
          f"({free_while_full:,} bytes free)")

