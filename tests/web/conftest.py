import json

import pytest


@pytest.fixture
def model_dir(tmp_path):
    """A folder the config schema accepts as a model folder (the web layer never loads it)."""
    path = tmp_path / "model"
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"model_type": "test"}))
    return str(path)


@pytest.fixture
def config(model_dir):
    return {"preset": "grpo", "model_path": model_dir, "total_steps": 6, "prompts_per_step": 4, "group_size": 4}


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="ada", password="pw-for-tests-only")


@pytest.fixture
def client_in(client, user):
    client.force_login(user)
    return client
