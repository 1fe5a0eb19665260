"""Judge endpoints are registered by staff (the admin); a run config names one, and only those exist."""
from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from training.config import TrainConfig
from training.fields import FieldErrors
from webapp.library.models import JudgeEndpoint

pytestmark = pytest.mark.django_db

SPEC = [{"name": "judge", "params": {"endpoint": "rubric-grader"}}]


def test_a_config_names_a_registered_endpoint_and_nothing_else():
    with pytest.raises(FieldErrors) as info:
        TrainConfig.from_dict({"rewards": SPEC}, check_paths=False)
    assert "no judge endpoint named 'rubric-grader'" in info.value.errors["rewards"]
    JudgeEndpoint.objects.create(name="rubric-grader", base_url="http://judge.lab:8000/v1", model="qwen-judge")
    cfg = TrainConfig.from_dict({"rewards": SPEC}, check_paths=False)
    assert cfg.rewards == SPEC  # the config keeps the name; the URL stays in the library


@pytest.mark.parametrize("fields, message", [
    ({"base_url": "file:///etc/shadow"}, "http:// or https://"),
    ({"base_url": "", "local_model_path": ""}, "exactly one of"),
    ({"base_url": "http://a/v1", "local_model_path": "/models/j"}, "exactly one of"),
    ({"base_url": "http://a/v1", "secret": "$(id)"}, "Enter a valid value"),
])
def test_staff_cannot_register_a_file_url_or_an_odd_secret_name(fields, message):
    endpoint = JudgeEndpoint(name="x", **fields)
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace("$", r"\$")):
        endpoint.full_clean()


def test_only_staff_reach_the_endpoints_in_the_admin(client_in, admin_client):
    url = reverse("admin:library_judgeendpoint_changelist")
    assert client_in.get(url).status_code == 302  # a user who is not staff is sent to the admin login
    assert admin_client.get(url).status_code == 200
