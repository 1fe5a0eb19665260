"""The suite hashes the passwords its users get at one iteration (docs/architecture.md#tests-and-benchmarks): a
user made here has such a hash, and a process with Django's default hashers (a real server the tests start) still
checks it, right and wrong."""
import pytest
from django.conf import global_settings
from django.contrib.auth.hashers import check_password
from django.test import override_settings


@pytest.mark.django_db
def test_a_test_users_password_is_hashed_at_one_iteration_and_the_default_hashers_check_it(django_user_model):
    user = django_user_model.objects.create_user(username="hashed", password="pw-for-tests-only")
    assert user.password.startswith("pbkdf2_sha256$1$")
    with override_settings(PASSWORD_HASHERS=global_settings.PASSWORD_HASHERS):
        assert check_password("pw-for-tests-only", user.password)
        assert not check_password("another", user.password)
