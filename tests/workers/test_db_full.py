"""A database whose disk is full (workers/db_full.py), on a real full filesystem where it matters: SQLite's refusal
is read as a full disk naming the database's folder; a slot keeps its run's record and writes it once the database
takes it; a supervisor's heartbeat refused for a full disk does not stop supervision; the reconciler judges no run
lost by its heartbeat while, and for one lost threshold after, it found the database full. (The whole stack on a
full home disk: tests/faults/test_home_disk_full.py.)"""
from __future__ import annotations

import os
import sqlite3
import subprocess
from datetime import timedelta

import pytest
from django.db import OperationalError
from django.utils import timezone

from tests.conftest import wait_for
from webapp.runs.models import Run, RunStatus
from workers import db_full
from workers.runner import disk_full_message


@pytest.fixture
def full_sqlite(tmp_path):
    """An SQLite error from a real database on a real full 1 MB tmpfs."""
    if os.geteuid() != 0:
        pytest.skip("mounts a tmpfs (root only)")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], check=True)
    try:
        db = sqlite3.connect(disk / "x.sqlite3")
        db.execute("CREATE TABLE t (v BLOB)")
        with pytest.raises(sqlite3.OperationalError) as refused:
            for _ in range(1000):
                db.execute("INSERT INTO t VALUES (?)", (b"x" * 65536,))
                db.commit()
        db.close()
        yield refused.value
    finally:
        wait_for(lambda: subprocess.run(["umount", str(disk)], capture_output=True).returncode == 0,
                 timeout=30, every=1, what=f"{disk} to be unmounted")


def test_sqlites_full_disk_is_read_as_a_full_disk_naming_the_databases_folder(full_sqlite, settings):
    assert str(full_sqlite) == "database or disk is full"
    try:  # as Django raises it: its OperationalError from SQLite's
        raise OperationalError(*full_sqlite.args) from full_sqlite
    except OperationalError as exc:
        django_error = exc
    folder = os.path.dirname(os.path.abspath(settings.DATABASES["default"]["NAME"]))
    message = disk_full_message(RuntimeError("the sink failed"), "/runs/x")
    assert message == ""  # (not a full disk)
    wrapped = RuntimeError("the sink failed")
    wrapped.__cause__ = django_error
    message = disk_full_message(wrapped, "/runs/x")
    assert message.startswith(f"no space left on device under {folder}: ") and message.endswith(" free"), message
    assert db_full.is_full(django_error) and not db_full.is_full(OperationalError("database is locked"))


def test_a_record_refused_for_a_full_disk_is_written_once_the_database_takes_it():
    tries, slept = [], []

    def record():
        tries.append(1)
        if len(tries) < 4:
            raise OperationalError("database or disk is full")
        return "failed"

    assert db_full.retrying(record, "how it ended", 7, sleep=slept.append) == "failed"
    assert len(tries) == 4 and slept == [db_full.RETRY_EVERY_S] * 3
    with pytest.raises(OperationalError, match="locked"):  # another error is not waited out
        db_full.retrying(lambda: (_ for _ in ()).throw(OperationalError("database is locked")), "x", 7,
                         sleep=slept.append)
    clock = iter(range(0, 10_000, 600))  # ten minutes a try: past RETRY_FOR_S it gives up
    with pytest.raises(OperationalError, match="full"):
        db_full.retrying(lambda: (_ for _ in ()).throw(OperationalError("database or disk is full")), "x", 7,
                         sleep=lambda s: None, clock=lambda: next(clock))


def test_a_heartbeat_refused_for_a_full_disk_does_not_stop_supervision():
    answers = iter([OperationalError("database or disk is full"), False])

    def beat(pid):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    beat = db_full.tolerant(beat, "heartbeat", 7, True)
    assert beat(1) is True and beat(1) is False  # refused: taken as still held; then the database's answer
    with pytest.raises(OperationalError, match="locked"):
        db_full.tolerant(lambda: (_ for _ in ()).throw(OperationalError("database is locked")), "x", 7, None)()


@pytest.mark.django_db
@pytest.mark.postgres  # (runs_mark_lost's row locks and its cutoff a century back)
def test_no_run_is_judged_lost_by_its_heartbeat_while_the_database_was_found_full(model_dir, monkeypatch,
                                                                                   django_capture_on_commit_callbacks):
    from webapp.runs import services
    from webapp.runs.services import runs_recover as reconcile

    with django_capture_on_commit_callbacks(execute=False):  # (its send never reaches a broker)
        run = services.run_create(config={"preset": "grpo", "model_path": model_dir, "total_steps": 6,
                                          "prompts_per_step": 4, "group_size": 4, "max_restarts": 0})
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, worker="w:1", started_at=timezone.now(),
                                         heartbeat_at=timezone.now() - timedelta(seconds=61))
    monkeypatch.setattr(db_full, "_full_seen_at", None)
    db_full.seen_full()  # a pass just found the database full: that heartbeat could not be written
    with django_capture_on_commit_callbacks(execute=False):
        assert reconcile()["lost"] == [] and Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
        monkeypatch.setattr(db_full, "_full_seen_at", db_full._full_seen_at - 61)  # one lost threshold later
        assert reconcile()["lost"] == [run.pk] and Run.objects.get(pk=run.pk).status == RunStatus.LOST
