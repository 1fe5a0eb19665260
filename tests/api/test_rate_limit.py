"""Requests per API token (webapp.api.ratelimit): a token past its burst gets 429 with ``Retry-After`` (another token
is not slowed), is let in again when that many seconds have passed, and shares its bucket across processes (in the
broker's Redis, as every gunicorn worker would); with Redis not answering, the API still answers and still counts
(in the process). The command-line client waits a 429 out. Small limits come from settings overrides."""
from __future__ import annotations

import re
import socket
import subprocess
import sys
import time

import pytest

from tests.api.conftest import Api
from tests.conftest import REPO
from webapp.api.models import ApiToken
from webapp.api.services import token_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def tokens(django_user_model):
    user = django_user_model.objects.create_user(username="rita", password="pw-for-tests-only")
    return [token_create(user=user, name=f"t{i}")[1] for i in range(2)]


def _refused(response, limits: str) -> int:
    assert response.status_code == 429, response.content
    retry_after = int(response["Retry-After"])
    body = response.json()
    assert body["retry_after_s"] == retry_after and limits in body["detail"], body
    assert f"retry in {retry_after} s" in body["detail"]
    return retry_after


def test_past_its_burst_a_token_is_429_with_retry_after_and_let_in_again_after_it(settings, client, tokens):
    settings.SEEDBED_API_RATE_PER_MIN, settings.SEEDBED_API_RATE_BURST = 60, 3  # 3 at once, then one a second
    first, second = Api(client, tokens[0]), Api(client, tokens[1])
    assert [first.get("/me").status_code for _ in range(3)] == [200, 200, 200]
    retry_after = _refused(first.get("/me"), "at most 3 at once and 60 a minute")
    assert retry_after == 1
    assert _refused(first.post("/projects", {"name": "flood"}), "60 a minute") == 1  # writes count the same
    assert second.get("/me").status_code == 200  # another token has its own bucket
    time.sleep(retry_after)
    assert first.get("/me").status_code == 200  # one back after Retry-After ...
    assert first.get("/me").status_code == 429  # ... and only one


def test_the_bucket_is_shared_by_every_process(settings, client, tokens):
    """Another process (a second gunicorn worker) takes the token's burst; this one is then refused."""
    settings.SEEDBED_API_RATE_PER_MIN, settings.SEEDBED_API_RATE_BURST = 6, 2  # one every 10 s
    digest = ApiToken.objects.get(name="t0").digest
    code = ("from webapp.api.ratelimit import take; "
            f"print([take({digest!r}, rate_per_min=6, burst=2) for _ in range(2)])")
    taken = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert taken.returncode == 0 and taken.stdout.strip() == "[0.0, 0.0]", taken.stderr
    assert 1 <= _refused(Api(client, tokens[0]).get("/me"), "at most 2 at once") <= 10
    assert Api(client, tokens[1]).get("/me").status_code == 200


def test_with_redis_not_answering_the_api_answers_and_still_counts(settings, client, tokens, monkeypatch, caplog):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("CELERY_BROKER_URL", f"redis://127.0.0.1:{port}/0")  # (Celery reads it first)
    settings.SEEDBED_API_RATE_PER_MIN, settings.SEEDBED_API_RATE_BURST = 6, 2
    api = Api(client, tokens[0])
    started = time.monotonic()
    assert [api.get("/me").status_code for _ in range(2)] == [200, 200]
    _refused(api.get("/me"), "at most 2 at once")
    assert time.monotonic() - started < 5  # a refused connection costs no time-out


def test_the_client_waits_a_429_out(settings, client, live_server, tokens):
    settings.SEEDBED_API_RATE_PER_MIN, settings.SEEDBED_API_RATE_BURST = 20, 1  # one every 3 s
    from tests.api.test_client import client_argv, client_env

    assert Api(client, tokens[0]).get("/me").status_code == 200  # the burst taken: the client's request waits
    listed = subprocess.run(client_argv("projects", "list"), cwd=REPO, env=client_env(live_server.url, tokens[0]),
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and "rita" in listed.stdout, listed.stderr
    assert re.search(r"GET /projects: the server's rate limit for this token; sending it again in [123] s \(1/3\)",
                     listed.stderr), listed.stderr
