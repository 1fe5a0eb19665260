"""When a kill does not wait out the grace period (workers.tasks._kill_overdue): a training process tree that cannot
read the stop flag, because a process of it is stopped or its run is stalled, is terminated from 1 s after the
request; a process that may still read it gets the grace period. Real processes (``sleep`` in a session of its
own, as the worker forks its training child), a real run row."""
from __future__ import annotations

import signal
import subprocess
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.conftest import tiny_config, wait_for
from webapp.projects.services import default_project
from webapp.runs.models import Run, RunStatus
from workers.sysmetrics import stopped_in_tree
from workers.tasks import ForkedChild, _kill_overdue, _terminate_group

pytestmark = pytest.mark.django_db


@pytest.fixture
def child():
    """A process in its own session with a child of its own (a training process and what it started)."""
    proc = subprocess.Popen(["bash", "-c", "sleep 60 & wait"], start_new_session=True)
    yield ForkedChild(proc.pid)
    try:
        proc.kill()
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def run_row(**fields) -> Run:
    now = timezone.now()
    fields = {"last_step": 4, "median_step_s": 0.2, "step_advanced_at": now, **fields}
    return Run.objects.create(project=default_project(), config=tiny_config(total_steps=100), seed=0,
                              status=RunStatus.RUNNING, started_at=now, heartbeat_at=now, kill_requested_at=now,
                              **fields)


def test_a_running_tree_gets_the_grace_period(child, settings):
    settings.SEEDBED_KILL_GRACE_S = 30
    run = run_row()
    assert _kill_overdue(run.pk, child, timezone.now() - timedelta(seconds=5)) == ""
    assert "grace period (30 s)" in _kill_overdue(run.pk, child, timezone.now() - timedelta(seconds=31))


def test_a_stopped_process_of_the_tree_is_forced_after_1_s_and_continued_by_the_terminate(child, settings):
    settings.SEEDBED_KILL_GRACE_S = 30
    run = run_row()
    grandchild = None
    for _ in range(100):  # (bash starts its sleep a moment later)
        from workers.sysmetrics import process_tree

        others = sorted(set(process_tree(child.pid)) - {child.pid})
        if others:
            grandchild = others[0]
            break
        time.sleep(0.05)
    import os

    os.kill(grandchild, signal.SIGSTOP)
    time.sleep(0.2)
    assert stopped_in_tree(child.pid) == [grandchild]
    assert _kill_overdue(run.pk, child, timezone.now() - timedelta(seconds=0.5)) == ""  # within the first second
    why = _kill_overdue(run.pk, child, timezone.now() - timedelta(seconds=1.5))
    assert f"(pid {grandchild}) is stopped (SIGSTOP)" in why
    started = time.monotonic()
    _terminate_group(child, 3.0)
    took = time.monotonic() - started
    assert child.returncode is not None and took < 3.0, took  # SIGTERM acted: no wait for SIGKILL
    from tests.faults.conftest import process_alive

    wait_for(lambda: not process_alive(grandchild), timeout=10, what="the stopped process to be gone")


def test_a_stalled_run_is_forced_after_1_s(child, settings):
    settings.SEEDBED_KILL_GRACE_S, settings.SEEDBED_STALL_FLOOR_S = 30, 60
    run = run_row(step_advanced_at=timezone.now() - timedelta(seconds=600))
    why = _kill_overdue(run.pk, child, timezone.now() - timedelta(seconds=1.5))
    assert "the run is stalled (no step for 6" in why and "after step 4" in why
