""""This policy can never stop a run" on the sweep form, before launch (webapp/sweeps/launch_check.py), through
Django's test client: the warning fragment for the form's fields as they stand, and the form opened as a copy of
a sweep whose policy cannot act. Before, it was said only on the launched sweep's page, after its first check."""
from __future__ import annotations

import pytest
from django.urls import reverse

from webapp.sweeps import services as sweep_services

pytestmark = pytest.mark.django_db

FIELDS = {"seeds": "2", "concurrency": "2", "policy_name": "median", "policy_metric": "reward/mean",
          "policy_mode": "max", "policy_params": "", "total_steps": "40", "grid": "", "free_slot_use": "nothing"}


def warning(client, **fields) -> str:
    response = client.get(reverse("sweeps:policy_warning"), {**FIELDS, **fields})
    assert response.status_code == 200
    return response.content.decode()


def test_the_warning_names_the_policy_that_can_never_stop_a_run_and_what_would_act(client_in):
    html = warning(client_in)
    assert 'id="policy-form-warning"' in html and "hidden" not in html
    assert "the median policy can never stop a run of this sweep (2 runs, 2 at a time)" in html
    assert "it would act with min_peers 1" in html
    assert "can never stop" not in warning(client_in, seeds="8", concurrency="4")  # enough peers: no warning
    assert "can never stop" not in warning(client_in, policy_name="manual")
    assert "can never stop" not in warning(client_in, seeds="1, , 3")  # the launch's field error says it
    assert "can never stop" not in warning(client_in, grid="lr = 1e-4, 2e-4")  # 2 seeds x 2 grid points: 4 runs
    assert "(4 runs, 2 at a time)" in warning(client_in, grid="lr = 1e-4, 2e-4", policy_params='{"min_peers": 4}')


def test_the_form_copied_from_a_sweep_whose_policy_cannot_act_says_so_next_to_the_policy(
        client_in, model_dir, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        small = sweep_services.sweep_create(config={"model_path": model_dir, "total_steps": 40}, seeds=[0, 1],
                                            concurrency=2, policy={"name": "median", "metric": "reward/mean"})
    html = client_in.get(reverse("sweeps:new"), {"copy_of": small.pk}).content.decode()
    field, note = html.index('id="field-policy_name"'), html.index('id="policy-form-warning"')
    assert field < note < html.index('id="field-policy_metric"')
    assert "Before launch: the median policy can never stop a run of this sweep (2 runs, 2 at a time)" in html
