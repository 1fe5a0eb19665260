"""When the database's disk is full (docs/architecture.md#where-state-lives): every write to the database fails
(SQLite: "database or disk is full"; PostgreSQL: "could not extend file ...: No space left on device") while
reads go on. What must not be lost then is what only a worker process knows:

- a training slot's supervisor keeps supervising when a heartbeat or a system sample cannot be written
  (``tolerant``): its training process decides, and fails on the full disk by itself, naming it;
- the slot keeps how its training process ended and writes it once the database can take it (``retrying``,
  every ``RETRY_EVERY_S``, for up to ``RETRY_FOR_S``), so a run that failed on the full disk is recorded as
  that (and restarted as such once space is back: ``runs.services.runs_restart_after_disk_full``);
- the maintenance pass remembers when it found the database full (``seen_full``): within one lost threshold
  (``SEEDBED_LOST_AFTER_S``) after that it judges no run lost by its heartbeat's age (``heartbeats_paused``),
  since those heartbeats could not be written; a worker known dead is still seen at once. So the slot's own
  record, not "worker lost", says how the run ended.

    >>> from django.db import OperationalError
    >>> is_full(OperationalError("database or disk is full")), is_full(OperationalError("database is locked"))
    (True, False)
"""
from __future__ import annotations

import errno
import logging
import os
import time
from typing import Callable, TypeVar

log = logging.getLogger("seedbed.workers")

T = TypeVar("T")

# How a database says its disk is full: SQLite's SQLITE_FULL; PostgreSQL's ENOSPC as it words it
FULL_PHRASES = ("database or disk is full", "no space left on device", "could not extend file")
RETRY_EVERY_S = 1.0  # a slot retries its run's record this often: the record lands within a second of space
RETRY_FOR_S = 3600.0  # and gives up after an hour (then the reconciler finds the run by its stale heartbeat)

_full_seen_at: float | None = None  # (this process: the maintenance worker's) when a pass last found it full
_stopping = False  # the worker is shutting down: a slot stops retrying


def is_full(exc: BaseException) -> bool:
    """Whether ``exc`` (or one it came from) is the database refusing a write because its disk is full."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            return True
        if any(phrase in str(exc).lower() for phrase in FULL_PHRASES):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def refused_by_database(exc: BaseException) -> bool:
    """Whether ``exc`` (or one it came from) is a database error saying its disk is full (not a file's write)."""
    import sqlite3

    from django.db import DatabaseError

    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, (DatabaseError, sqlite3.DatabaseError)) and is_full(exc):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def database_folder() -> str | None:
    """The folder of the SQLite database file (None for another database: its disk is the server's)."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    if not db["ENGINE"].endswith("sqlite3"):
        return None
    return os.path.dirname(os.path.abspath(str(db["NAME"])))


def tolerant(write: Callable[..., T], what: str, run_id: int, default: T) -> Callable[..., T]:
    """``write`` that returns ``default`` instead of raising when the database's disk is full, logging the first
    refusal of a streak and the write that lands after it."""
    refused = {"since": None}

    def call(*args, **kwargs):
        from django.db import DatabaseError

        try:
            result = write(*args, **kwargs)
        except DatabaseError as exc:
            if not is_full(exc):
                raise
            if refused["since"] is None:
                refused["since"] = time.monotonic()
                log.warning("run %s: the database's disk is full; its %s is not written (%s)", run_id, what, exc)
            return default
        if refused["since"] is not None:
            log.warning("run %s: %s written again after %.0f s of a full database", run_id, what,
                        time.monotonic() - refused["since"])
            refused["since"] = None
        return result

    return call


def retrying(write: Callable[[], T], what: str, run_id: int, *, every_s: float = RETRY_EVERY_S,
             for_s: float = RETRY_FOR_S, sleep=time.sleep, clock=time.monotonic) -> T:
    """``write()``, again every ``every_s`` while the database's disk is full, for up to ``for_s`` seconds (or
    until the worker shuts down); then, or for any other error, the error is raised."""
    from django.db import DatabaseError

    started = clock()
    while True:
        try:
            result = write()
        except DatabaseError as exc:
            if not is_full(exc) or clock() - started > for_s or _stopping:
                raise
            if clock() - started < every_s:
                log.warning("run %s: the database's disk is full; %s is kept and written once it can be, retried "
                            "every %g s (%s)", run_id, what, every_s, exc)
            sleep(every_s)
            continue
        if clock() - started >= every_s:
            log.warning("run %s: %s written after %.0f s of a full database", run_id, what, clock() - started)
        return result


def stopping() -> None:
    """The worker is shutting down: slots waiting for the database give up (their runs' heartbeats go stale)."""
    global _stopping
    _stopping = True


def seen_full(clock=time.monotonic) -> None:
    """The maintenance pass found the database full."""
    global _full_seen_at
    _full_seen_at = clock()


def heartbeats_paused(within_s: float, clock=time.monotonic) -> bool:
    """Whether this process found the database full within the last ``within_s`` seconds."""
    return _full_seen_at is not None and clock() - _full_seen_at < within_s
