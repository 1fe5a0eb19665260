"""The models page fits a 1280 x 800 window with long model names and folders (no sideways scroll), and a long
"Try it" answer wraps inside its box. The trial is written by the test (no worker)."""
from __future__ import annotations

import pytest

from tests.conftest import log_in
from webapp.library.models import ModelEntry, ModelTrial
from webapp.projects.models import Project

pytestmark = [pytest.mark.django_db(transaction=True)]

LONG_NAME = "SmolLM2-135M-Instruct-gsm8k-grpo-lr1e-6-kl0.04-seed0-step2000-merged-bf16"
LONG_PATH = ("/srv/seedbed/models/huggingface/HuggingFaceTB/SmolLM2-135M-Instruct-gsm8k-grpo-lr1e-6-kl0.04-seed0"
             "/checkpoints/step-002000-merged-bf16")
DESCRIPTION = {"architecture": "Qwen2ForCausalLM", "parameters": 494032768, "tokenizer": "Qwen2TokenizerFast",
               "chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}", "eos_token": "<|im_end|>",
               "dtype": "bfloat16", "size_bytes": 988097824}


def entry_for(user, *, name: str, path: str) -> ModelEntry:
    return ModelEntry.objects.create(project=Project.objects.get(name=user.username), name=name, path=path,
                                     description=DESCRIPTION, created_by=user)


def test_the_models_page_fits_1280_px_and_a_long_answer_wraps(live_server, django_user_model, chromium):
    page = chromium.new_context(viewport={"width": 1280, "height": 800}).new_page()
    log_in(page, live_server, django_user_model, start="/models/", username="bea")
    bea = django_user_model.objects.get(username="bea")
    entry = entry_for(bea, name=LONG_NAME, path=LONG_PATH)
    entry_for(bea, name="Qwen2.5-0.5B-Instruct-math-" + "x" * 60, path="/data/" + "qwen2.5-0.5b-instruct_" * 6)
    ModelTrial.objects.create(project=entry.project, entry=entry, model_path=entry.path, created_by=bea,
                              prompt="Explain " + "step by step " * 40, max_new_tokens=256, temperature=0.7,
                              status="done", reply=("The answer is 19 because twelve plus seven is nineteen. " * 30
                                                    + "tokens:" + "0123456789" * 30), tokens=256, seconds=1.5,
                              stop_reason="max_new_tokens")
    page.goto(f"{live_server.url}/models/")
    page.wait_for_selector(f'tr[data-model="{LONG_NAME}"]')
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    page.goto(f"{live_server.url}/models/{entry.pk}/")
    reply = page.wait_for_selector("#trials li[data-status=done] [data-reply]")
    assert reply.evaluate("e => e.scrollWidth <= e.clientWidth"), reply.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert reply.evaluate("e => e.clientWidth") <= 1280
    prompt = page.query_selector("#trials li[data-status=done] .trial-prompt")
    assert prompt.evaluate("e => e.scrollWidth <= e.clientWidth")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
