"""What this machine offers a training worker: cores, memory and GPUs, measured cheaply (no CUDA context), and the
worker's report of it to the database (webapp.runs.models.WorkerCapacity), at start-up and every
``REPORT_EVERY_S`` after, from a thread of the worker's main process; removed when the worker shuts down.

The web app reads the reports to cap what one config may ask of a worker (webapp.runs.capacity); with none, it
measures its own host with ``measure``.
"""
from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger("seedbed.workers")

REPORT_EVERY_S = 30.0


def cores() -> int:
    """The CPU cores this process may run on (its affinity), else the machine's."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def memory_mb() -> int:
    """Total RAM (/proc/meminfo), or the memory limit of this process's cgroup when that is lower (a container)."""
    total = 0
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    total = int(line.split()[1]) // 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(limit_file) as fh:
                text = fh.read().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) // 2**20 < (total or 2**62):
            total = int(text) // 2**20
        break
    return total


def gpus() -> int:
    """NVIDIA GPUs this process may use, without touching CUDA (a forking worker must not initialise it):
    CUDA_VISIBLE_DEVICES or NVIDIA_VISIBLE_DEVICES when set, else the driver's list of GPUs, else 0."""
    for name in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"):
        value = os.environ.get(name)
        if value is None or (name == "NVIDIA_VISIBLE_DEVICES" and value.strip() in ("all", "")):
            continue
        if value.strip() in ("", "none", "void", "-1"):
            return 0
        return len([d for d in value.split(",") if d.strip()])
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def measure() -> dict:
    """This machine as a worker reports it: {"cores", "memory_mb", "gpus"}."""
    return {"cores": cores(), "memory_mb": memory_mb(), "gpus": gpus()}


def report(*, worker: str, queues: list[str], slots: int) -> None:
    """Record this worker's capacity now (one short database connection, closed again: the reporting thread lives
    in the worker's main process, which forks pool processes)."""
    from django.db import connection

    from webapp.runs.capacity import capacity_report

    try:
        capacity_report(worker=worker, queues=queues, slots=slots, **measure())
    finally:
        connection.close()


def forget(*, worker: str) -> None:
    from django.db import connection

    from webapp.runs.capacity import capacity_forget

    try:
        capacity_forget(worker=worker)
    finally:
        connection.close()


class Reporter:
    """Reports at start and every ``every_s`` until stopped; a failed report (database away) is logged and retried
    at the next beat."""

    def __init__(self, *, worker: str, queues: list[str], slots: int, every_s: float = REPORT_EVERY_S):
        self.worker, self.queues, self.slots, self.every_s = worker, sorted(queues), slots, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="seedbed-capacity", daemon=True)

    def start(self) -> "Reporter":
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                report(worker=self.worker, queues=self.queues, slots=self.slots)
            except Exception as exc:  # the database is away: the next beat tries again
                log.warning("worker %s: capacity not reported: %s", self.worker, exc)
            self._stop.wait(self.every_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        try:
            forget(worker=self.worker)
        except Exception as exc:
            log.warning("worker %s: capacity report not removed: %s", self.worker, exc)
