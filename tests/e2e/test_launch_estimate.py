"""The run form's memory and time estimates follow its fields in a real browser, without a reload (before: computed
once when the page was rendered, they stayed as they were after model_path or group_size changed)."""
from __future__ import annotations

import json

import pytest

from tests.conftest import log_in, wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]


def model_folder(tmp_path, name: str, **dims) -> str:
    """A folder with a Llama-style config.json of ``dims`` (the web layer reads only that)."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "tie_word_embeddings": True, **dims}))
    return str(folder)


def estimate(page) -> str:
    box = page.query_selector("#memory-estimate")
    return box.text_content() if box is not None else ""


def test_the_estimates_follow_model_path_and_group_size_without_a_reload(live_server, django_user_model,
                                                                         browser_page, tmp_path):
    small = model_folder(tmp_path, "small", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=4, intermediate_size=128, vocab_size=512)
    smollm2 = model_folder(tmp_path, "smollm2", hidden_size=576, num_hidden_layers=30, num_attention_heads=9,
                           num_key_value_heads=3, intermediate_size=1536, vocab_size=49152)
    page = browser_page
    log_in(page, live_server, django_user_model, start=f"/runs/new/?model_path={small}")
    first = estimate(page)
    assert first.startswith("Estimated peak memory of each training process: 0.")
    page.evaluate("window.notReloaded = true")
    page.fill("#id_model_path", smollm2)
    page.press("#id_model_path", "Tab")
    wait_for(lambda: "weights 0.54" in estimate(page), timeout=20, what="the estimate for SmolLM2's dimensions")
    with_smollm2 = estimate(page)
    assert "sampling" not in with_smollm2
    page.fill("#id_group_size", "1024")  # 8 prompts × 1,024 completions: sampling's KV cache is the peak
    page.press("#id_group_size", "Tab")
    wait_for(lambda: "sampling" in estimate(page), timeout=20, what="the estimate for 1,024 completions a prompt")
    assert estimate(page) != with_smollm2
    assert page.evaluate("window.notReloaded") is True
    assert "no time estimate: no run of this model" in page.text_content("#time-estimate")  # none measured yet
