"""A body past Django's in-memory limit (DATA_UPLOAD_MAX_MEMORY_SIZE) from a client that skips the form's own
check (curl): a 413 that names the limit, a plain page for a page's form and JSON for the API (/api/), instead of
Django's bare "Bad Request (400)"; one within it still gets the form's field error."""
from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from django.conf import settings

from webapp.runs.models import Run
from webapp.sweeps.models import Sweep

pytestmark = [pytest.mark.django_db]

LIMIT_WORDS = "2.5 MB"


@pytest.fixture
def member(client, django_user_model):
    from tests.conftest import join_default_project

    user = django_user_model.objects.create_user(username="ada", password="pw-for-tests-only")
    join_default_project(user, "member")
    client.force_login(user)
    return client


def form_post(client, path: str, name: str):
    """The form posted as a browser sends it (urlencoded), its name ``name``."""
    return client.post(path, urlencode({"name": name, "preset": "grpo"}),
                       content_type="application/x-www-form-urlencoded")


@pytest.mark.parametrize("path, made", [("/runs/new/", Run), ("/sweeps/new/", Sweep)])
def test_an_over_limit_form_body_is_a_413_page_naming_the_limit(member, path, made):
    within = form_post(member, path, "x" * 2_000_000)
    assert "Ensure this value has at most" in within.content.decode()  # within the limit: the field's error
    response = form_post(member, path, "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1))
    assert response.status_code == 413
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert LIMIT_WORDS in page and f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes" in page
    assert "Nothing was saved" in page
    assert not made.objects.exists()


def test_an_over_limit_api_body_is_a_413_json_naming_the_limit(django_user_model, client):
    from webapp.api.services import token_create

    user = django_user_model.objects.create_user(username="alice", password="pw-for-tests-only")
    token = token_create(user=user, name="tests")[1]
    body = json.dumps({"name": "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1), "config": {}})
    response = client.post("/api/v1/runs", body, content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 413
    answer = response.json()
    assert answer["limit_bytes"] == settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    assert LIMIT_WORDS in answer["errors"]["body"]
    assert not Run.objects.exists()
