"""Which broker Seedbed uses, decided once by the launcher (``python -m workers.broker choose``).

Order (README "Configuration"): $CELERY_BROKER_URL if set; else Redis at $REDIS_URL (default
redis://127.0.0.1:6379/0) when it answers, as given; else the local ``redis-server`` started here before, if it
still runs; else a local ``redis-server`` started here if one is installed; else Celery's filesystem transport
under $SEEDBED_HOME/broker. The choice is printed as one log line on stderr (its password masked) and the URL
on stdout, so every process (web, worker, beat) is given the same URL.

The Redis started here requires a password: any account on the machine can reach a loopback port, and one
that can write to the broker can queue a training task for any run. The password is made once and kept in
$SEEDBED_HOME/redis_password (0600, as the admin password); redis-server reads it from a config file of the
same mode (``requirepass``), never from its command line, which ``ps`` shows to everyone; the URL printed
for the services carries it.
"""
from __future__ import annotations

import argparse
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote, urlparse, urlunparse

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
FILESYSTEM_URL = "filesystem://"
PASSWORD_FILE = "redis_password"  # under $SEEDBED_HOME, 0600
LOCAL_HOSTS = ("127.0.0.1", "localhost")


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


def local_password(home: Path, *, create: bool = False) -> str:
    """The password of the Redis started here: 32 random bytes as 64 hex digits (``secrets.token_hex``: 256
    bits, nothing a guess at Redis's speed can reach), made once (``create``) and kept in
    $SEEDBED_HOME/redis_password, 0600; "" when there is none yet and ``create`` is false."""
    path = home / PASSWORD_FILE
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        if not create:
            return ""
    home.mkdir(parents=True, exist_ok=True)
    try:  # O_EXCL: two launchers at once keep the first one's password
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as fh:
        fh.write(secrets.token_hex(32) + "\n")
    return path.read_text().strip()


def with_password(url: str, password: str) -> str:
    """``url`` with ``password`` in it (Redis's default user: ``redis://:PASSWORD@host:port/db``).

    >>> with_password("redis://127.0.0.1:6390/0", "s3cret")
    'redis://:s3cret@127.0.0.1:6390/0'
    """
    parsed = urlparse(url)
    netloc = f":{quote(password, safe='')}@{parsed.hostname}" + (f":{parsed.port}" if parsed.port else "")
    return urlunparse(parsed._replace(netloc=netloc))


def masked(url: str) -> str:
    """``url`` for a log line: its password, if any, as ``***``.

    >>> masked("redis://:s3cret@127.0.0.1:6390/0"), masked("redis://127.0.0.1:6379/0")
    ('redis://:***@127.0.0.1:6390/0', 'redis://127.0.0.1:6379/0')
    """
    parsed = urlparse(url)
    if not parsed.password:
        return url
    user = parsed.username or ""
    netloc = f"{user}:***@{parsed.hostname}" + (f":{parsed.port}" if parsed.port else "")
    return urlunparse(parsed._replace(netloc=netloc))


def own_redis_url(url: str, home: Path) -> str:
    """The URL of the Redis started here before on ``url``'s port, with its password, when it still answers;
    "" otherwise (none was started, ``url`` is not on this machine or already names a password)."""
    parsed = urlparse(url)
    password = local_password(home)
    if not password or parsed.password or parsed.hostname not in LOCAL_HOSTS:
        return ""
    authed = with_password(url, password)
    return authed if redis_answers(authed) else ""


def filesystem_options(home: Path) -> dict:
    """Transport options of the filesystem fallback: one folder for messages, one for fanout tables."""
    queue_dir, control_dir = home / "broker" / "queue", home / "broker" / "control"
    queue_dir.mkdir(parents=True, exist_ok=True)
    control_dir.mkdir(parents=True, exist_ok=True)
    return {"data_folder_in": str(queue_dir), "data_folder_out": str(queue_dir), "control_folder": str(control_dir),
            "store_processed": False}


def start_local_redis(url: str, home: Path, wait_s: float = 5.0) -> str:
    """Start ``redis-server`` on the URL's port (daemonized, pid in $SEEDBED_HOME/redis.pid), requiring the
    password of ``local_password`` (from a 0600 config file, $SEEDBED_HOME/redis/redis.conf); returns the URL
    with the password once it answers, "" if it does not."""
    exe = shutil.which("redis-server")
    if exe is None:
        return ""
    parsed = urlparse(url)
    if parsed.hostname not in LOCAL_HOSTS or parsed.password:
        return ""  # only a broker on this machine can be started here, and only with a password of its own
    data_dir = home / "redis"
    data_dir.mkdir(parents=True, exist_ok=True)
    password = local_password(home, create=True)
    conf = data_dir / "redis.conf"
    fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(f"requirepass {password}\n")
    os.chmod(conf, 0o600)  # (one made before with another mode)
    authed = with_password(url, password)
    subprocess.run([exe, str(conf), "--port", str(parsed.port or 6379), "--bind", "127.0.0.1", "--daemonize", "yes",
                    "--pidfile", str(home / "redis.pid"), "--logfile", str(home / "redis.log"),
                    # queued messages survive a Redis restart: an append-only file under $SEEDBED_HOME/redis,
                    # written every second (no RDB snapshots: the AOF is the whole state)
                    "--dir", str(data_dir), "--save", "", "--appendonly", "yes", "--appendfsync", "everysec"],
                   check=False)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if redis_answers(authed):
            return authed
        time.sleep(0.1)
    return ""


def choose(*, start_local: bool) -> tuple[str, str]:
    """Returns (broker URL, the one log line explaining the choice)."""
    explicit = os.environ.get("CELERY_BROKER_URL")
    if explicit:
        return explicit, f"broker: {masked(explicit)} (from $CELERY_BROKER_URL)"
    url = redis_url()
    if redis_answers(url):
        return url, f"broker: Redis at {masked(url)} (reachable)"
    home = seedbed_home()
    own = own_redis_url(url, home)
    if own:
        return own, f"broker: Redis at {masked(own)} (the local redis-server started before, with its password)"
    started = start_local_redis(url, home) if start_local else ""
    if started:
        return started, (f"broker: Redis at {masked(started)} (not running; started a local redis-server with "
                         f"the password in {home / PASSWORD_FILE}, pid file {home}/redis.pid)")
    where = home / "broker"
    filesystem_options(home)
    return FILESYSTEM_URL, (f"broker: Celery filesystem transport under {where} (no Redis at {masked(url)} and "
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
