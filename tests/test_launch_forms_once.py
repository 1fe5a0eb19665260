"""The launch forms (run, sweep, evaluation) carry a one-time token set when the form is rendered: a second
submit of the same form (a double click, a POST resent after a crash) launches nothing and opens what the first
launched; a new form (a new token) launches again; the token with other values launches anew."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.evals.conftest import run_with_checkpoints  # noqa: F401  (a fixture)
from tests.evals.test_views import form_data as eval_form_data
from tests.sweeps.test_views import form_data as sweep_form_data
from webapp.projects.models import IdempotencyKey
from webapp.evals.models import EvalJob
from webapp.runs.models import Run
from webapp.sweeps.models import Sweep

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

SWEEP_ONLY = ("seeds", "concurrency", "grid", "policy_name", "policy_metric", "policy_mode", "policy_params",
              "free_slot_use", "extend_steps", "budget", "alert_bounds")


def token_of(client, url: str) -> str:
    page = client.get(url)
    assert page.status_code == 200
    found = re.search(r'name="launch_token" value="([0-9a-f]{32})"', page.content.decode())
    assert found, "the form carries no launch token"
    return found.group(1)


def run_form_data(model_dir, **overrides):
    data = {k: v for k, v in sweep_form_data(model_dir).items() if k not in SWEEP_ONLY}
    return {**data, "name": "form run", **overrides}


def test_a_run_form_submitted_twice_launches_one_run_and_both_open_it(client_in, model_dir):
    token = token_of(client_in, reverse("runs:new"))
    first = client_in.post(reverse("runs:new"), run_form_data(model_dir, launch_token=token))
    assert first.status_code == 302, first.content.decode()[:2000]
    again = client_in.post(reverse("runs:new"), run_form_data(model_dir, launch_token=token), follow=True)
    run = Run.objects.get()
    assert first.url == reverse("runs:detail", args=[run.pk]) == again.redirect_chain[0][0]
    assert "already submitted" in again.content.decode()
    # a new form is a new launch; the token with other values too (the form edited after going back)
    assert client_in.post(reverse("runs:new"), run_form_data(model_dir, launch_token=token_of(
        client_in, reverse("runs:new")))).status_code == 302
    assert client_in.post(reverse("runs:new"), run_form_data(model_dir, launch_token=token,
                                                             name="edited")).status_code == 302
    assert Run.objects.count() == 3


def test_a_form_with_errors_keeps_its_token_so_its_corrected_submit_is_once(client_in, model_dir):
    token = token_of(client_in, reverse("runs:new"))
    bad = client_in.post(reverse("runs:new"), run_form_data(model_dir, launch_token=token, total_steps="-1"))
    assert bad.status_code == 400 and f'value="{token}"' in bad.content.decode()
    for _ in range(2):
        assert client_in.post(reverse("runs:new"), run_form_data(model_dir, launch_token=token)).status_code == 302
    assert Run.objects.count() == 1


def test_a_sweep_form_submitted_twice_launches_one_sweep(client_in, model_dir):
    token = token_of(client_in, reverse("sweeps:new"))
    first = client_in.post(reverse("sweeps:new"), sweep_form_data(model_dir, launch_token=token))
    again = client_in.post(reverse("sweeps:new"), sweep_form_data(model_dir, launch_token=token))
    assert first.status_code == again.status_code == 302 and first.url == again.url
    assert Sweep.objects.count() == 1 and Run.objects.count() == 3


def test_an_eval_form_submitted_twice_launches_one_evaluation(client_in, run_with_checkpoints):
    url = reverse("evals:new") + f"?run={run_with_checkpoints.pk}"
    token = token_of(client_in, url)
    first = client_in.post(url, eval_form_data(run_with_checkpoints, launch_token=token))
    again = client_in.post(url, eval_form_data(run_with_checkpoints, launch_token=token))
    assert first.status_code == again.status_code == 302 and first.url == again.url
    assert EvalJob.objects.count() == 1


def test_one_users_token_is_never_another_users_answer(client_in, model_dir, django_user_model):
    from django.test import Client

    from tests.conftest import join_default_project

    token = token_of(client_in, reverse("runs:new"))
    assert client_in.post(reverse("runs:new"), run_form_data(model_dir, launch_token=token)).status_code == 302
    eve = django_user_model.objects.create_user(username="eve", password="pw-for-tests-only")
    join_default_project(eve)
    other = Client()
    other.force_login(eve)
    response = other.post(reverse("runs:new"), run_form_data(model_dir, launch_token=token))
    assert response.status_code == 302 and Run.objects.count() == 2
    assert response.url != reverse("runs:detail", args=[Run.objects.order_by("pk").first().pk])
    assert IdempotencyKey.objects.count() == 2
