"""A launch while the broker is down answers normally: the run is made queued with a "waiting for the queue"
note, and the reconciler sends it once the broker answers; the run then trains. (The broker here is a Redis of the
test's own on a free port, stopped and started for real.)"""
from __future__ import annotations

import shutil
import socket
import subprocess
import time

import pytest
from django.test import Client

from tests.conftest import tiny_config
from webapp.runs import services
from webapp.runs.models import Run, RunStatus

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def own_broker(monkeypatch, tmp_path):
    """Tasks sent to a Redis on a free port (a Celery app configured as workers.celery_app's, with that broker),
    started and stopped by the test."""
    from celery import Celery

    import workers.dispatch
    from workers.celery_app import app as seedbed_app

    port = free_port()
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)  # (Celery reads it before its own broker setting)
    app = Celery("faults", broker=f"redis://127.0.0.1:{port}/0")
    app.conf.update({k: seedbed_app.conf[k] for k in ("task_routes", "task_serializer", "accept_content",
                                                       "broker_connection_retry_on_startup")})
    monkeypatch.setattr(workers.dispatch, "celery_app", lambda: app)

    class Broker:
        proc = None
        port = None

        def start(self):
            self.proc = subprocess.Popen([shutil.which("redis-server"), "--port", str(port), "--bind", "127.0.0.1",
                                          "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
                                         stdout=subprocess.DEVNULL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    return
                except OSError:
                    time.sleep(0.05)
            raise AssertionError("redis-server did not start")

        def stop(self):
            if self.proc is not None:
                self.proc.terminate()
                self.proc.wait()

        def queued_messages(self, queue: str = "cpu") -> int:
            import redis

            return redis.Redis(port=port).llen(queue)

    broker = Broker()
    broker.port = port
    yield broker
    broker.stop()
    app.close()


def test_a_launch_while_the_broker_is_down_waits_for_the_queue_and_is_sent_once_it_is_back(
        own_broker, user, model_dir, django_capture_on_commit_callbacks):
    client = Client(raise_request_exception=False)
    client.force_login(user)
    with django_capture_on_commit_callbacks(execute=True):
        run = services.run_create(config=tiny_config(model_path=model_dir), user=user)
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and run.dispatched_at is None
    assert run.dispatch_note.startswith("waiting for the queue: the broker did not take the run")
    page = client.get(f"/runs/{run.pk}/")
    assert page.status_code == 200 and "waiting for the queue" in page.content.decode()
    # the reconciler leaves it (and only it) for a few seconds, then sends it again: still down, still noted
    assert services.runs_redispatch(older_than_s=3600) == []
    with django_capture_on_commit_callbacks(execute=True):
        assert services.runs_redispatch(older_than_s=0) == [run.pk]
    assert Run.objects.get(pk=run.pk).dispatched_at is None
    own_broker.start()
    with django_capture_on_commit_callbacks(execute=True):
        assert services.runs_redispatch(older_than_s=0) == [run.pk]
    run.refresh_from_db()
    assert run.dispatched_at is not None and run.dispatch_note == "" and own_broker.queued_messages() == 1
    with django_capture_on_commit_callbacks(execute=True):
        assert services.runs_redispatch(older_than_s=0) == []  # taken once: never sent twice
    assert own_broker.queued_messages() == 1


def test_a_queued_run_whose_message_the_broker_lost_is_sent_again(own_broker, user, model_dir, settings,
                                                                   django_capture_on_commit_callbacks):
    import redis

    own_broker.start()
    settings.SEEDBED_QUEUE_CHECK_S = 0
    with django_capture_on_commit_callbacks(execute=True):
        run = services.run_create(config=tiny_config(model_path=model_dir), user=user)
    assert Run.objects.get(pk=run.pk).dispatched_at is not None and own_broker.queued_messages() == 1
    with django_capture_on_commit_callbacks(execute=True):
        assert services.runs_redispatch(older_than_s=0) == []  # the broker holds it: left alone
    assert own_broker.queued_messages() == 1
    redis.Redis(port=own_broker.port).flushall()  # the broker's data is gone (no append-only file, a flush)
    with django_capture_on_commit_callbacks(execute=True):
        assert services.runs_redispatch(older_than_s=0) == [run.pk]
    run.refresh_from_db()
    assert own_broker.queued_messages() == 1 and run.dispatched_at is not None
    own_broker.stop()  # and a broker that cannot be read: nothing is concluded, nothing sent
    with django_capture_on_commit_callbacks(execute=True):
        assert services.runs_redispatch(older_than_s=0) == []


def test_a_launch_through_the_api_answers_normally_while_the_broker_is_down(
        own_broker, user, model_dir, django_capture_on_commit_callbacks):
    from webapp.api.services import token_create

    client = Client(raise_request_exception=False)
    token = token_create(user=user, name="t")[1]
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/api/v1/runs", {"config": tiny_config(model_path=model_dir), "project": "default"},
                               content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    assert run.status == RunStatus.QUEUED and run.dispatch_note.startswith("waiting for the queue")
    assert client.get(f"/api/v1/runs/{run.pk}", HTTP_AUTHORIZATION=f"Bearer {token}").json()["dispatch_note"] \
        == run.dispatch_note
