"""Noticing a dead worker within seconds, and leaving the broker clean once its run is recovered.

Liveness: every process that trains (a worker's slot) stamps itself ("host:pid", as ``Run.worker`` names it)
in the Redis hash ``<prefix>seedbed:alive`` every ``BEAT_EVERY_S`` from a thread of its own, with Redis's own
clock (``TIME``), so the stamps of workers on several hosts are compared on one clock. The maintenance pass
(``webapp.runs.services.runs_mark_lost``) asks ``workers_gone``: a worker whose stamp is older than
``GONE_AFTER_S`` is dead. A worker with no stamp at all (a broker other than Redis, a Redis that lost its data,
a worker older than this) is unknown, never dead: the run's own heartbeat rule (SEEDBED_LOST_AFTER_S) decides.

Unacknowledged messages: tasks are acknowledged late, so a SIGKILLed worker's message stays in kombu's
``unacked`` hash (and ``unacked_index``) until the visibility timeout, when Redis would deliver it again.
``drop_unacked`` removes the ``train_run`` messages naming a run the maintenance pass just recovered (the
reconciler sends it again with a new message), as kombu's own acknowledgement does (``QoS._remove_from_indices``).
"""
from __future__ import annotations

import json
import logging
import os
import socket
import threading
import base64

log = logging.getLogger("seedbed.workers.recovery")

BEAT_EVERY_S = float(os.environ.get("SEEDBED_WORKER_BEAT_S", "2"))
GONE_AFTER_S = float(os.environ.get("SEEDBED_WORKER_GONE_AFTER_S", "10"))
FORGET_AFTER_S = 24 * 3600  # a stamp this old names a worker long gone: dropped from the hash
ALIVE_KEY = "seedbed:alive"
TRAIN_TASK = "workers.tasks.train_run"


def _client():
    """(redis client, key prefix) of the broker, or (None, "") when the broker is not Redis."""
    from workers.dispatch import celery_app

    app = celery_app()
    url = app.conf.broker_url or ""
    if not url.startswith(("redis://", "rediss://")):
        return None, ""
    import redis

    prefix = (app.conf.broker_transport_options or {}).get("global_keyprefix", "")
    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2), prefix


def this_worker() -> str:
    """How ``Run.worker`` names the current process (workers.tasks.train_run)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _now(client) -> float:
    seconds, micros = client.time()
    return seconds + micros / 1e6


def stamp(client=None, prefix: str = "", worker: str | None = None) -> bool:
    """Stamp ``worker`` (this process) alive now; False when the broker cannot be written (logged by the caller)."""
    if client is None:
        client, prefix = _client()
        if client is None:
            return False
    client.hset(f"{prefix}{ALIVE_KEY}", worker or this_worker(), repr(_now(client)))
    return True


class Beat:
    """This process's liveness stamp, refreshed by a daemon thread (one per process: ``ensure``)."""

    _pid: int | None = None
    _lock = threading.Lock()

    @classmethod
    def ensure(cls) -> None:
        """Start the stamping thread in this process if it does not run yet, after a first stamp made now (so
        the run this process is about to claim never names an unstamped worker)."""
        with cls._lock:
            if cls._pid == os.getpid():
                return
            cls._pid = os.getpid()
        try:
            client, prefix = _client()
        except Exception as exc:  # a bad URL: the heartbeat rule alone, as without a Redis broker
            log.warning("worker liveness not reported: %s", exc)
            return
        if client is None:
            return
        try:
            stamp(client, prefix)
        except Exception as exc:
            log.warning("worker liveness: first stamp failed (%s); retrying every %g s", exc, BEAT_EVERY_S)
        threading.Thread(target=cls._loop, args=(client, prefix, this_worker()), daemon=True,
                         name="seedbed-liveness").start()

    @staticmethod
    def _loop(client, prefix: str, worker: str) -> None:
        import time

        failing = False
        while True:
            time.sleep(BEAT_EVERY_S)
            try:
                stamp(client, prefix, worker)
                failing = False
            except Exception as exc:  # the broker is down: its own errors are logged; stamp again when it is back
                if not failing:
                    log.warning("worker liveness: cannot stamp (%s)", exc)
                failing = True


def workers_gone(workers: set[str]) -> set[str]:
    """Of ``workers`` ("host:pid"), those whose liveness stamp is older than GONE_AFTER_S by Redis's clock.
    Unknown workers (no stamp) and an unreadable broker give nothing: no conclusion without evidence."""
    if not workers:
        return set()
    try:
        client, prefix = _client()
        if client is None:
            return set()
        names = sorted(workers)
        stamps = client.hmget(f"{prefix}{ALIVE_KEY}", names)
        now = _now(client)
    except Exception as exc:
        log.warning("worker liveness unreadable (%s): the heartbeat rule alone decides", exc)
        return set()
    gone = set()
    for name, value in zip(names, stamps):
        try:
            if value is not None and now - float(value) > GONE_AFTER_S:
                gone.add(name)
        except ValueError:
            continue
    return gone


def forget(workers: set[str]) -> None:
    """Drop the stamps of workers whose runs were recovered, and any stamp older than a day."""
    try:
        client, prefix = _client()
        if client is None:
            return
        key = f"{prefix}{ALIVE_KEY}"
        now = _now(client)
        old = [name for name, value in client.hgetall(key).items() if now - float(value) > FORGET_AFTER_S]
        if workers or old:
            client.hdel(key, *workers, *old)
    except Exception as exc:
        log.warning("worker liveness: could not forget %s (%s)", sorted(workers), exc)


def _names_run(message: dict, run_ids: set[int]) -> int | None:
    """The run a kombu message of ``train_run`` names (its first argument), or None."""
    headers = message.get("headers") or {}
    if headers.get("task") != TRAIN_TASK:
        return None
    body = message.get("body")
    if (message.get("properties") or {}).get("body_encoding") == "base64":
        body = base64.b64decode(body)
    args = json.loads(body)[0]
    return args[0] if args and args[0] in run_ids else None


def drop_unacked(run_ids: set[int]) -> list[str]:
    """Remove from kombu's ``unacked`` hash and ``unacked_index`` the delivered, never acknowledged ``train_run``
    messages naming ``run_ids`` (their worker died; each run is sent again by the reconciler). Returns the
    delivery tags removed; nothing on a broker other than Redis or one that does not answer (logged)."""
    if not run_ids:
        return []
    try:
        client, prefix = _client()
        if client is None:
            return []
        removed = []
        for tag, value in client.hgetall(f"{prefix}unacked").items():
            try:
                message = json.loads(value)[0]
                if _names_run(message, run_ids) is None:
                    continue
            except (ValueError, TypeError, KeyError, IndexError, AttributeError):
                continue  # not a message of ours, as kombu writes them: left to kombu
            with client.pipeline() as pipe:
                pipe.hdel(f"{prefix}unacked", tag).zrem(f"{prefix}unacked_index", tag).execute()
            removed.append(tag.decode() if isinstance(tag, bytes) else tag)
    except Exception as exc:
        log.warning("could not remove the dead workers' messages of runs %s: %s", sorted(run_ids), exc)
        return []
    if removed:
        log.info("removed the unacknowledged messages of runs %s left by their dead workers: %s", sorted(run_ids),
                 removed)
    return removed
