"""Which broker Seedbed uses, decided once by the launcher (``python -m workers.broker choose``).

Order (README "Configuration"): $CELERY_BROKER_URL if set; else Redis at $REDIS_URL (default
redis://127.0.0.1:6379/0) when it answers; else a local ``redis-server`` started here if one is installed;
else Celery's filesystem transport under $SEEDBED_HOME/broker. The choice is printed as one log line on
stderr and the URL on stdout, so every process (web, worker, beat) is given the same URL.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
FILESYSTEM_URL = "filesystem://"


def seedbed_home() -> Path:
    root = Path(__file__).resolve().parent.parent
    return Path(os.environ.get("SEEDBED_HOME", root / "var")).resolve()


def redis_url() -> str:
    return os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL


def redis_answers(url: str, timeout_s: float = 0.5) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s).ping())
    except (redis.RedisError, OSError):
        return False


def filesystem_options(home: Path) -> dict:
    """Transport options of the filesystem fallback: one folder for messages, one for fanout tables."""
    queue_dir, control_dir = home / "broker" / "queue", home / "broker" / "control"
    queue_dir.mkdir(parents=True, exist_ok=True)
    control_dir.mkdir(parents=True, exist_ok=True)
    return {"data_folder_in": str(queue_dir), "data_folder_out": str(queue_dir), "control_folder": str(control_dir),
            "store_processed": False}


def start_local_redis(url: str, home: Path, wait_s: float = 5.0) -> bool:
    """Start ``redis-server`` on the URL's port (daemonized, pid in $SEEDBED_HOME/redis.pid); True if it answers."""
    exe = shutil.which("redis-server")
    if exe is None:
        return False
    parsed = urlparse(url)
    if parsed.hostname not in ("127.0.0.1", "localhost"):
        return False  # only a broker on this machine can be started here
    data_dir = home / "redis"
    data_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run([exe, "--port", str(parsed.port or 6379), "--bind", "127.0.0.1", "--daemonize", "yes",
                    "--pidfile", str(home / "redis.pid"), "--logfile", str(home / "redis.log"),
                    # queued messages survive a Redis restart: an append-only file under $SEEDBED_HOME/redis,
                    # written every second (no RDB snapshots: the AOF is the whole state)
                    "--dir", str(data_dir), "--save", "", "--appendonly", "yes", "--appendfsync", "everysec"],
                   check=False)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if redis_answers(url):
            return True
        time.sleep(0.1)
    return False


def choose(*, start_local: bool) -> tuple[str, str]:
    """Returns (broker URL, the one log line explaining the choice)."""
    explicit = os.environ.get("CELERY_BROKER_URL")
    if explicit:
        return explicit, f"broker: {explicit} (from $CELERY_BROKER_URL)"
    url = redis_url()
    if redis_answers(url):
        return url, f"broker: Redis at {url} (reachable)"
    home = seedbed_home()
    if start_local and start_local_redis(url, home):
        return url, f"broker: Redis at {url} (not running; started a local redis-server, pid file {home}/redis.pid)"
    where = home / "broker"
    filesystem_options(home)
    return FILESYSTEM_URL, (f"broker: Celery filesystem transport under {where} (no Redis at {url} and "
                            f"{'no redis-server installed' if shutil.which('redis-server') else 'could not start redis-server'})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.broker")
    sub = parser.add_subparsers(dest="cmd", required=True)
    ch = sub.add_parser("choose", help="decide the broker; print the log line on stderr and the URL on stdout")
    ch.add_argument("--no-start", action="store_true", help="never start a local redis-server")
    args = parser.parse_args(argv)
    url, line = choose(start_local=not args.no_start)
    print(line, file=sys.stderr)
    print(url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
