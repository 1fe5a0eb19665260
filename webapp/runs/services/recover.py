"""The run kind's maintenance pass (``RUN_JOB.recover``, run by ``webapp.jobs.recover_all`` from the maintenance
task, ``workers.tasks.maintenance``, every ``SEEDBED_MAINTENANCE_EVERY_S``): it repairs what differs between the
database, which is the source of truth, and the broker and the workers (docs/architecture.md#where-state-lives).
Each step is idempotent and safe in several processes at once, so a missed or doubled pass only delays a repair:

- ``runs_mark_lost``: a running run whose heartbeat went stale, or whose worker is known dead, is marked lost and,
  with restarts left, queued again to resume from its last checkpoint (recorded with the actor "reconciler");
- ``runs_redispatch``: a queued run whose message the broker never took (or lost) is sent again; one whose
  message the broker holds but whose dispatch was never recorded is stamped, not sent twice;
- ``runs_restart_after_disk_full``: a run that failed on a full disk restarts once there is space again.

Its pass is recorded with the rest of the maintenance pass (``webapp.status``, the /status page).
"""
from __future__ import annotations

import logging

from django.conf import settings
from django.db import DatabaseError

from .disk_full import runs_restart_after_disk_full
from .dispatch import runs_redispatch
from .recovery import runs_mark_lost

log = logging.getLogger("seedbed.runs")


def runs_recover() -> dict:
    """One pass: ``{"lost": [...], "redispatched": [...], "disk_restarted": [...]}``, the run ids each step acted
    on. Lost runs are marked first, so a run restarted by this pass is sent by the same pass once its back-off is
    over (a later one otherwise). A database whose disk is full refuses the pass's writes: the pass says so
    (``"database_full"``) and, for one lost threshold after, judges no run lost by its heartbeat's age
    (``workers.db_full``, through ``workers.port``: those heartbeats could not be written; the slots record their
    runs themselves)."""
    from workers.port import database_full, heartbeats_paused, seen_database_full

    paused = heartbeats_paused(settings.SEEDBED_LOST_AFTER_S)
    try:
        lost = runs_mark_lost(by_heartbeat=not paused)
        redispatched = runs_redispatch()
    except DatabaseError as exc:
        if not database_full(exc):
            raise
        seen_database_full()
        log.warning("maintenance: the database's disk is full (%s); no run is judged lost by its heartbeat until "
                    "%.0f s after it takes writes again", exc, settings.SEEDBED_LOST_AFTER_S)
        return {"lost": [], "redispatched": [], "disk_restarted": [], "database_full": True}
    try:  # a run that failed on a full disk restarts once there is space again
        disk_restarted = runs_restart_after_disk_full()
    except Exception:  # reading a folder's disk may fail: the other repairs stand, the next pass tries again
        log.exception("maintenance: could not restart the runs that failed on a full disk")
        disk_restarted = []
    result = {"lost": lost, "redispatched": redispatched, "disk_restarted": disk_restarted}
    return {**result, "heartbeats_paused": True} if paused else result
