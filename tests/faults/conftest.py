"""A Seedbed stack of its own for fault injection: a Redis on a free port (append-only file, as ``./seedbed up``
starts it), a training worker and a maintenance worker with beat (every second) on that broker, short heartbeat
and lost thresholds, and the test process sending its tasks there. Every case ends with "no run stuck, no data
lost, no process left"."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess

import pytest

from tests.conftest import WorkerProcess, wait_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    """redis-server on ``port`` keeping an append-only file in ``folder``: stop() and start() again keep its data."""

    def __init__(self, port: int, folder):
        self.port, self.folder, self.proc = port, folder, None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen([shutil.which("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1",
                                      "--save", "", "--appendonly", "yes", "--appendfsync", "always",
                                      "--dir", str(self.folder)], stdout=subprocess.DEVNULL)
        wait_for(self.answers, timeout=10, what="redis-server to answer")

    def answers(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            return True
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: redis writes its append-only file and exits
            self.proc.wait(timeout=30)


class Stack:
    def __init__(self, env: dict, home, redis: Redis):
        self.env, self.home, self.redis = env, home, redis
        self.workers: list[WorkerProcess] = []
        self.worker = self.maintenance = None

    def start_worker(self) -> WorkerProcess:
        self.worker = WorkerProcess(self.env, self.home, concurrency=1, queues="cpu",
                                    name=f"faults-cpu-{len(self.workers)}")
        self.workers.append(self.worker)
        return self.worker

    def start_maintenance(self) -> WorkerProcess:
        self.maintenance = WorkerProcess(self.env, self.home, concurrency=1, queues="maintenance", pool="solo",
                                         name=f"faults-maintenance-{len(self.workers)}", beat=True)
        self.workers.append(self.maintenance)
        return self.maintenance

    def kill(self, worker: WorkerProcess) -> None:
        """SIGKILL a worker's whole process group (its main process and pool slots, as an OOM kill or a power
        cut would); a training child dies with its slot (PDEATHSIG)."""
        try:
            os.killpg(worker.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        worker.proc.wait(timeout=30)

    def run_folder(self, run) -> object:
        return self.home / "runs" / str(run.uid)

    def stop(self) -> None:
        for worker in reversed(self.workers):
            worker.stop()
        self.redis.stop()


# Fast thresholds, so a fault's recovery takes seconds: a heartbeat every 0.5 s, lost after 4 s.
FAST = {"SEEDBED_HEARTBEAT_S": "0.5", "SEEDBED_LOST_AFTER_S": "4", "SEEDBED_RESTART_BACKOFF_S": "1",
        "SEEDBED_MAINTENANCE_EVERY_S": "1"}


@contextlib.contextmanager
def running_stack(worker_env, tmp_path, monkeypatch, django_db_blocker, thresholds: dict):
    """A stack of its own (Redis, a maintenance worker, a training worker, a fresh $SEEDBED_HOME) with
    ``thresholds`` in the workers' environment; the test process sends its tasks to this stack's broker."""
    from celery import Celery

    import workers.dispatch
    from tests.conftest import wait_for_other_connections_to_close
    from workers.celery_app import app as seedbed_app

    env, _ = worker_env
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)  # (a test may have mounted a disk of its own there)
    redis = Redis(free_port(), tmp_path)
    redis.start()
    env = {**env, "SEEDBED_HOME": str(home), "CELERY_BROKER_URL": redis.url, **thresholds}
    # the test process sends its tasks to this stack's broker, configured as Seedbed's own app
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)
    app = Celery("faults", broker=redis.url)
    app.conf.update({k: seedbed_app.conf[k] for k in ("task_routes", "task_serializer", "accept_content",
                                                       "broker_connection_retry_on_startup",
                                                       # the key prefix of this session's queues, as the workers
                                                       "broker_transport_options")})
    monkeypatch.setattr(workers.dispatch, "celery_app", lambda: app)
    stack = Stack(env, home, redis)
    stack.start_maintenance()
    stack.start_worker()
    yield stack
    stack.stop()
    app.close()
    with django_db_blocker.unblock():
        wait_for_other_connections_to_close()


@pytest.fixture
def stack(worker_env, tmp_path, monkeypatch, django_db_blocker):
    with running_stack(worker_env, tmp_path, monkeypatch, django_db_blocker, FAST) as stack:
        yield stack


def launch(**overrides):
    """A tiny run checkpointing every 2 steps."""
    from tests.conftest import tiny_config
    from webapp.runs import services

    return services.run_create(config=tiny_config(**{"checkpoint_every": 2, **overrides}))


def status(run) -> str:
    from webapp.runs.models import Run

    return Run.objects.values_list("status", flat=True).get(pk=run.pk)


def process_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped) is not alive
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return False


def wait_until(condition, timeout: float, what: str, every: float = 0.05):
    return wait_for(condition, timeout=timeout, what=what, every=every)
