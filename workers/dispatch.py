"""Sending a task once the transaction that made its object commits, without ever failing the request.

A web request that creates a run (an evaluation, an import, a trial) commits its row first, then sends the task
(ids only). When the broker is down the send fails: the request must still answer normally, because the row
exists and says what to do; ``failed`` records a "waiting for the queue" note on it, and the maintenance
reconciler sends it again once the broker answers (webapp.runs.services.runs_redispatch).
"""
from __future__ import annotations

import ast
import json
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


def task_ids_in_broker(task_name: str, queues: list[str]) -> set[int] | None:
    """The first argument (an object id) of every ``task_name`` message the broker holds: waiting in ``queues`` or
    delivered and not yet acknowledged. None when that cannot be known (a broker other than Redis, or one that
    does not answer): then nothing is concluded from it.

    Reads Redis as kombu's Redis transport keeps it (a list per queue, the hash ``unacked``; both under the
    transport's ``global_keyprefix``), message headers only (``task``, ``argsrepr``)."""
    app = celery_app()
    url = app.conf.broker_url or ""
    if not url.startswith(("redis://", "rediss://")):
        return None
    import redis

    prefix = (app.conf.broker_transport_options or {}).get("global_keyprefix", "")
    try:
        client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        raw = [m for queue in queues for m in client.lrange(f"{prefix}{queue}", 0, -1)]
        raw += [json.loads(v)[0] for v in client.hvals(f"{prefix}unacked")]
    except Exception as exc:  # the broker is down or the data is not what kombu writes: know nothing
        log.warning("cannot list the broker's messages: %s", exc)
        return None
    ids: set[int] = set()
    for message in raw:
        try:
            message = json.loads(message) if isinstance(message, (bytes, str)) else message
            headers = message.get("headers") or {}
            if headers.get("task") == task_name:
                args = ast.literal_eval(headers.get("argsrepr") or "[]")
                if args and isinstance(args[0], int):
                    ids.add(args[0])
        except (ValueError, SyntaxError, AttributeError, TypeError):
            continue
    return ids
