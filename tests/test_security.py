"""Production-facing settings: a content security policy with per-page nonces, login throttling, hosts that
fail closed."""
from __future__ import annotations

import re

import pytest
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
