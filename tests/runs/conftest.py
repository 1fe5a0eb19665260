import pytest

# model_dir, user and client_in come from tests/conftest.py


@pytest.fixture
def config(model_dir):
    return {"preset": "grpo", "model_path": model_dir, "total_steps": 6, "prompts_per_step": 4, "group_size": 4}

