"""Requests per API token: a token bucket, kept where every web process sees it.

Each token has a bucket of ``burst`` requests that refills at ``rate`` requests a minute; a request takes one, and
a request that finds the bucket empty is refused (429) with the seconds until one is back (``Retry-After``). The
bucket is stored as one number, its *theoretical arrival time* ``tat`` (the generic cell rate algorithm, GCRA,
which is this token bucket): with ``T = 60 / rate`` seconds per request and ``tau = T x (burst - 1)``,

    tat = max(stored tat, now)
    tat - now > tau  ->  refused, retry after  tat - now - tau
    otherwise        ->  allowed, stored tat becomes  tat + T

So a quiet token may send ``burst`` requests at once, then one every ``T`` seconds: at most ``burst + rate``
in any minute.

Where: in Redis when the broker is Redis (every web process of a machine, and of several machines, shares one
bucket per token; the update is one Lua script, atomic, timed by Redis's own clock), else in this process's memory
(the filesystem broker: then each web process counts for itself, so ``./seedbed up``'s 2 web processes allow up to
twice the rate). A Redis that does not answer falls back to memory for that request (logged at most once a minute),
so the API keeps answering while Redis is down.

Bounds (the settings refuse to load outside them): ``SEEDBED_API_RATE_PER_MIN`` 1 to 60,000 (default 600: 10 a
second), ``SEEDBED_API_RATE_BURST`` 1 to 10,000 (default 100).
"""
from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger("seedbed.api")

RATE_BOUNDS = (1, 60_000)
BURST_BOUNDS = (1, 10_000)
DEFAULT_RATE_PER_MIN = 600
DEFAULT_BURST = 100
MEMORY_KEYS_MAX = 10_000  # buckets kept in memory before the full ones (tat in the past) are dropped

# KEYS[1] the bucket; ARGV: T and tau in milliseconds (a Lua number writes 14 digits: milliseconds since 1970
# fit, microseconds would be rounded). Returns the milliseconds to wait, 0 when allowed.
_GCRA_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local period, tau = tonumber(ARGV[1]), tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
if tat - now > tau then return math.ceil(tat - now - tau) end
redis.call('SET', KEYS[1], tat + period, 'PX', math.ceil(tat + period - now) + 1)
return 0
"""


def gcra(tat: float | None, now: float, *, period: float, tau: float) -> tuple[float, float | None]:
    """One request against a bucket: (seconds to wait, 0 when allowed; the new stored tat, None when refused).

    >>> gcra(None, 100.0, period=1.0, tau=2.0)     # a new bucket of 3 at one a second: allowed
    (0.0, 101.0)
    >>> gcra(103.0, 100.0, period=1.0, tau=2.0)    # three taken at 100 s: the 4th waits a second
    (1.0, None)
    >>> gcra(103.0, 101.0, period=1.0, tau=2.0)    # ... and is allowed one second later
    (0.0, 104.0)
    """
    tat = max(tat if tat is not None else now, now)
    if tat - now > tau:
        return tat - now - tau, None
    return 0.0, tat + period


class MemoryBuckets:
    """Buckets in this process (a lock around each update: the web process's threads share them)."""

    def __init__(self):
        self.lock, self.tats = threading.Lock(), {}

    def take(self, key: str, *, period: float, tau: float) -> float:
        now = time.monotonic()
        with self.lock:
            wait, tat = gcra(self.tats.get(key), now, period=period, tau=tau)
            if tat is not None:
                if len(self.tats) >= MEMORY_KEYS_MAX:  # a full bucket is the same as no bucket
                    self.tats = {k: v for k, v in self.tats.items() if v > now}
                self.tats[key] = tat
        return wait


_memory = MemoryBuckets()
_redis_clients: dict[str, object] = {}
_last_warning = [0.0]


def _redis(url: str):
    """One client per URL and process (redis-py's pool is thread-safe), with short time-outs: a Redis that does
    not answer costs a request at most half a second before the memory fallback."""
    if url not in _redis_clients:
        import redis

        _redis_clients[url] = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
    return _redis_clients[url]


def _broker() -> tuple[str, str]:
    """(Redis URL, key prefix) of the broker, or ("", "") when the broker is not Redis."""
    from workers.port import celery_app

    app = celery_app()

    url = str(app.conf.broker_url or "")
    if not url.startswith(("redis://", "rediss://")):
        return "", ""
    return url, str((app.conf.broker_transport_options or {}).get("global_keyprefix", ""))


def take(bucket: str, *, rate_per_min: int, burst: int) -> float:
    """Take one request from ``bucket`` (a token's digest): 0.0 when allowed, else the seconds until one is back."""
    period = 60.0 / rate_per_min
    tau = period * (burst - 1)
    url, prefix = _broker()
    if url:
        import redis

        try:
            waited_ms = _redis(url).eval(_GCRA_LUA, 1, f"{prefix}seedbed:api-rate:{bucket}",
                                         round(period * 1000, 3), round(tau * 1000, 3))
            return int(waited_ms) / 1000
        except (redis.RedisError, OSError) as exc:
            if time.monotonic() - _last_warning[0] > 60:
                _last_warning[0] = time.monotonic()
                log.warning("API rate limit: Redis at the broker's address does not answer (%s); counting in this "
                            "process meanwhile", exc)
    return _memory.take(bucket, period=period, tau=tau)
