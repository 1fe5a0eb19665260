"""What this machine offers a training worker (``workers.machine.measure``: cores, memory and GPUs), and the
worker's report of it to the database (webapp.runs.models.WorkerCapacity), at start-up and every
``REPORT_EVERY_S`` after, from a thread of the worker's main process; removed when the worker shuts down.

The web app reads the reports to cap what one config may ask of a worker (webapp.runs.capacity); with none, it
measures its own host with ``measure``.
"""
from __future__ import annotations

import logging
import threading

from workers.machine import REPORT_EVERY_S, measure

log = logging.getLogger("seedbed.workers")


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
