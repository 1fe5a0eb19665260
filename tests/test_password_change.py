"""The password change page (Django's own views, the project's templates): login required, linked from every page,
the current password checked, the project's password validators applied (each refusal names the field), and a
change ends the user's other sessions while this one stays logged in."""
from __future__ import annotations

import pytest

from tests.conftest import logged_in

pytestmark = pytest.mark.django_db

OLD, NEW = "pw-for-tests-only", "a-long-new-passphrase-7"


def _change(client, old: str, new: str, again: str | None = None):
    return client.post("/accounts/password/", {"old_password": old, "new_password1": new,
                                               "new_password2": new if again is None else again})


def test_the_page_needs_a_login_and_is_linked_from_every_page(client, django_user_model):
    response = client.get("/accounts/password/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    user = django_user_model.objects.create_user(username="pat", password=OLD)
    page = logged_in(user)
    for path in ("/runs/", "/account/tokens/", "/projects/"):
        # (the user's name in the header is the link: a word more would push Log out off a 1200 px page)
        assert '<a href="/accounts/password/" id="nav-password" title="Change your password">pat</a>' in \
            page.get(path).content.decode(), path
    html = page.get("/accounts/password/").content.decode()
    assert 'id="password-form"' in html and 'name="old_password"' in html and "<title>Change password" in html


@pytest.mark.parametrize("new, again, field, message", [
    ("short1!", None, "new_password2", "too short"),
    ("password123", None, "new_password2", "too common"),
    ("83019274650213", None, "new_password2", "entirely numeric"),
    ("pat-the-user", None, "new_password2", "too similar to the username"),
    (NEW, NEW + "x", "new_password2", "didn’t match"),
])
def test_a_weak_or_mistyped_new_password_is_refused_naming_the_field(django_user_model, new, again, field, message):
    user = django_user_model.objects.create_user(username="pat-the-user", password=OLD)
    response = _change(logged_in(user), OLD, new, again)
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert message in " ".join(errors[field]), errors
    assert message in response.content.decode().replace("&#x27;", "'").replace("&rsquo;", "’")
    user.refresh_from_db()
    assert user.check_password(OLD)


def test_a_wrong_current_password_is_refused(django_user_model):
    user = django_user_model.objects.create_user(username="pat", password=OLD)
    response = _change(logged_in(user), "not-the-password", NEW)
    assert response.status_code == 200 and "old_password" in response.context["form"].errors
    user.refresh_from_db()
    assert user.check_password(OLD)


def test_a_change_keeps_this_session_and_ends_the_others(django_user_model):
    user = django_user_model.objects.create_user(username="pat", password=OLD)
    here, elsewhere = logged_in(user), logged_in(user)
    response = _change(here, OLD, NEW)
    assert response.status_code == 302 and response["Location"] == "/accounts/password/done/"
    assert 'id="password-changed"' in here.get("/accounts/password/done/").content.decode()
    user.refresh_from_db()
    assert user.check_password(NEW) and not user.check_password(OLD)
    assert here.get("/runs/").status_code == 200
    response = elsewhere.get("/runs/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
