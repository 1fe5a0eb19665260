"""Production-facing settings: a content security policy with per-page nonces, login throttling, hosts that
fail closed."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse

from webapp.runs import services

pytestmark = pytest.mark.django_db


def test_pages_carry_a_csp_and_their_inline_scripts_its_nonce(client_in, model_dir):
    run = services.run_create(config={"model_path": model_dir})
    response = client_in.get(reverse("runs:detail", args=[run.pk]))
    policy = response["Content-Security-Policy"]
    assert "default-src 'self'" in policy and "object-src 'none'" in policy and "frame-ancestors 'none'" in policy
    nonce = re.search(r"script-src 'self' 'nonce-([^']+)'", policy).group(1)
    inline = re.findall(r"<script(?![^>]*\bsrc=)([^>]*)>", response.content.decode())
    assert inline and all(f'nonce="{nonce}"' in attrs for attrs in inline)
    assert "unsafe-eval" not in policy and "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0]


def test_repeated_failed_logins_lock_the_username_out_even_with_the_right_password(client, django_user_model,
                                                                                     settings):
    settings.AXES_FAILURE_LIMIT = 3
    django_user_model.objects.create_user(username="bob", password="the-right-one")
    login = reverse("login")
    codes = [client.post(login, {"username": "bob", "password": "guess"}).status_code for _ in range(3)]
    assert codes == [200, 200, 429]  # the form again, twice; the third failure locks the pair out
    locked = client.post(login, {"username": "bob", "password": "the-right-one"})
    assert locked.status_code == 429 and "_auth_user_id" not in client.session
    # another user from the same address is not locked out
    django_user_model.objects.create_user(username="ada", password="hers")
    assert client.post(login, {"username": "ada", "password": "hers"}).status_code == 302


def test_an_unknown_host_is_refused(client):
    assert client.get(reverse("login"), HTTP_HOST="evil.example").status_code == 400
    assert client.get(reverse("login"), HTTP_HOST="localhost").status_code == 200


def test_a_config_may_name_only_paths_inside_the_allowed_folders(client_in, settings, tmp_path, model_dir):
    """A request's model_path and data_path must lie in $SEEDBED_HOME or a folder the operator lists in
    $SEEDBED_DATA_ROOTS, symlinks and '..' resolved; a path outside is refused without looking at what is
    there (no "no such file" that would tell what exists)."""
    import os

    from training.fields import FieldErrors
    from webapp.runs.models import Run
    from webapp.runs.services import parse_config

    settings.SEEDBED_DATA_ROOTS = [str(tmp_path / "allowed")]
    (tmp_path / "allowed").mkdir()
    os.symlink(model_dir, tmp_path / "allowed" / "link")  # points outside
    cases = {"model_path": [model_dir, str(tmp_path / "allowed" / "link"), str(tmp_path / "allowed" / ".." / "model"),
                            "/etc", "/nonexistent"],
             "data_path": ["/etc/passwd", "/etc/shadow.jsonl", str(tmp_path / "allowed" / ".." / "d.jsonl")]}
    for field, paths in cases.items():
        for path in paths:
            data = {"task": "file", "data_path": str(tmp_path / "allowed" / "d.jsonl"), field: path}
            with pytest.raises(FieldErrors) as info:
                parse_config(data)
            assert info.value.errors[field].startswith("must lie inside the allowed folders"), (path, info.value)
    (tmp_path / "allowed" / "d.jsonl").write_text('{"prompt": "1+1=", "answer": "2"}\n')
    os.makedirs(tmp_path / "allowed" / "m")
    (tmp_path / "allowed" / "m" / "config.json").write_text("{}")
    assert parse_config({"task": "file", "data_path": str(tmp_path / "allowed" / "d.jsonl"),
                         "model_path": str(tmp_path / "allowed" / "m")}).model_path.endswith("/m")
    # through the API and the eval service the same
    response = client_in.post("/runs/new/", {"rendered_preset": "grpo", "preset": "grpo", "model_path": "/etc"})
    assert response.status_code == 400 and "must lie inside the allowed folders" in response.content.decode()
    assert not Run.objects.exists()
