"""The /status page: is Seedbed healthy? The services ``./seedbed up`` supervises (with their restarts), the
Celery workers that answer, the depth of each queue, the last pass of the maintenance reconciler, and the runs
waiting for the queue or for a restart.

Staff see all of it. Anyone else sees the queues' depths (numbers) and their own projects' running and waiting
runs only: the services' pids and log paths, the workers' host names and the reconciler's run ids describe the
machine and other users' work."""
from __future__ import annotations

import json
import time
from datetime import datetime, timezone as dt_timezone
from pathlib import Path

from django.conf import settings
from django.shortcuts import render
from django.views.decorators.http import require_GET

from webapp.projects.selectors import visible
from webapp.runs.models import Run, RunStatus

MAINTENANCE_FILE = "maintenance.json"
SERVICES_FILE = "services.json"


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_maintenance_pass(result: dict) -> None:
    """The maintenance task's record of its last pass (for this page): when, and what it did."""
    path = Path(settings.SEEDBED_HOME) / MAINTENANCE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"at": datetime.now(dt_timezone.utc).isoformat(), **result}, default=str))
    tmp.replace(path)


def queue_depths(queues=("cpu", "gpu", "maintenance"), timeout_s: float = 1.0) -> dict[str, int | None]:
    """Messages waiting in each queue (None when the broker does not answer)."""
    from workers.port import celery_app

    app = celery_app()

    depths: dict[str, int | None] = {}
    try:  # a pooled connection: opening one to Redis per page view cost more than the whole rest of the page
        with app.pool.acquire(block=True, timeout=timeout_s) as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout_s)
            channel = conn.default_channel
            for name in queues:
                try:
                    depths[name] = channel.queue_declare(queue=name, passive=True).message_count
                except Exception:  # a queue nobody declared yet
                    depths[name] = 0
    except Exception:
        return {name: None for name in queues}
    return depths


# A broadcast ping waits its whole timeout for answers from workers it does not know of, so asking "everyone"
# on each view made this page take 0.6-1.3 s. Each web process asks everyone at most every WORKERS_RECHECK_S; in
# between it asks for as many answers as workers answered then (``limit``), which come back in milliseconds; a
# worker gone makes that one ping wait its timeout, and the answer then is the new "everyone".
WORKERS_RECHECK_S = 30.0
_workers_seen: dict = {"names": [], "at": None}  # the last ping that waited its timeout: who, time.monotonic()


def live_workers(timeout_s: float = 0.5) -> list[str] | None:
    """The Celery workers that answer a ping (None when the broker does not answer). Within WORKERS_RECHECK_S of a
    ping that found none, none (so a page with no worker is not slow either; ``workers_checked_s`` says when)."""
    from workers.port import celery_app

    app = celery_app()

    seen, now = _workers_seen, time.monotonic()
    known = seen["names"] if seen["at"] is not None and now - seen["at"] < WORKERS_RECHECK_S else None
    if known == []:
        return []
    try:
        with app.pool.acquire(block=True, timeout=timeout_s) as conn:
            replies = app.control.ping(timeout=timeout_s, limit=len(known) if known else None, connection=conn)
    except Exception:
        return None
    names = sorted(name for reply in replies for name in reply)
    if known is None or len(names) < len(known):  # this ping waited its timeout: everyone who answers answered
        seen.update(names=names, at=time.monotonic())
    return names


def workers_checked_s() -> float | None:
    """Seconds since every worker was last asked (a ping that waited its timeout), None before the first."""
    at = _workers_seen["at"]
    return None if at is None else time.monotonic() - at


def disk_state() -> list[dict]:
    """Free space of $SEEDBED_HOME and of its runs folder when that is another disk: each a folder, its free
    bytes (None when unreadable), those in words, and whether it is under SEEDBED_DISK_WARN_MB (a run whose
    checkpoint finds the disk full fails, and restarts once space is back)."""
    import os

    from workers.port import disk_free, human_bytes

    home, runs = Path(settings.SEEDBED_HOME), Path(settings.SEEDBED_RUNS_DIR)
    folders = [home]
    try:
        if runs.exists() and os.stat(runs).st_dev != os.stat(home).st_dev:
            folders.append(runs)
    except OSError:
        pass
    warn = settings.SEEDBED_DISK_WARN_MB * 1e6
    return [{"folder": str(f), "free": (free := disk_free(str(f))), "free_text": human_bytes(free),
             "low": free is not None and free < warn} for f in folders]


@require_GET
def status_view(request):
    home = Path(settings.SEEDBED_HOME)
    staff = request.user.is_staff
    maintenance = _read_json(home / MAINTENANCE_FILE)
    age = None
    if maintenance and maintenance.get("at"):
        age = (datetime.now(dt_timezone.utc) - datetime.fromisoformat(maintenance["at"])).total_seconds()
    runs = visible(Run.objects.select_related("project"), request.user)
    return render(request, "status.html", {
        "staff": staff, "services": _read_json(home / SERVICES_FILE) if staff else None,
        "maintenance": maintenance if staff else None, "maintenance_age_s": age,
        "queues": queue_depths(), "workers": live_workers() if staff else None, "workers_checked_s": workers_checked_s(),
        "disks": disk_state() if staff else None, "disk_warn_mb": settings.SEEDBED_DISK_WARN_MB,
        "running": runs.filter(status=RunStatus.RUNNING).order_by("worker"),
        "waiting": runs.filter(status=RunStatus.QUEUED).exclude(dispatch_note="").order_by("pk")})
