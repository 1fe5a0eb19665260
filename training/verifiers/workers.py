"""A small persistent process pool with a per-task outer deadline.

Why not ``concurrent.futures.ProcessPoolExecutor``: it cannot kill one stuck task (a sympy simplification
that never returns) without breaking the whole pool. Here each worker is a spawned process that runs tasks
on its *main thread* (math-verify's SIGALRM timeouts only work there), one at a time; when a task overruns
its deadline the parent kills that worker, reports the task as timed out and starts a replacement.

Workers are fresh interpreters (never ``fork``: the parent may hold torch threads and CUDA state) and retired after ``max_tasks_per_worker`` tasks, so slow leaks in sympy caches stay bounded.
"""
from __future__ import annotations

import importlib
import os
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection, wait
from typing import Any, Sequence


class TaskTimeout(Exception):
    """The task ran past the pool's outer deadline; its worker was killed."""


class TaskFailed(Exception):
    """The task raised in the worker (message carries the worker's exception) or the worker died."""


def _resolve(target: str):
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def _die_with_parent() -> None:
    """Linux: SIGKILL this worker when its parent dies, even mid-computation (prctl PR_SET_PDEATHSIG)."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG = 1, SIGKILL = 9
    except OSError:
        pass  # not Linux: the worker still exits on EOF when the parent's socket closes


def _worker_main(conn: Connection, target: str) -> None:
    _die_with_parent()
    fn = _resolve(target)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        task_id, args = msg
        try:
            reply = (task_id, True, fn(*args))
        except BaseException as exc:  # reported to the parent, which decides what it means
            reply = (task_id, False, f"{type(exc).__name__}: {exc}")
        conn.send(reply)


class PoolWorker:
    """One worker: ``python -m training.verifiers.workers FD TARGET`` talking over a socketpair.

    A plain subprocess rather than multiprocessing's spawn: spawn re-imports the parent's ``__main__``,
    which fails for ``python -c`` or stdin scripts and costs time for heavy training scripts.
    """

    def __init__(self, target: str):
        parent_sock, child_sock = socket.socketpair()
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "") if env.get("PYTHONPATH") else root
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "training.verifiers.workers", str(child_sock.fileno()), target],
            pass_fds=(child_sock.fileno(),), stdin=subprocess.DEVNULL, env=env, close_fds=True)
        child_sock.close()
        self.conn = Connection(parent_sock.detach())
        self.tasks_done = 0
        self.ready = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout: float) -> None:
        if self.ready:
            return
        try:
            if not self.conn.poll(timeout):
                raise TaskFailed(f"worker did not start within {timeout:.0f}s")
            self.conn.recv()
        except (EOFError, OSError):
            self.kill()
            raise TaskFailed(f"worker exited during start-up (exit code {self.proc.poll()})") from None
        except TaskFailed:
            self.kill()
            raise
        self.ready = True

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(5)
        if not self.conn.closed:
            self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
            self.proc.wait(2)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
        self.kill()


class WorkerPool:
    """``processes`` workers each running ``target`` ("module:function"); :meth:`map` runs a batch.

    >>> pool = WorkerPool("operator:add", processes=1, deadline_s=10)
    >>> pool.map([(1, 2), (3, 4)])
    [3, 7]
    >>> pool.close()
    """

    def __init__(self, target: str, *, processes: int = 2, deadline_s: float = 10.0,
                 max_tasks_per_worker: int = 20000, start_timeout_s: float = 60.0, worker_factory=None):
        if processes < 1:
            raise ValueError(f"processes must be >= 1; got {processes}")
        self.target, self.processes, self.deadline_s = target, processes, deadline_s
        self.max_tasks_per_worker, self.start_timeout_s = max_tasks_per_worker, start_timeout_s
        # worker_factory: another kind of worker with the same surface as PoolWorker (conn, proc, ready,
        # tasks_done, wait_ready, kill, stop): the sandbox's fork servers.
        self._new_worker = worker_factory or (lambda: PoolWorker(target))
        self._workers: list = []
        self._lock = threading.Lock()  # one batch at a time; callers from several threads queue up
        self.restarts = 0

    def _ensure_workers(self) -> None:
        # A worker may have died between batches: PR_SET_PDEATHSIG fires when the *thread* that started it
        # exits (a pool first used from a short-lived thread, e.g. the submit-time dry run), or it was killed.
        for w in [w for w in self._workers if w.proc.poll() is not None]:
            w.kill()
            self._workers.remove(w)
            self.restarts += 1
        while len(self._workers) < self.processes:
            self._workers.append(self._new_worker())
        for w in list(self._workers):
            try:
                w.wait_ready(self.start_timeout_s)
            except TaskFailed:
                self._workers.remove(w)  # the next batch tries a fresh one
                raise

    def _replace(self, worker: PoolWorker) -> PoolWorker:
        worker.kill()
        fresh = self._new_worker()
        self._workers[self._workers.index(worker)] = fresh
        self.restarts += 1
        return fresh

    def map(self, arg_tuples: Sequence[tuple]) -> list[Any]:
        """Run every task; item i is the function's return value, or a TaskTimeout / TaskFailed instance."""
        with self._lock:
            try:
                self._ensure_workers()
            except TaskFailed as exc:  # no worker could start: nothing can be judged
                return [exc] * len(arg_tuples)
            return self._run(arg_tuples)

    def _run(self, arg_tuples: Sequence[tuple]) -> list[Any]:
        results: list[Any] = [None] * len(arg_tuples)
        pending = list(range(len(arg_tuples)))[::-1]
        running: dict[PoolWorker, tuple[int, float]] = {}  # worker -> (task index, deadline)
        idle = list(self._workers)
        while pending or running:
            while pending and idle:
                worker = idle.pop()
                try:
                    worker.wait_ready(self.start_timeout_s)
                except TaskFailed as exc:  # a replacement could not start: fail what is left, keep the rest
                    self._workers.remove(worker)
                    for busy in running:
                        busy.kill()
                        self._workers.remove(busy)
                    for index in pending + [i for i, _ in running.values()]:
                        results[index] = exc
                    return results
                index = pending.pop()
                try:
                    worker.conn.send((index, arg_tuples[index]))
                except OSError:  # it died since it was last seen alive: a fresh one takes the task
                    pending.append(index)
                    idle.append(self._replace(worker))
                    continue
                running[worker] = (index, time.monotonic() + self.deadline_s)
            soonest = min(deadline for _, deadline in running.values())
            ready = wait([w.conn for w in running], timeout=max(0.0, soonest - time.monotonic()))
            by_conn = {w.conn: w for w in running}
            for conn in ready:
                worker = by_conn[conn]
                index, _ = running.pop(worker)
                try:
                    task_id, ok, value = conn.recv()
                except (EOFError, OSError):
                    worker.kill()
                    results[index] = TaskFailed(f"worker died (exit code {worker.proc.returncode})")
                    idle.append(self._replace(worker))
                    continue
                results[index] = value if ok else TaskFailed(value)
                worker.tasks_done += 1
                if worker.tasks_done >= self.max_tasks_per_worker:
                    worker.stop()
                    worker = self._replace(worker)
                idle.append(worker)
            now = time.monotonic()
            for worker, (index, deadline) in list(running.items()):
                if now >= deadline:
                    del running[worker]
                    results[index] = TaskTimeout(f"task ran past the {self.deadline_s:g}s deadline; worker killed")
                    idle.append(self._replace(worker))
        return results

    def close(self) -> None:
        with self._lock:
            for w in self._workers:
                w.stop()
            self._workers.clear()

    def __del__(self) -> None:
        # Best effort at interpreter exit; workers also die with their parent (PR_SET_PDEATHSIG).
        for w in getattr(self, "_workers", []):
            if w.proc.poll() is None:
                w.proc.kill()


if __name__ == "__main__":
    _worker_main(Connection(int(sys.argv[1])), sys.argv[2])
