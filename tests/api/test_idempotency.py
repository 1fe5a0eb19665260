"""Launches safe to retry: POST /runs, /sweeps and /evals with an ``Idempotency-Key`` create once per user and
key; a retry gets the first answer, another request with the key a 422, another user's same key their own launch."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from webapp.projects.idempotency import keys_expire
from webapp.projects.models import IdempotencyKey
from webapp.evals.models import EvalJob
from webapp.runs.models import Run
from webapp.sweeps.models import Sweep

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

KEY = {"Idempotency-Key": "launch-7f3c2a"}


def test_a_run_launch_retried_with_its_key_creates_one_run_and_answers_the_same(alice, config):
    body = {"name": "r", "config": config}
    first = alice.post("/runs", body, headers=KEY)
    assert first.status_code == 201, first.content
    again = alice.post("/runs", body, headers=KEY)
    # the same JSON written another way (key order, spacing) is the same request
    spelled = alice.post("/runs", raw=json.dumps({"config": config, "name": "r"}, indent=2), headers=KEY)
    for retry in (again, spelled):
        assert (retry.status_code, retry.json()) == (201, first.json())
        assert retry["Idempotent-Replayed"] == "true"
    assert Run.objects.count() == 1
    # without a key (or with a new one) each launch is a launch
    assert alice.post("/runs", body).status_code == 201
    assert alice.post("/runs", body, headers={"Idempotency-Key": "another"}).status_code == 201
    assert Run.objects.count() == 3


def test_a_sweep_and_an_eval_retried_with_their_keys_are_made_once(alice, config):
    sweep_body = {"config": config, "seeds": [1, 2], "concurrency": 1, "project": "vision"}
    first = alice.post("/sweeps", sweep_body, headers={"Idempotency-Key": "sweep-1"})
    assert first.status_code == 201, first.content
    again = alice.post("/sweeps", sweep_body, headers={"Idempotency-Key": "sweep-1"})
    assert (again.status_code, again.json()) == (201, first.json())
    assert Sweep.objects.count() == 1 and Run.objects.count() == 2

    eval_body = {"sweep": first.json()["id"], "models": ["base"], "problems": 4, "n": 2}
    job = alice.post("/evals", eval_body, headers={"Idempotency-Key": "eval-1"})
    assert job.status_code == 201, job.content
    again = alice.post("/evals", eval_body, headers={"Idempotency-Key": "eval-1"})
    assert (again.status_code, again.json()) == (201, job.json())
    assert EvalJob.objects.count() == 1


def test_the_key_with_another_body_or_endpoint_is_a_422_and_creates_nothing(alice, config):
    assert alice.post("/runs", {"name": "a", "config": config}, headers=KEY).status_code == 201
    other = alice.post("/runs", {"name": "b", "config": config}, headers=KEY)
    assert other.status_code == 422 and "Idempotency-Key" in other.json()["detail"]
    assert "another request" in other.json()["detail"]
    elsewhere = alice.post("/sweeps", {"name": "a", "config": config, "seeds": 2}, headers=KEY)
    assert elsewhere.status_code == 422
    assert Run.objects.count() == 1 and not Sweep.objects.exists()


def test_another_users_same_key_is_their_own_launch(alice, bob, config):
    mine = alice.post("/runs", {"name": "r", "config": config}, headers=KEY)
    theirs = bob.post("/runs", {"name": "r", "config": config}, headers=KEY)
    assert mine.status_code == theirs.status_code == 201
    assert mine.json()["id"] != theirs.json()["id"]
    assert theirs.json()["project"] != "vision" and "Idempotent-Replayed" not in theirs
    assert Run.objects.count() == 2


@pytest.mark.parametrize("key, problem", [("", "must not be empty"), ("k" * 201, "at most 200 characters"),
                                          ("caf\u00e9", "printable ASCII"), ("a\tb", "printable ASCII")])
def test_a_malformed_key_is_a_400_naming_the_header_and_creates_nothing(alice, config, key, problem):
    response = alice.client.post("/api/v1/runs", json.dumps({"config": config}), content_type="application/json",
                                 HTTP_AUTHORIZATION=f"Bearer {alice.token}",
                                 HTTP_IDEMPOTENCY_KEY=key.encode().decode("latin-1"))
    assert response.status_code == 400, response.content
    assert problem in response.json()["errors"]["Idempotency-Key"]
    assert not Run.objects.exists() and not IdempotencyKey.objects.exists()


def test_a_failed_launch_keeps_no_key_so_a_corrected_retry_launches(alice, config):
    bad = alice.post("/runs", {"config": {**config, "lr": -1}}, headers=KEY)
    assert bad.status_code == 400 and not IdempotencyKey.objects.exists()
    good = alice.post("/runs", {"config": config}, headers=KEY)
    assert good.status_code == 201 and Run.objects.count() == 1


def test_keys_expire_after_a_day_and_the_maintenance_pass_removes_them(alice, config, monkeypatch):
    from workers import tasks

    monkeypatch.setattr(tasks, "close_old_connections", lambda: None)  # the test's connection stays open

    first = alice.post("/runs", {"config": config}, headers=KEY).json()
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(hours=25))
    # an expired key is a new launch (even before the maintenance pass removed it)
    later = alice.post("/runs", {"config": config}, headers=KEY).json()
    assert later["id"] != first["id"] and IdempotencyKey.objects.count() == 1
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(hours=25))
    assert keys_expire() == 1 and not IdempotencyKey.objects.exists()
    alice.post("/runs", {"config": config}, headers={"Idempotency-Key": "old"})
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(hours=25))
    assert tasks.maintenance()["idempotency_keys_expired"] == 1
    assert not IdempotencyKey.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_two_retries_at_once_with_one_key_make_one_run_and_get_one_answer(alice, config, monkeypatch):
    """The first request is held inside its launch (its key and run written, not committed) while the second
    comes in with the same key: the unique constraint makes the second wait for the first and answer its run."""
    import threading

    from django.db import connection, connections
    from django.test import Client

    from tests.conftest import wait_for
    from webapp.runs import services as run_services

    inside, release = threading.Event(), threading.Event()
    original = run_services.run_create

    def held_run_create(**kwargs):
        run = original(**kwargs)
        inside.set()
        assert release.wait(60)
        return run

    monkeypatch.setattr(run_services, "run_create", held_run_create)
    answers = {}

    def post(name: str) -> None:
        try:
            response = Client().post("/api/v1/runs", json.dumps({"config": config}), content_type="application/json",
                                     HTTP_AUTHORIZATION=f"Bearer {alice.token}", HTTP_IDEMPOTENCY_KEY="same")
            answers[name] = (response.status_code, response.json())
        finally:
            connections.close_all()

    first = threading.Thread(target=post, args=("first",))
    first.start()
    assert inside.wait(60)
    second = threading.Thread(target=post, args=("second",))
    second.start()
    if connection.vendor == "postgresql":  # the second's insert of the key waits on the first's transaction
        def waiting_on_a_lock() -> bool:
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                               "AND datname = current_database()")
                return cursor.fetchone()[0] >= 1
        wait_for(waiting_on_a_lock, timeout=30, what="the second request to wait on the first's key")
    release.set()
    first.join(60)
    second.join(60)
    assert answers["first"][0] == 201 and answers["second"] == answers["first"], answers
    assert Run.objects.count() == 1 and IdempotencyKey.objects.count() == 1


def test_the_openapi_schema_documents_the_header_on_the_launches(alice):
    paths = alice.get("/schema").json()["paths"]
    for path in ("/api/v1/runs", "/api/v1/sweeps", "/api/v1/evals"):
        headers = [p for p in paths[path]["post"].get("parameters", []) if p["in"] == "header"]
        assert [h["name"] for h in headers] == ["Idempotency-Key"], (path, headers)
        assert headers[0]["schema"]["maxLength"] == 200
    assert not [p for p in paths["/api/v1/runs"]["get"].get("parameters", []) if p["in"] == "header"]
