"""The token API (/api/v1/): launch, read, kill and resume runs, sweeps and evaluations through the same services
as the forms, with the same checks; a user outside a project gets 404, a viewer 403, a second action 409."""
from __future__ import annotations

import math

import pytest
from django.core.management import call_command

from webapp.projects.models import AuditEvent
from webapp.runs import services as run_services
from webapp.runs.models import Run, RunStatus
from webapp.sweeps.models import Sweep

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def launch(api, config, **fields):
    response = api.post("/runs", {"name": "r", "config": config, **fields})
    assert response.status_code == 201, response.content
    return response.json()


def test_without_a_valid_token_every_endpoint_answers_401(anonymous, alice, config):
    run = launch(alice, config)
    for path in ("/me", "/runs", f"/runs/{run['id']}", f"/runs/{run['id']}/metrics", "/sweeps", "/projects"):
        assert anonymous.get(path).status_code == 401, path
    assert anonymous.post("/runs", {"config": config}).status_code == 401
    anonymous.token = "sb_not-a-token"
    assert anonymous.get("/runs").status_code == 401
    anonymous.token = alice.token[:-1] + ("A" if alice.token[-1] != "A" else "B")
    assert anonymous.get("/runs").status_code == 401
    assert Run.objects.count() == 1


def test_manage_py_api_token_prints_a_token_that_works_until_revoked(client, django_user_model, capsys):
    from webapp.api.models import ApiToken
    from webapp.api.services import token_revoke

    django_user_model.objects.create_user(username="carol", password="x")
    call_command("api_token", "carol", "--name", "cli")
    token = capsys.readouterr().out.strip()
    assert token.startswith("sb_") and len(token) > 40
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    me = client.get("/api/v1/me", **headers)
    assert me.status_code == 200 and me.json()["username"] == "carol"
    assert [p["name"] for p in me.json()["projects"]] == ["carol"]  # the personal project, made with the user
    row = ApiToken.objects.get(user__username="carol")
    assert row.digest != token and token not in row.digest and row.last_used_at is not None
    token_revoke(user=row.user, token_id=row.pk)
    assert client.get("/api/v1/me", **headers).status_code == 401


def test_launch_read_and_list_runs(alice, config):
    created = launch(alice, config, project="vision")
    assert created["status"] == "queued" and created["project"] == "vision"
    run = alice.get(f"/runs/{created['id']}").json()
    assert run["config"]["total_steps"] == 6 and run["project"] == "vision" and run["created_by"] == "alice"
    launch(alice, config)  # no project: the personal one
    assert Run.objects.get(pk=launch(alice, config)["id"]).project.name == "alice"
    listed = alice.get("/runs", project="vision").json()["runs"]
    assert [r["id"] for r in listed] == [created["id"]]
    assert len(alice.get("/runs", status="queued").json()["runs"]) == 3
    assert alice.get("/runs", status="nope").json() == {"errors": {"status": "one of queued, running, succeeded, "
                                                                              "failed, killed, lost; got 'nope'"}}
    audit = AuditEvent.objects.get(action="run.launch", target_id=created["id"])
    assert audit.actor_name == "alice" and audit.project.name == "vision"


@pytest.mark.parametrize("config_change, field, message", [
    ({"lr": -1}, "lr", "must be in (0, 1]"),
    ({"lr": "NaN"}, "lr", "finite"),
    ({"group_size": 10**9}, "group_size", "must be in [2, 1024]"),
    ({"total_steps": 2**70}, "total_steps", "must be in"),
    ({"preset": "nope"}, "preset", "unknown preset"),
    ({"model_path": "/etc"}, "model_path", ""),
    ({"rewards": [{"name": "subprocess:Popen", "params": {"args": "id", "shell": True}}]}, "rewards", ""),
    ({"bogus_knob": 1}, "bogus_knob", ""),
])
def test_a_bad_config_is_a_400_naming_the_field_and_creates_nothing(alice, config, config_change, field, message):
    response = alice.post("/runs", {"config": {**config, **config_change}})
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert field in errors and message in errors[field], errors
    assert not Run.objects.exists() and not AuditEvent.objects.filter(action="run.launch").exists()


def test_another_users_objects_are_404_and_untouched(alice, bob, config):
    run_id = launch(alice, config, project="vision")["id"]
    sweep = alice.post("/sweeps", {"config": config, "seeds": 2, "concurrency": 1, "project": "vision"}).json()
    for path in (f"/runs/{run_id}", f"/runs/{run_id}/metrics", f"/sweeps/{sweep['id']}",
                 "/projects/vision/members"):
        assert bob.get(path).status_code == 404, path
    assert bob.post(f"/runs/{run_id}/kill").status_code == 404
    assert bob.post(f"/runs/{run_id}/resume").status_code == 404
    assert bob.get("/runs").json()["runs"] == [] and bob.get("/sweeps").json()["sweeps"] == []
    # launching into alice's project, or from her checkpoint, or evaluating her run: a field error
    response = bob.post("/runs", {"config": config, "project": "vision"})
    assert response.status_code == 400 and "project" in response.json()["errors"]
    ckpt = run_services.run_checkpoint_add(run_id=run_id, step=2, path=config["model_path"])
    response = bob.post("/runs", {"config": config, "from_checkpoint": ckpt.pk})
    assert response.status_code == 400 and "from_checkpoint" in response.json()["errors"]
    response = bob.post("/evals", {"run": run_id, "models": ["base"], "problems": 4, "n": 2})
    assert response.status_code == 400 and "run" in response.json()["errors"]
    assert bob.post("/projects/vision/members", {"username": "bob", "role": "admin"}).status_code == 404
    assert Run.objects.get(pk=run_id).status == RunStatus.QUEUED and Run.objects.count() == 3


def test_roles_viewer_reads_member_acts_admin_manages(alice, bob, config):
    run_id = launch(alice, config, project="vision")["id"]
    assert alice.post("/projects/vision/members", {"username": "bob", "role": "viewer"}).status_code == 201
    assert bob.get(f"/runs/{run_id}").status_code == 200
    assert bob.post(f"/runs/{run_id}/kill").status_code == 403
    assert bob.post("/runs", {"config": config, "project": "vision"}).status_code == 403
    assert bob.post("/projects/vision/members", {"username": "bob", "role": "admin"}).status_code == 403
    assert Run.objects.get(pk=run_id).kill_requested_at is None and Run.objects.count() == 1

    assert alice.post("/projects/vision/members", {"username": "bob", "role": "member"}).status_code == 201
    assert bob.post(f"/runs/{run_id}/resume").status_code == 409  # a queued run is not resumable
    killed = bob.post(f"/runs/{run_id}/kill", {"reason": "bad seed"})
    assert killed.status_code == 200 and killed.json()["status"] == "killed"
    second = bob.post(f"/runs/{run_id}/kill")
    assert second.status_code == 409 and "only a queued or running run" in second.json()["detail"]
    event = AuditEvent.objects.get(action="run.kill", target_id=run_id)
    assert (event.actor_name, event.detail) == ("bob", {"reason": "bad seed", "at_step": 0})
    assert bob.post(f"/runs/{run_id}/resume").json()["status"] == "queued"
    assert AuditEvent.objects.filter(action="run.resume", actor_name="bob").count() == 1
    members = alice.get("/projects/vision/members").json()["members"]
    assert {m["username"]: m["role"] for m in members} == {"alice": "admin", "bob": "member"}


def test_a_resume_of_a_running_run_is_409_and_changes_nothing(alice, config):
    run_id = launch(alice, config)["id"]
    Run.objects.filter(pk=run_id).update(status=RunStatus.RUNNING)
    assert alice.post(f"/runs/{run_id}/kill").status_code == 200  # a kill request: the loop stops on its own
    response = alice.post(f"/runs/{run_id}/resume")
    assert response.status_code == 409
    run = Run.objects.get(pk=run_id)
    assert run.status == RunStatus.RUNNING and run.kill_requested_at is not None


def test_projects_are_made_and_named_once(alice, bob):
    assert bob.post("/projects", {"name": "nlp"}).json() == {"name": "nlp", "role": "admin"}
    assert bob.post("/projects", {"name": "nlp"}).json() == {"errors": {"name": "you have a project named 'nlp' already"}}
    assert "name" in bob.post("/projects", {"name": "../etc"}).json()["errors"]
    assert "name" in bob.post("/projects", {"name": "x" * 151}).json()["errors"]
    assert [p["name"] for p in bob.get("/projects").json()["projects"]] == ["bob", "nlp"]
    response = bob.post("/projects/nlp/members", {"username": "nobody", "role": "member"})
    assert response.json() == {"errors": {"username": "no active user 'nobody'"}}
    response = bob.post("/projects/nlp/members", {"username": "alice", "role": "owner"})
    assert "role" in response.json()["errors"]
    response = bob.post("/projects/nlp/members", {"username": "bob", "role": "viewer"})
    assert "last admin" in response.json()["errors"]["role"]


def test_metrics_come_bucketed_when_long_and_keep_spikes(alice, config):
    run_id = launch(alice, config)["id"]
    points = [(step, "reward/mean", 0.5) for step in range(1, 1001)]
    points[500] = (501, "reward/mean", 9.0)  # a spike
    points += [(step, "kl", float("nan") if step == 3 else 0.1) for step in range(1, 11)]
    run_services.run_metrics_append(run_id=run_id, points=points)
    full = alice.get(f"/runs/{run_id}/metrics", keys="kl").json()
    assert full["width"] == 1 and full["series"]["kl"]["step"] == list(range(1, 11))
    assert full["series"]["kl"]["value"][2] is None  # NaN is stored as a gap
    bucketed = alice.get(f"/runs/{run_id}/metrics", keys="reward/mean", max_points=100).json()
    series = bucketed["series"]["reward/mean"]
    # 1,000 steps in at most 100 buckets: width 10, rounded up to one the metric tier tiles (2 x 8)
    assert bucketed["width"] == 16 and len(series["step"]) == 63 and series["step"][-1] == 1000
    assert max(series["max"]) == 9.0 and min(series["min"]) == 0.5
    assert math.isclose(series["value"][31], (15 * 0.5 + 9.0) / 16)  # steps 497..512
    after = alice.get(f"/runs/{run_id}/metrics", keys="reward/mean", since_step=990).json()
    assert after["series"]["reward/mean"]["step"] == list(range(991, 1001))
    assert "since_step" in alice.get(f"/runs/{run_id}/metrics", since_step=-1).json()["errors"]


def test_sweeps_through_the_api(alice, config):
    response = alice.post("/sweeps", {"name": "lr", "config": config, "seeds": [3, 5], "concurrency": 1,
                                      "grid": {"lr": [1e-4, 2e-4]}, "policy": {"name": "median", "min_peers": 2}})
    assert response.status_code == 201, response.content
    body = response.json()
    assert len(body["runs"]) == 4 and body["project"] == "alice"
    sweep = alice.get(f"/sweeps/{body['id']}").json()
    assert sorted(r["seed"] for r in sweep["runs"]) == [3, 3, 5, 5] and sweep["decisions"] == []
    assert sweep["policy"]["name"] == "median"
    bad = alice.post("/sweeps", {"config": config, "seeds": [1, 1], "grid": {"nope": [1]},
                                 "policy": {"name": "median", "grace": 3}})
    assert bad.status_code == 400 and "seeds" in bad.json()["errors"]
    assert alice.post("/sweeps", {"config": config, "seeds": 10**6}).status_code == 400
    assert alice.post("/sweeps", {"config": config, "grid": {"lr": [1e-4] * 1000, "eps_high": [0.2] * 1000}}
                      ).status_code == 400
    assert Sweep.objects.count() == 1


def test_the_policies_endpoint_lists_the_rules_of_the_one_registry(alice):
    from webapp.sweeps.policies import RULES

    rules = alice.get("/sweeps/policies").json()["policies"]
    assert [r["name"] for r in rules] == [*RULES, "(every rule)"]
    bayes = {p["name"]: p for p in next(r for r in rules if r["name"] == "bayes")["params"]}
    assert (bayes["risk"]["default"], bayes["risk"]["bounds"]) == (0.05, {"gt": 0.0, "max": 0.5})
    assert "waiting for peers" in next(r for r in rules if r["name"] == "median")["waiting"]


def test_evals_through_the_api(alice, config):
    run_id = launch(alice, config)["id"]
    response = alice.post("/evals", {"run": run_id, "models": ["base"], "problems": 8, "n": 4, "k": [1, 2]})
    assert response.status_code == 201, response.content
    job = alice.get(f"/evals/{response.json()['id']}").json()
    assert job["status"] == "queued" and job["job"]["n"] == 4 and job["total"] == 8
    assert "unbiased pass@k" in job["estimator"]
    listed = alice.get("/evals").json()["evals"]
    assert [(j["id"], j["status"], j["run"], j["total"]) for j in listed] == [(job["id"], "queued", run_id, 8)]
    assert alice.get("/evals", project="vision").json()["evals"] == []
    bad = alice.post("/evals", {"run": run_id, "models": ["ckpt:999"], "problems": 8, "n": 4, "k": [8],
                                "temperature": float("inf")})
    assert bad.status_code == 400
    assert {"models", "k", "temperature"} <= set(bad.json()["errors"]), bad.json()


def test_the_openapi_schema_lists_the_endpoints(alice):
    response = alice.get("/schema")
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in ("/api/v1/runs", "/api/v1/runs/{run_id}/kill", "/api/v1/runs/{run_id}/metrics", "/api/v1/sweeps",
                 "/api/v1/evals", "/api/v1/projects/{name}/members", "/api/v1/datasets",
                 "/api/v1/datasets/{dataset_id}/mapping"):
        assert path in paths, sorted(paths)


@pytest.mark.parametrize("rewards", [
    [{"name": "subprocess:Popen", "params": {"args": "touch MARKER", "shell": True}}],
    [{"name": "builtins:eval"}],
    [{"name": "code", "params": {"user": "root"}}],
    [{"name": "code", "params": {"use_bwrap": "never"}}],
    [{"name": "judge", "params": {"endpoint": "x", "base_url": "file:///etc/shadow#"}}],
    [{"name": "judge", "params": {"endpoint": "x", "api_key_env": "DJANGO_SECRET_KEY"}}],
])
def test_the_exploits_of_the_issue_are_field_errors_and_run_nothing(alice, config, tmp_path, rewards):
    """Code by dotted path, the code sandbox without its user or without bubblewrap, a judge reading a file or
    sending a secret: each is a 400 on `rewards` for the run, the sweep and the evaluation; nothing is created
    and no command runs (a marker file proves it)."""
    marker = tmp_path / "ran"
    rewards = [{**r, "params": {k: (v.replace("MARKER", str(marker)) if isinstance(v, str) else v)
                                for k, v in r.get("params", {}).items()}} for r in rewards]
    run = alice.post("/runs", {"config": {**config, "rewards": rewards}})
    sweep = alice.post("/sweeps", {"config": {**config, "rewards": rewards}, "seeds": 2})
    assert run.status_code == sweep.status_code == 400 and "rewards" in run.json()["errors"]
    base = launch(alice, config)["id"]
    job = alice.post("/evals", {"run": base, "problems": 4, "n": 2, "rewards": rewards})
    assert job.status_code == 400 and "rewards" in job.json()["errors"]
    assert Run.objects.count() == 1 and not Sweep.objects.exists() and not marker.exists()


def test_a_run_is_renamed_tagged_and_archived_through_the_api(alice, bob, config):
    run_id = launch(alice, config)["id"]
    got = alice.patch(f"/runs/{run_id}", {"name": "baseline", "tags": ["baseline", "v2"], "notes": "ref"})
    assert got.status_code == 200, got.content
    assert (got.json()["name"], got.json()["tags"], got.json()["notes"]) == ("baseline", ["baseline", "v2"], "ref")
    assert alice.patch(f"/runs/{run_id}", {"tags": ["bad tag"]}).status_code == 400
    assert alice.patch(f"/runs/{run_id}", {"archived": True}).status_code == 409  # still queued
    Run.objects.filter(pk=run_id).update(status=RunStatus.SUCCEEDED)
    assert alice.patch(f"/runs/{run_id}", {"archived": True}).json()["archived_at"] is not None
    assert bob.patch(f"/runs/{run_id}", {"name": "mine"}).status_code == 404  # not bob's project
