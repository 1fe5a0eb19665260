"""Staff may open a judge endpoint to some projects only (none named: every project). A run config that names
one in a project it is not open to is a field error on ``rewards`` naming the endpoint and the project, from the
run form, the sweep form and the API's launch, and again when a worker starts the run (staff may have limited
it since the launch): the run fails before any work."""
from __future__ import annotations

import html
import json

import pytest
from django.db import transaction
from django.urls import reverse

from tests.api.conftest import Api, _user_with_token
from tests.conftest import tiny_config, wait_for
from tests.runs.test_views import field_errors, form_post
from tests.sweeps.test_views import form_data as sweep_form
from webapp.library.models import JudgeEndpoint
from webapp.projects.models import Project
from webapp.projects.services import default_project, project_create

SPEC = [{"name": "judge", "params": {"endpoint": "grader"}}]
REFUSED = "judge endpoint 'grader' is not open to project 'vision'"


@pytest.fixture
def vision(user):
    return project_create(user=user, name="vision")


@pytest.fixture
def grader(django_user_model):
    """An endpoint limited to the project "lab" (ada is no member of it)."""
    owner = django_user_model.objects.create_user(username="lab-admin", password="pw-for-tests-only")
    endpoint = JudgeEndpoint.objects.create(name="grader", base_url="http://127.0.0.1:9/v1")
    endpoint.projects.set([project_create(user=owner, name="lab")])
    return endpoint


@pytest.mark.django_db
@pytest.mark.postgres  # (an OR over a many-to-many join, distinct: the engine's SQL)
def test_the_run_form_refuses_an_endpoint_not_open_to_the_project_and_takes_it_once_open(
        client_in, model_dir, vision, grader):
    from webapp.runs.models import Run

    data = form_post(model_path=model_dir, rewards=json.dumps(SPEC), project="vision")
    response = client_in.post(reverse("runs:new"), data)
    assert response.status_code == 400 and REFUSED in html.unescape(field_errors(response)["rewards"])
    assert "lab" not in field_errors(response)["rewards"]  # another project's name is not ada's to see
    assert not Run.objects.exists()
    grader.projects.add(vision)
    assert client_in.post(reverse("runs:new"), data).status_code == 302
    assert Run.objects.get().project == vision


@pytest.mark.django_db
@pytest.mark.postgres  # (an OR over a many-to-many join, distinct: the engine's SQL)
def test_an_endpoint_limited_to_no_project_is_open_to_every_project(client_in, model_dir, vision, grader):
    grader.projects.clear()
    data = form_post(model_path=model_dir, rewards=json.dumps(SPEC), project="vision")
    assert client_in.post(reverse("runs:new"), data).status_code == 302


@pytest.mark.django_db
@pytest.mark.postgres  # (an OR over a many-to-many join, distinct: the engine's SQL)
def test_the_sweep_form_refuses_it(client_in, model_dir, vision, grader):
    from webapp.sweeps.models import Sweep

    response = client_in.post(reverse("sweeps:new"), sweep_form(model_dir, rewards=json.dumps(SPEC), project="vision"))
    assert response.status_code == 400 and REFUSED in html.unescape(field_errors(response)["rewards"])
    assert not Sweep.objects.exists()


@pytest.mark.django_db
@pytest.mark.postgres  # (an OR over a many-to-many join, distinct: the engine's SQL)
def test_the_api_launch_refuses_it_with_a_field_error(django_user_model, model_dir, grader):
    from django.test import Client

    from webapp.runs.models import Run

    user, token = _user_with_token(django_user_model, "alice")
    project_create(user=user, name="vision")
    api = Api(Client(), token)
    config = {"preset": "grpo", "model_path": model_dir, "total_steps": 6, "prompts_per_step": 4, "group_size": 4,
              "rewards": SPEC}
    for path, body in (("/runs", {"config": config, "project": "vision"}),
                       ("/sweeps", {"config": config, "project": "vision", "seeds": [1, 2], "concurrency": 1})):
        response = api.post(path, body)
        assert response.status_code == 400 and REFUSED in response.json()["errors"]["rewards"], (path, response.json())
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
def test_a_worker_fails_a_run_whose_endpoint_was_limited_since_its_launch(celery_worker):
    from webapp.runs import services
    from webapp.runs.models import Run, RunStatus

    grader = JudgeEndpoint.objects.create(name="grader", base_url="http://127.0.0.1:9/v1")  # open to every project
    with transaction.atomic():  # (sent when this commits: the worker sees the endpoint limited already)
        run = services.run_create(config=tiny_config(total_steps=2, rewards=SPEC))
        grader.projects.set([Project.objects.create(name="lab")])
    wait_for(lambda: Run.objects.get(pk=run.pk).status in (RunStatus.FAILED, RunStatus.SUCCEEDED), timeout=240,
             what="the worker to end the run")
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.FAILED and run.last_step == 0, (run.status, run.error)
    assert f"judge endpoint 'grader' is not open to project '{default_project().name}'" in run.error


@pytest.mark.django_db
@pytest.mark.postgres  # (an OR over a many-to-many join, distinct: the engine's SQL)
def test_the_training_process_of_a_run_sees_only_the_endpoints_open_to_its_project(grader):
    from training.verifiers.judge import judge_endpoint, set_endpoint_provider
    from webapp.library.selectors import judge_endpoints
    from webapp.runs.models import Run
    from workers.runner import limit_judges_to

    JudgeEndpoint.objects.create(name="open", base_url="http://127.0.0.1:9/v1")
    run = Run.objects.create(project=default_project(), config=tiny_config(), seed=0)
    try:
        limit_judges_to(run)
        assert judge_endpoint("open") is not None and judge_endpoint("grader") is None
        run.config = tiny_config(rewards=SPEC)
        with pytest.raises(ValueError, match=f"judge endpoint 'grader' is not open to project '{run.project.name}'"):
            limit_judges_to(run)
    finally:
        set_endpoint_provider(judge_endpoints)  # as the library app installs it
    assert judge_endpoint("grader") is not None
