"""The Celery app: long training tasks on queues named by slot kind (cpu, gpu), maintenance on its own.

Settings follow Celery's advice for long tasks: ack late (a task whose worker dies is re-delivered), prefetch 1
(a slot never hoards a second run), a broker visibility timeout longer than any run, results ignored
(the database is the source of truth).
"""
from __future__ import annotations

import os

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
# what workers and their training children write (run folders, checkpoints, logs) is this account's alone
os.umask(0o077)

from training.extensions import modules  # noqa: E402
from workers.broker import FILESYSTEM_URL, filesystem_options, redis_url, seedbed_home  # noqa: E402

# Longer than any run: Redis re-delivers an unacknowledged task after this many seconds.
VISIBILITY_TIMEOUT_S = int(os.environ.get("SEEDBED_VISIBILITY_TIMEOUT_S", str(12 * 3600)))
MAINTENANCE_QUEUE = "maintenance"
# How often the maintenance worker's beat checks heartbeats and applies sweep policies.
MAINTENANCE_EVERY_S = float(os.environ.get("SEEDBED_MAINTENANCE_EVERY_S", "5"))


def broker_url() -> str:
    return os.environ.get("CELERY_BROKER_URL") or redis_url()


def transport_options(url: str) -> dict:
    if url.startswith(FILESYSTEM_URL):
        return filesystem_options(seedbed_home())
    options = {"visibility_timeout": VISIBILITY_TIMEOUT_S}
    # Several Seedbeds (or test sessions) can share one Redis: a key prefix keeps their queues apart.
    if os.environ.get("SEEDBED_BROKER_PREFIX"):
        options["global_keyprefix"] = os.environ["SEEDBED_BROKER_PREFIX"]
    return options


app = Celery("seedbed")
_url = broker_url()
app.conf.update(
    broker_url=_url,
    broker_transport_options=transport_options(_url),
    broker_connection_retry_on_startup=True,
    task_ignore_result=True,
    result_backend=None,
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_default_queue="cpu",
    task_queues=[Queue("cpu"), Queue("gpu"), Queue(MAINTENANCE_QUEUE)],
    task_routes={"workers.tasks.maintenance": {"queue": MAINTENANCE_QUEUE},
                 "workers.tasks.sweep_check": {"queue": MAINTENANCE_QUEUE},
                 "workers.sweep_tasks.sweep_fit_risk": {"queue": MAINTENANCE_QUEUE},
                 "workers.slurm_tasks.slurm_submit": {"queue": MAINTENANCE_QUEUE},
                 "workers.eval_tasks.eval_maintenance": {"queue": MAINTENANCE_QUEUE}},
    task_serializer="json",
    accept_content=["json"],
    worker_hijack_root_logger=False,
    beat_schedule={
        "maintenance": {"task": "workers.tasks.maintenance", "schedule": MAINTENANCE_EVERY_S,
                        "options": {"queue": MAINTENANCE_QUEUE, "expires": MAINTENANCE_EVERY_S * 2}},
    },
    beat_schedule_filename=str(seedbed_home() / "celerybeat-schedule"),
    timezone="UTC",
)
# The task modules: every module of this package whose name ends in "tasks" (``tasks``, ``eval_tasks``,
# ``sweep_tasks``): listed, not imported here (they import this app); Celery imports them once it is configured.
app.conf.imports = tuple(m for m in modules("workers") if m.rpartition(".")[2].endswith("tasks"))


def ensure_django() -> None:
    """Set Django up in a worker process (the web process already has it)."""
    import django
    from django.apps import apps

    if not apps.ready:
        django.setup()
