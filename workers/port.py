"""The one module the web app imports of the workers (docs/architecture.md#layers): send a task, the broker's
queue, worker liveness and what a lost worker left, this machine's capacity and free disk, the sbatch options a
Slurm queue may carry. Everything here is a
name of a leaf module of ``workers`` (none imports ``webapp``), so no import of the web app's comes back to it
through the workers (``tests/test_imports.py`` checks both).
"""
from __future__ import annotations

from workers import dispatch
from workers.db_full import database_folder, heartbeats_paused
from workers.db_full import is_full as database_full
from workers.db_full import seen_full as seen_database_full
from workers.dispatch import send_on_commit, send_task
from workers.machine import REPORT_EVERY_S, disk_free, human_bytes, measure
from workers.recovery import GONE_AFTER_S, drop_unacked, forget, workers_gone
from workers.slurm.commands import EXTRA_OPTION as EXTRA_SBATCH_OPTION

__all__ = ["celery_app", "send_task", "send_on_commit", "task_ids_in_broker", "REPORT_EVERY_S", "measure",
           "disk_free", "human_bytes", "database_folder", "database_full", "seen_database_full",
           "heartbeats_paused", "GONE_AFTER_S", "workers_gone", "drop_unacked", "forget", "EXTRA_SBATCH_OPTION"]


def celery_app():
    """The Celery app (``dispatch.celery_app``, looked up at each call: a test's broker stands in there)."""
    return dispatch.celery_app()


def task_ids_in_broker(name: str, queues):
    """The ids of the ``name`` tasks waiting in ``queues`` (``dispatch.task_ids_in_broker``, looked up at each
    call)."""
    return dispatch.task_ids_in_broker(name, queues)
