"""Login throttling behind a reverse proxy: every request comes from the proxy's address, so the lockout's
(username, address) pair must take the client's address from the proxy's header, and only when the deployment
says that header is the proxy's (otherwise a client could write it and pick the address it is counted under).
Real requests through Django's login view and django-axes."""
from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from webapp.client_address import client_address

pytestmark = pytest.mark.django_db

PROXY = "10.9.8.7"   # every request's peer: the proxy
A, B = "203.0.113.10", "198.51.100.20"


@pytest.fixture
def admin_user(django_user_model, settings):
    settings.AXES_FAILURE_LIMIT = 10
    return django_user_model.objects.create_superuser(username="admin", password="the-admins-own")


def login(forwarded_for: str, password: str, peer: str = PROXY) -> int:
    client = Client(REMOTE_ADDR=peer)
    response = client.post(reverse("login"), {"username": "admin", "password": password},
                           HTTP_X_FORWARDED_FOR=forwarded_for)
    return response.status_code


def ten_wrong_passwords_from(forwarded_for: str) -> list[int]:
    return [login(forwarded_for, "guess") for _ in range(10)]


def test_behind_the_trusted_proxy_a_lockout_is_per_client_address(admin_user, settings):
    settings.SEEDBED_TRUSTED_PROXY_HEADER, settings.SEEDBED_TRUSTED_PROXIES = "X-Forwarded-For", "1"
    assert ten_wrong_passwords_from(A)[-1] == 429
    assert login(A, "the-admins-own") == 429            # A is locked out, even with the right password
    assert login(B, "the-admins-own") == 302            # the admin, from elsewhere through the same proxy, is not
    # what a client writes into the header before the proxy appends its address does not move it
    assert login(f"{B}, {A}", "the-admins-own") == 429


def test_trusted_proxies_given_as_addresses(admin_user, settings):
    settings.SEEDBED_TRUSTED_PROXY_HEADER, settings.SEEDBED_TRUSTED_PROXIES = "X-Forwarded-For", "10.0.0.0/8"
    assert ten_wrong_passwords_from(A)[-1] == 429
    assert login(A, "the-admins-own") == 429
    assert login(B, "the-admins-own") == 302
    # a peer that is not a trusted proxy is counted under its own address, whatever header it sends
    assert login(B, "the-admins-own", peer=A) == 429


def test_without_the_setting_the_header_is_ignored(admin_user, settings):
    settings.SEEDBED_TRUSTED_PROXY_HEADER = ""
    assert ten_wrong_passwords_from(A)[-1] == 429
    assert login(B, "the-admins-own") == 429            # one peer, one address: the header changed nothing
    assert login(B, "the-admins-own", peer="10.9.8.6") == 302


@pytest.mark.parametrize(("header", "proxies", "meta", "expected"), [
    ("", "1", {"HTTP_X_FORWARDED_FOR": A}, PROXY),
    ("X-Forwarded-For", "1", {"HTTP_X_FORWARDED_FOR": f"1.2.3.4, {A}"}, A),
    ("X-Forwarded-For", "2", {"HTTP_X_FORWARDED_FOR": f"1.2.3.4, {A}, 10.0.0.3"}, A),
    ("X-Forwarded-For", "2", {"HTTP_X_FORWARDED_FOR": A}, PROXY),          # fewer hops than proxies
    ("X-Forwarded-For", "1", {"HTTP_X_FORWARDED_FOR": "not-an-address"}, PROXY),
    ("X-Forwarded-For", "1", {}, PROXY),
    ("X-Real-IP", "1", {"HTTP_X_REAL_IP": A, "HTTP_X_FORWARDED_FOR": B}, A),
    ("X-Forwarded-For", "10.0.0.0/8", {"HTTP_X_FORWARDED_FOR": f"{B}, {A}, 10.0.0.3"}, A),
])
def test_the_client_address(rf, settings, header, proxies, meta, expected):
    settings.SEEDBED_TRUSTED_PROXY_HEADER, settings.SEEDBED_TRUSTED_PROXIES = header, proxies
    assert client_address(rf.get("/", REMOTE_ADDR=PROXY, **meta)) == expected


def test_compose_trusts_its_proxys_header():
    import yaml

    from tests.test_compose import compose

    web = yaml.safe_load(compose("config").stdout)["services"]["web"]["environment"]
    assert web["SEEDBED_TRUSTED_PROXY_HEADER"] == "X-Forwarded-For" and web["SEEDBED_TRUSTED_PROXIES"] == "1"
