"""Two users in two projects, each with an API token: alice (admin of "vision" and of her personal project)
and bob (his personal project only), talking to /api/v1/ through Django's test client."""
from __future__ import annotations

import json

import pytest


class Api:
    """A JSON client for /api/v1/ that sends one user's bearer token."""

    def __init__(self, client, token: str | None):
        self.client, self.token = client, token

    def _headers(self) -> dict:
        return {"HTTP_AUTHORIZATION": f"Bearer {self.token}"} if self.token else {}

    def get(self, path: str, **params):
        return self.client.get(f"/api/v1{path}", params, **self._headers())

    def patch(self, path: str, body=None):
        return self.client.patch(f"/api/v1{path}", json.dumps(body or {}), content_type="application/json",
                                 **self._headers())

    def post(self, path: str, body=None, *, raw: str | None = None, headers: dict | None = None):
        data = raw if raw is not None else json.dumps(body if body is not None else {})
        return self.client.post(f"/api/v1{path}", data, content_type="application/json", headers=headers,
                                **self._headers())


@pytest.fixture
def config(model_dir):
    return {"preset": "grpo", "model_path": model_dir, "total_steps": 6, "prompts_per_step": 4, "group_size": 4}


def _user_with_token(django_user_model, username: str):
    from webapp.api.services import token_create

    user = django_user_model.objects.create_user(username=username, password="pw-for-tests-only")
    return user, token_create(user=user, name="tests")[1]


@pytest.fixture
def alice(client, django_user_model):
    from webapp.projects.services import project_create

    user, token = _user_with_token(django_user_model, "alice")
    project_create(user=user, name="vision")
    return Api(client, token)


@pytest.fixture
def bob(django_user_model):
    from django.test import Client

    _, token = _user_with_token(django_user_model, "bob")
    return Api(Client(), token)


@pytest.fixture
def anonymous():
    from django.test import Client

    return Api(Client(), None)
