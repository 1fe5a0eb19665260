"""Pages that show a secret tell browsers and proxies not to keep them (``Cache-Control: no-store``): the API
tokens page shows a new token once, in the answer to the form's POST, and a cached copy (the back button, a shared
proxy, the disk cache) would show it again. Other pages keep the default."""
from __future__ import annotations

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def no_store(response) -> bool:
    return "no-store" in [part.strip() for part in response.get("Cache-Control", "").split(",")]


def test_the_api_tokens_page_is_not_stored(client_in):
    made = client_in.post(reverse("api-tokens"), {"name": "laptop"})
    assert made.status_code == 200 and "sb_" in made.content.decode()  # the new token, shown once
    assert no_store(made)
    assert no_store(client_in.get(reverse("api-tokens")))
    assert no_store(client_in.post(reverse("api-tokens"), {"name": ""}))  # a refused name: the form again


def test_the_login_and_the_admins_set_password_pages_are_not_stored(client, admin_client, admin_user):
    assert no_store(client.get(reverse("login")))
    assert no_store(admin_client.get(reverse("admin:auth_user_password_change", args=[admin_user.pk])))


def test_an_ordinary_page_is_unaffected(client_in):
    response = client_in.get(reverse("runs:list"))
    assert response.status_code == 200 and not no_store(response)
