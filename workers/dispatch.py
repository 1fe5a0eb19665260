"""Sending a task once the transaction that made its object commits, without ever failing the request.

A web request that creates a run (an evaluation, an import, a trial) commits its row first, then sends the task
(ids only). When the broker is down the send fails: the request must still answer normally, because the row
exists and says what to do; ``failed`` records a "waiting for the queue" note on it, and the maintenance
reconciler sends it again once the broker answers (webapp.runs.services.runs_redispatch).
"""
from __future__ import annotations

import logging
from typing import Callable

from django.db import transaction

log = logging.getLogger("seedbed.dispatch")


def celery_app():
    from workers.celery_app import app

    return app


def send_task(name: str, *, args: list, queue: str | None = None, kwargs: dict | None = None) -> str | None:
    """Send one task by name now; returns "" when the broker took it, else why not (logged, never raised)."""
    try:
        celery_app().send_task(name, args=args, kwargs=kwargs or {}, queue=queue,
                      # fail fast instead of retrying for minutes inside a web request; the reconciler retries
                      retry=True, retry_policy={"max_retries": 2, "interval_start": 0, "interval_step": 0.2})
    except Exception as exc:  # kombu's OperationalError, a refused connection, a DNS failure...
        reason = f"{type(exc).__name__}: {exc}"[:400]
        log.warning("task %s%s not sent (broker unavailable?): %s", name, args, reason)
        return reason
    return ""


def send_on_commit(name: str, *, args: list, queue: str | None = None, kwargs: dict | None = None,
                   sent: Callable[[], None] | None = None, failed: Callable[[str], None] | None = None) -> None:
    """``send_task`` once the current transaction commits; then ``sent()`` or ``failed(reason)``."""

    def send() -> None:
        reason = send_task(name, args=args, queue=queue, kwargs=kwargs)
        callback = failed if reason else sent
        if callback is not None:
            try:
                callback(reason) if reason else callback()
            except Exception:  # recording the outcome must not fail the request either
                log.exception("task %s%s: recording the dispatch outcome failed", name, args)

    transaction.on_commit(send)
