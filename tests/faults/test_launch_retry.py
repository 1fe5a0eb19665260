"""A real gunicorn whose worker process is SIGKILLed in the middle of a launch: the client hears no answer
(connection reset) and retries with its Idempotency-Key; exactly one run exists and both answers name it. Killed
after the broker took the run's message but before the dispatch was recorded, the reconciler stamps the run
instead of sending it twice. The server has a home (SQLite) of its own and a broker key prefix of its own on the
test Redis, which no worker consumes."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid

import pytest

from seedbed_client.client import SeedbedClient
from tests.conftest import REPO
from tests.realserver import Server, prepare_home

CONF = str(REPO / "tests" / "faults" / "gunicorn_dies_mid_launch.py")


@pytest.fixture
def server(tmp_path):
    home = tmp_path / "home"
    account = prepare_home(home)
    (home / "models" / "m").mkdir(parents=True)
    (home / "models" / "m" / "config.json").write_text(json.dumps({"model_type": "test"}))
    prefix = f"seedbed-test-{uuid.uuid4().hex[:8]}:"
    marker = tmp_path / "die"
    server = Server(home, "-c", CONF, SEEDBED_TEST_DIE=str(marker), SEEDBED_BROKER_PREFIX=prefix,
                    REDIS_URL=os.environ["CELERY_BROKER_URL"])
    server.token, server.marker, server.prefix = account["token"], marker, prefix
    yield server
    server.stop()
    import redis

    client = redis.Redis.from_url(os.environ["CELERY_BROKER_URL"])  # the session's (./seedbed test's) Redis
    for key in client.scan_iter(f"{prefix}*"):
        client.delete(key)


def runs_in(server) -> list[tuple]:
    with sqlite3.connect(server.home / "seedbed.sqlite3") as db:
        return db.execute("SELECT id, status, dispatched_at FROM runs_run ORDER BY id").fetchall()


def launch_body(server) -> dict:
    return {"name": "retried", "config": {"preset": "grpo", "model_path": str(server.home / "models" / "m"),
                                          "task": "arithmetic", "total_steps": 4, "prompts_per_step": 2,
                                          "group_size": 2, "max_new_tokens": 4, "device": "cuda"}}


def reconcile(server) -> str:
    """One reconciler pass (runs_redispatch) on the server's database and broker, as the maintenance worker runs it."""
    code = ("import django; django.setup(); from webapp.runs.services import runs_redispatch; "
            "print('SENT', runs_redispatch(older_than_s=0))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=server.env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("point", ["before_commit", "after_send"])
def test_a_launch_retried_after_the_web_process_died_makes_one_run(server, point, capsys):
    server.marker.write_text(point)
    client = SeedbedClient(server.url, server.token, retry_wait_s=0.5)
    answer = client.launch("/runs", launch_body(server))
    assert not server.marker.exists(), "the worker process did not die"
    assert "sending it again with the same Idempotency-Key" in capsys.readouterr().err
    runs = runs_in(server)
    assert [run[0] for run in runs] == [answer["id"]], (runs, answer)
    if point == "after_send":
        # the message is in the broker but the dying process never recorded it: the reconciler stamps the run
        # rather than sending a second copy
        assert runs[0][2] is None
        assert "SENT []" in reconcile(server)
        assert runs_in(server)[0][2] is not None
    # the next launch command (another key) is a new launch
    assert client.launch("/runs", launch_body(server))["id"] != answer["id"]
    assert len(runs_in(server)) == 2
