"""The broker choice (README "Configuration") and the filesystem fallback with a real worker."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from tests.conftest import REPO, WorkerProcess, tiny_config, wait_for
from webapp.runs.models import Run, RunStatus
from workers import broker
from webapp.projects.services import default_project


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_explicit_broker_url_wins(monkeypatch):
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://example.invalid:6379/3")
    url, line = broker.choose(start_local=True)
    assert url == "redis://example.invalid:6379/3" and "CELERY_BROKER_URL" in line


def test_reachable_redis_is_used_as_given(monkeypatch):
    # the test session's Redis (the machine's at 127.0.0.1:6379 when it answers), named by $REDIS_URL
    session = os.environ["CELERY_BROKER_URL"]
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)
    monkeypatch.setenv("REDIS_URL", session)
    url, line = broker.choose(start_local=False)
    assert url == session and line == f"broker: Redis at {broker.masked(session)} (reachable)"


def test_the_local_redis_server_started_requires_its_password(monkeypatch, tmp_path):
    """Started the way ``./seedbed up`` starts it (``choose``, no Redis on $REDIS_URL's port): a client without the
    password is refused (NOAUTH); the password is in a 0600 file, redis-server read it from a 0600 config file, and
    no process's command line shows it; the next ``choose`` finds the same server with the same password."""
    import redis

    port = free_port()
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{port}/0")
    monkeypatch.setenv("SEEDBED_HOME", str(tmp_path))
    url, line = broker.choose(start_local=True)
    try:
        password = (tmp_path / "redis_password").read_text().strip()
        assert len(password) == 64 and url == f"redis://:{password}@127.0.0.1:{port}/0"
        assert "started a local redis-server" in line and password not in line and ":***@" in line
        assert (tmp_path / "redis_password").stat().st_mode & 0o777 == 0o600
        assert (tmp_path / "redis" / "redis.conf").stat().st_mode & 0o777 == 0o600
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:  # a client without the password
            conn.sendall(b"PING\r\n")
            assert conn.recv(200).startswith(b"-NOAUTH")
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(host="127.0.0.1", port=port, password="wrong", socket_timeout=2).ping()
        assert broker.redis_answers(url) and not broker.redis_answers(f"redis://127.0.0.1:{port}/0")
        pid = int((tmp_path / "redis.pid").read_text())
        cmdlines = [p.read_bytes() for p in Path("/proc").glob("[0-9]*/cmdline") if p.exists()]
        assert not [c for c in cmdlines if password.encode() in c]
        assert b"redis-server" in Path(f"/proc/{pid}/cmdline").read_bytes()
        from workers.doctor import check_redis  # `./seedbed doctor` finds it too, its password masked

        found = check_redis()
        assert found.ok and "started" in found.found and password not in found.found, found
        again, line = broker.choose(start_local=True)  # `./seedbed demo` on the running up: the same server
        assert again == url and "started before" in line and int((tmp_path / "redis.pid").read_text()) == pid
    finally:
        pid = int((tmp_path / "redis.pid").read_text())
        subprocess.run(["kill", str(pid)], check=True)
    wait_for(lambda: not broker.redis_answers(url), timeout=10, what="the local redis-server to stop")


def test_the_doctor_names_a_redis_password_file_other_accounts_can_read(monkeypatch, tmp_path):
    from workers.doctor import check_permissions

    monkeypatch.setenv("SEEDBED_HOME", str(tmp_path))
    tmp_path.chmod(0o700)
    broker.local_password(tmp_path, create=True)
    assert check_permissions().ok
    (tmp_path / "redis_password").chmod(0o644)
    found = check_permissions()
    assert not found.ok and f"{tmp_path / 'redis_password'} (0644)" in found.found
    assert f"chmod 600 {tmp_path / 'redis_password'}" in found.fix


def test_an_explicit_broker_urls_password_is_masked_in_the_log_line(monkeypatch):
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://:hunter2@redis.example:6379/0")
    url, line = broker.choose(start_local=False)
    assert url == "redis://:hunter2@redis.example:6379/0" and "hunter2" not in line and ":***@redis.example" in line


def test_without_any_redis_the_filesystem_transport_is_chosen(monkeypatch, tmp_path):
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{free_port()}/0")
    monkeypatch.setenv("SEEDBED_HOME", str(tmp_path))
    url, line = broker.choose(start_local=False)
    assert url == "filesystem://"
    assert line.startswith(f"broker: Celery filesystem transport under {tmp_path / 'broker'}")
    assert (tmp_path / "broker" / "queue").is_dir()


def test_the_cli_prints_the_url_and_one_log_line(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "SEEDBED_HOME": str(tmp_path), "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}
    result = subprocess.run([sys.executable, "-m", "workers.broker", "choose", "--no-start"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "filesystem://"
    assert len(result.stderr.strip().splitlines()) == 1 and "filesystem transport" in result.stderr


@pytest.mark.django_db(transaction=True)
def test_a_worker_on_the_filesystem_transport_processes_tasks(worker_env, tmp_path):
    env, _ = worker_env
    env = {**env, "CELERY_BROKER_URL": "filesystem://", "SEEDBED_HOME": str(tmp_path)}
    now = timezone.now()
    stale = Run.objects.create(project=default_project(), config=tiny_config(), seed=0, status=RunStatus.RUNNING, started_at=now,
                               heartbeat_at=now - timedelta(seconds=120))
    worker = WorkerProcess(env, tmp_path, concurrency=1)
    try:
        send = "from workers.tasks import maintenance; maintenance.apply_async(queue='maintenance')"
        subprocess.run([sys.executable, "-c", send], cwd=REPO, env=env, check=True, timeout=120)
        wait_for(lambda: Run.objects.get(pk=stale.pk).status == RunStatus.LOST, timeout=60,
                 what="the maintenance task to run through the filesystem transport")
    finally:
        worker.stop()
