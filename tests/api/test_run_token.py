"""A token scoped to one run (a training or logging process's): it appends that run's metrics and samples and reads
that run (status, stop flag); every other endpoint, and any other run, is a 403 naming the scope, nothing changed.
It is made through token_create(scope="run", run=...) by someone who may write the run (a member of its project),
by manage.py api_token --run, and on the tokens page, which shows its run; the database refuses a run token without
a run and another token with one."""
from __future__ import annotations

import io

import pytest
from django.core.exceptions import PermissionDenied
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction
from django.http import Http404

from tests.api.conftest import Api
from tests.conftest import logged_in
from training.fields import FieldErrors
from webapp.api.models import ApiToken
from webapp.api.services import token_create
from webapp.projects.models import Project
from webapp.projects.services import member_set
from webapp.runs.models import MetricPoint, Run, Sample

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def _two_runs(api, config) -> tuple[Run, Run]:
    ids = [api.post("/runs", {"name": name, "config": config, "project": "vision"}).json()["id"]
           for name in ("logged", "other")]
    return Run.objects.get(pk=ids[0]), Run.objects.get(pk=ids[1])


def test_a_run_token_logs_to_its_run_and_reads_it_and_nothing_else(client, alice, config):
    run, other = _two_runs(alice, config)
    user = ApiToken.objects.get().user
    row, token = token_create(user=user, name="trainer", scope="run", run=run)
    assert (row.scope, row.run_id) == ("run", run.pk)
    logger = Api(client, token)
    points = [{"step": 1, "key": "reward_mean", "value": 0.5}, {"step": 2, "key": "reward_mean", "value": 0.75}]
    assert logger.post(f"/runs/{run.pk}/metrics", {"points": points}).json() == {"id": run.pk, "stored": 2}
    sample = {"prompt": "2+2?", "completion": "\\boxed{4}", "answer": "4", "reward": 1.0}
    assert logger.post(f"/runs/{run.pk}/samples", {"step": 2, "samples": [sample]}).status_code == 200
    detail = logger.get(f"/runs/{run.pk}").json()
    assert detail["status"] == "queued" and detail["kill_requested"] is False, detail
    assert list(MetricPoint.objects.filter(run=run).order_by("step").values_list("step", "value")) == \
        [(1, 0.5), (2, 0.75)]
    assert Sample.objects.get(run=run).completion == "\\boxed{4}"
    refused = [logger.get("/runs"), logger.get("/me"), logger.get("/projects"), logger.get(f"/runs/{run.pk}/metrics"),
               logger.post(f"/runs/{run.pk}/kill", {"reason": "run token"}), logger.patch(f"/runs/{run.pk}", {"name": "x"}),
               logger.post("/runs", {"name": "x", "config": config}), logger.get(f"/runs/{other.pk}"),
               logger.post(f"/runs/{other.pk}/metrics", {"points": points}),
               logger.post(f"/runs/{other.pk}/samples", {"step": 1, "samples": [sample]})]
    for response in refused:
        assert response.status_code == 403, (response.request["PATH_INFO"], response.content)
        assert f"scope is run {run.pk}" in response.json()["detail"], response.json()
    assert not MetricPoint.objects.filter(run=other).exists() and not Sample.objects.filter(run=other).exists()
    run.refresh_from_db()
    assert run.kill_requested_at is None and run.name == "logged" and Run.objects.count() == 2


def test_appends_are_bounded_field_errors_and_an_ended_run_takes_none(client, alice, config):
    run, _ = _two_runs(alice, config)
    _, token = token_create(user=ApiToken.objects.get().user, scope="run", run=run.pk)
    logger = Api(client, token)
    bad = {"points": [{"step": 2**31, "key": "k", "value": 1}]}
    assert logger.post(f"/runs/{run.pk}/metrics", bad).json()["errors"] == {
        "points.0.step": f"a whole number from 0 to {2**31 - 1}; got '2147483648'"}
    assert "points.0.key" in logger.post(f"/runs/{run.pk}/metrics",
                                         {"points": [{"step": 1, "key": "a\x1b]0;t\x07", "value": 1}]}).json()["errors"]
    assert "points" in logger.post(f"/runs/{run.pk}/metrics",
                                   {"points": [{"step": 1, "key": "k", "value": 1}] * 1001}).json()["errors"]
    assert "samples.0.completion" in logger.post(f"/runs/{run.pk}/samples", {
        "step": 1, "samples": [{"completion": "x" * 100_001}]}).json()["errors"]
    assert not MetricPoint.objects.exists() and not Sample.objects.exists()
    alice.post(f"/runs/{run.pk}/kill", {"reason": "done"})  # queued: killed at once
    response = logger.post(f"/runs/{run.pk}/metrics", {"points": [{"step": 1, "key": "k", "value": 1}]})
    assert response.status_code == 409 and "has ended (killed)" in response.json()["detail"], response.content


def test_only_one_who_may_write_the_run_makes_its_token_and_the_database_holds_the_pairing(
        client, alice, config, django_user_model):
    run, _ = _two_runs(alice, config)
    viewer = django_user_model.objects.create_user(username="vic", password="pw-for-tests-only")
    stranger = django_user_model.objects.create_user(username="sam", password="pw-for-tests-only")
    owner = ApiToken.objects.get().user
    member_set(user=owner, project=Project.objects.get(name="vision"), username="vic", role="viewer")
    with pytest.raises(PermissionDenied):
        token_create(user=viewer, scope="run", run=run)
    with pytest.raises(Http404):
        token_create(user=stranger, scope="run", run=run.pk)
    with pytest.raises(FieldErrors) as no_run:
        token_create(user=owner, scope="run")
    assert "run" in no_run.value.errors
    with pytest.raises(FieldErrors) as run_on_read:
        token_create(user=owner, scope="read", run=run)
    assert "only a token of scope run" in run_on_read.value.errors["run"]
    assert not ApiToken.objects.filter(scope="run").exists()
    for scope, bound in (("run", None), ("read-write", run)):
        with pytest.raises(IntegrityError), transaction.atomic():
            ApiToken.objects.create(user=owner, prefix="sb_x", digest=f"{scope}-digest", scope=scope, run=bound)


def test_manage_py_and_the_tokens_page_make_and_show_a_run_token(client, alice, config):
    run, _ = _two_runs(alice, config)
    owner = ApiToken.objects.get().user
    out = io.StringIO()
    call_command("api_token", owner.username, "--run", str(run.pk), stdout=out)
    made = ApiToken.objects.get(scope="run")
    assert made.run_id == run.pk and out.getvalue().strip().startswith("sb_")
    assert Api(client, out.getvalue().strip()).get(f"/runs/{run.pk}").status_code == 200
    with pytest.raises(CommandError, match="may not log to run"):
        call_command("api_token", "alice", "--run", "999999", stdout=io.StringIO())
    page = logged_in(owner)
    response = page.post("/account/tokens/", {"name": "trainer", "scope": "run", "run": str(run.pk),
                                              "expires_days": "7"})
    assert response.status_code == 200 and ApiToken.objects.filter(scope="run").count() == 2
    html = page.get("/account/tokens/").content.decode()
    assert html.count(f'class="token-run">#{run.pk} logged</a>') == 2, html
    assert page.post("/account/tokens/", {"scope": "run", "run": "999999", "expires_days": "7"}).status_code == 400
