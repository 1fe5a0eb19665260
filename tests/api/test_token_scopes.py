"""API tokens have a scope and an expiry: a read token reads and is refused every write (403 naming its scope, nothing
changed); an expired or revoked token is refused (401 saying so, also through the command-line client); both are
chosen when the token is made (bad values are field errors naming the field) and shown on the tokens page; tokens
made before the fields existed keep working as read-write tokens that never expire."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from tests.api.conftest import Api
from tests.conftest import logged_in
from training.fields import FieldErrors
from webapp.api.models import ApiToken
from webapp.api.services import token_create, token_revoke, user_for_token
from webapp.runs.models import Run, RunStatus

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def _launch(api, config) -> dict:
    response = api.post("/runs", {"name": "r", "config": config})
    assert response.status_code == 201, response.content
    return response.json()


def test_a_read_token_reads_and_every_write_is_403_naming_its_scope(client, alice, config):
    run = _launch(alice, config)
    user = ApiToken.objects.get().user
    row, token = token_create(user=user, name="dashboard", scope="read")
    reader = Api(client, token)
    for path in ("/me", "/runs", f"/runs/{run['id']}", f"/runs/{run['id']}/metrics", "/sweeps", "/projects"):
        assert reader.get(path).status_code == 200, path
    for response in (reader.post("/runs", {"name": "x", "config": config}),
                     reader.post(f"/runs/{run['id']}/kill", {"reason": "read token"}),
                     reader.patch(f"/runs/{run['id']}", {"name": "renamed"}),
                     reader.post("/projects", {"name": "newproj"})):
        assert response.status_code == 403, response.content
        detail = response.json()["detail"]
        assert "scope is read" in detail and "/account/tokens/" in detail, detail
    assert "not PATCH" in reader.patch(f"/runs/{run['id']}", {"name": "renamed"}).json()["detail"]
    # (the API has no PUT or DELETE yet: the rule refuses every method but GET, HEAD and OPTIONS, known or not)
    assert all(row.refusal_for(method) for method in ("PUT", "DELETE", "post", "PROPFIND"))
    assert not any(row.refusal_for(method) for method in ("GET", "HEAD", "OPTIONS"))
    stored = Run.objects.get()
    assert Run.objects.count() == 1 and stored.name == "r" and stored.status == RunStatus.QUEUED
    assert stored.kill_requested_at is None
    # the same user's read-write token may (its role decides, as before)
    assert alice.patch(f"/runs/{run['id']}", {"name": "renamed"}).status_code == 200


def test_an_expired_token_is_401_saying_so_and_a_revoked_one_too(client, django_user_model):
    user = django_user_model.objects.create_user(username="eve", password="pw-for-tests-only")
    row, token = token_create(user=user, name="week", expires_days=7)
    assert timedelta(days=7) - timedelta(minutes=1) < row.expires_at - timezone.now() <= timedelta(days=7)
    api = Api(client, token)
    assert api.get("/me").status_code == 200
    ApiToken.objects.filter(pk=row.pk).update(expires_at=timezone.now() - timedelta(seconds=1))  # 7 days later
    response = api.get("/me")
    assert response.status_code == 401
    detail = response.json()["detail"]
    assert "expired on" in detail and row.prefix in detail and "/account/tokens/" in detail, detail
    assert api.post("/projects", {"name": "late"}).status_code == 401 and user_for_token(token) is None

    row, token = token_create(user=user, name="revoked")
    token_revoke(user=user, token_id=row.pk)
    response = Api(client, token).get("/me")
    assert response.status_code == 401 and "was revoked on" in response.json()["detail"]
    # an unknown token is told nothing about any token
    response = Api(client, token[:-2] + "xx").get("/me")
    assert response.status_code == 401 and response.json()["detail"].startswith("give a valid token")


def test_scope_and_expiry_are_checked_when_a_token_is_made(django_user_model, capsys):
    user = django_user_model.objects.create_user(username="fay", password="pw-for-tests-only")
    staff = django_user_model.objects.create_user(username="stan", password="pw-for-tests-only", is_staff=True)
    for kwargs, field, message in (({"scope": "admin"}, "scope", "one of read, read-write"),
                                   ({"expires_days": 0}, "expires_days", "from 1 to 365"),
                                   ({"expires_days": 366}, "expires_days", "from 1 to 365"),
                                   ({"expires_days": True}, "expires_days", "from 1 to 365"),
                                   ({"expires_days": None}, "expires_days", "for staff accounts")):
        with pytest.raises(FieldErrors) as caught:
            token_create(user=user, **kwargs)
        assert message in caught.value.errors[field], caught.value.errors
    assert not ApiToken.objects.exists()
    row, _ = token_create(user=staff, expires_days=None)
    assert row.expires_at is None and row.scope == "read-write" and row.state == "active"
    call_command("api_token", "fay", "--scope", "read", "--expires-days", "never")
    row = ApiToken.objects.get(user=user)
    assert row.scope == "read" and row.expires_at is None and user_for_token(capsys.readouterr().out.strip()) == user


def test_the_tokens_page_makes_a_token_of_the_chosen_scope_and_expiry_and_lists_both(django_user_model):
    user = django_user_model.objects.create_user(username="gus", password="pw-for-tests-only")
    page = logged_in(user)
    response = page.post("/account/tokens/", {"name": "ci", "scope": "read", "expires_days": "7"})
    assert response.status_code == 200
    row = ApiToken.objects.get(user=user)
    assert row.scope == "read" and timedelta(days=6) < row.expires_at - timezone.now() <= timedelta(days=7)
    for data, field in (({"scope": "root", "expires_days": "7"}, "scope"),
                        ({"scope": "read", "expires_days": "forever"}, "expires_days"),
                        ({"scope": "read", "expires_days": "never"}, "expires_days")):  # not staff
        response = page.post("/account/tokens/", data)
        assert response.status_code == 400 and f"{field}: " in response.content.decode()
    old, _ = token_create(user=user, name="old", expires_days=30)
    ApiToken.objects.filter(pk=old.pk).update(expires_at=timezone.now() - timedelta(days=1))
    html = page.get("/account/tokens/").content.decode()
    assert ApiToken.objects.filter(user=user).count() == 2
    assert f'<tr data-token="{row.pk}">' in html and 'class="scope">read</td>' in html
    assert row.expires_at.strftime("%Y-%m-%d") in html and 'data-state="expired"' in html
    assert f'id="revoke-{row.pk}"' in html and f'id="revoke-{old.pk}"' not in html  # an expired one is not live
    assert 'value="never"' not in html  # never-expiring tokens are offered to staff only


@pytest.mark.django_db(transaction=True)
def test_tokens_made_before_the_scope_existed_become_read_write_and_never_expire():
    def migrate(target):
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate([target])
        return executor.loader.project_state([target]).apps

    old = migrate(("api", "0003_idempotency_key_to_projects"))
    owner = old.get_model("auth", "User").objects.create(username="hal")
    token = "sb_" + "x" * 43
    from webapp.api.services import _digest
    old.get_model("api", "ApiToken").objects.create(user=owner, prefix=token[:10], digest=_digest(token))
    migrate(("api", "0005_token_run_scope"))  # (the model's fields now: 0005 adds the run of a run token)
    row = ApiToken.objects.get(user_id=owner.pk)
    assert row.scope == "read-write" and row.expires_at is None and row.state == "active" and row.run_id is None
    assert user_for_token(token).username == "hal"


@pytest.mark.django_db(transaction=True)
def test_the_client_prints_why_a_token_is_refused(live_server, django_user_model):
    import subprocess

    from tests.api.test_client import assert_failed, client_argv, client_env
    from tests.conftest import REPO

    user = django_user_model.objects.create_user(username="ivy", password="pw-for-tests-only")
    reader, read_token = token_create(user=user, scope="read")
    expired, expired_token = token_create(user=user)
    ApiToken.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(minutes=1))

    def cli(token, *args):
        return subprocess.run(client_argv(*args), cwd=REPO, env=client_env(live_server.url, token),
                              capture_output=True, text=True, timeout=60)

    assert cli(read_token, "projects", "list").returncode == 0
    assert_failed(cli(read_token, "projects", "create", "mine"), 4, "error: forbidden: this token's scope is read")
    assert_failed(cli(expired_token, "projects", "list"), 3, "error: the server refused the token: this token",
                  "expired on")
