"""Production-facing settings: a content security policy with per-page nonces, login throttling, hosts that
fail closed."""
from __future__ import annotations

import os
import re

import pytest
from training.fields import FieldErrors
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
                         "answer_instruction": "Put your final answer within \\boxed{}.",
                         "model_path": str(tmp_path / "allowed" / "m")}).model_path.endswith("/m")
    # through the API and the eval service the same
    response = client_in.post("/runs/new/", {"rendered_preset": "grpo", "preset": "grpo", "model_path": "/etc"})
    assert response.status_code == 400 and "must lie inside the allowed folders" in response.content.decode()
    assert not Run.objects.exists()


def test_another_projects_checkpoints_and_library_models_are_not_found(django_user_model, settings, tmp_path,
                                                                       model_dir):
    """The new-user trial's exploit: a raw model_path into another project's run folder (its checkpoints) or
    library folder was accepted because it lies inside $SEEDBED_HOME. Now a run's folder may be named only by
    who may read the run, a library folder only by its project's members; the rest of $SEEDBED_HOME (database,
    secret key, logs) is outside the allowed folders."""
    import json as json_module
    import shutil

    from tests.api.conftest import Api
    from tests.conftest import logged_in
    from webapp.api.services import token_create
    from webapp.library.models import ModelEntry
    from webapp.library.services import model_register
    from webapp.projects.services import project_create
    from webapp.runs.models import Run
    from webapp.runs.services import run_create

    settings.SEEDBED_RUNS_DIR = tmp_path / "home" / "runs"
    settings.SEEDBED_LIBRARY_DIR = tmp_path / "home" / "library"
    settings.SEEDBED_DATA_ROOTS = [str(settings.SEEDBED_RUNS_DIR), str(settings.SEEDBED_LIBRARY_DIR),
                                   str(tmp_path / "home" / "models")]
    base = tmp_path / "home" / "models" / "base"
    shutil.copytree(model_dir, base)
    alice = django_user_model.objects.create_user(username="alice", password="x")
    carol = django_user_model.objects.create_user(username="carol", password="x")
    vision = project_create(user=alice, name="vision")
    run = run_create(config={"model_path": str(base)}, user=alice, project=vision)
    checkpoint = settings.SEEDBED_RUNS_DIR / str(run.uid) / "checkpoints" / "step_000002"
    library = settings.SEEDBED_LIBRARY_DIR / "vision" / "model"
    data = settings.SEEDBED_RUNS_DIR / str(run.uid) / "train.jsonl"
    for folder in (checkpoint, library):
        shutil.copytree(model_dir, folder)
    data.write_text(json_module.dumps({"prompt": "1+1=", "answer": "2"}) + "\n")
    (tmp_path / "home" / "x.jsonl").write_text(data.read_text())  # directly in $SEEDBED_HOME: never allowed

    api = Api(logged_in(carol), token_create(user=carol)[1])
    for config, field in (({"model_path": str(checkpoint)}, "model_path"), ({"model_path": str(library)}, "model_path"),
                          ({"task": "file", "data_path": str(data)}, "data_path")):
        response = api.post("/runs", {"config": config})
        assert response.status_code == 400 and response.json()["errors"][field].startswith("not found in your projects")
        response = api.post("/sweeps", {"config": config, "seeds": 2})
        assert response.status_code == 400 and field in response.json()["errors"]
    response = api.post("/runs", {"config": {"task": "file", "data_path": str(tmp_path / "home" / "x.jsonl")}})
    assert response.json()["errors"]["data_path"].startswith("must lie inside the allowed folders")
    for path in (checkpoint, library):
        with pytest.raises(FieldErrors, match="not found in your projects"):
            model_register(user=carol, name="stolen", path=str(path))
    assert not ModelEntry.objects.exists() and Run.objects.count() == 1
    # its own members (and staff) may
    assert run_create(config={"model_path": str(checkpoint)}, user=alice, project=vision).pk
    assert run_create(config={"model_path": str(library)}, user=alice, project=vision).pk
    assert model_register(user=alice, name="from-checkpoint", path=str(checkpoint)).pk
