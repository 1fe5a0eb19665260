"""The reward dry-run in a real browser: a dataset whose answers are bare numbers, launched with the
math verifier's default form (which wants \\boxed{}) and no answer instruction, is refused on the form with the
verifier's score and reason under the rewards field; asking for \\boxed{} launches it."""
from __future__ import annotations

import json

import pytest

from tests.conftest import SCREENSHOTS, log_in
from webapp.runs.models import Run

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_a_dataset_whose_answers_do_not_score_is_a_field_error_on_the_form(live_server, django_user_model,
                                                                           browser_page, settings, tmp_path):
    settings.SEEDBED_LIBRARY_DIR = tmp_path / "library"
    data = tmp_path / "bare.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"What is 6 * 7 + {i}?", "answer": str(42 + i)}) + "\n"
                            for i in range(8)))
    page = browser_page
    log_in(page, live_server, django_user_model, start="/datasets/")
    page.fill("#upload-form input[name=name]", "bare")
    page.set_input_files("#upload-form input[name=file]", str(data))
    page.click("#upload-form button[type=submit]")
    page.wait_for_url("**/datasets/*/")
    page.click("#new-run-with-dataset")
    page.wait_for_url("**/runs/new/?task=dataset:bare")
    page.fill("#id_name", "bare answers")
    page.click("#launch")

    error = page.locator("ul.errorlist[data-field=rewards]")
    error.wait_for(timeout=15_000)
    assert error.is_visible()
    text = error.text_content()
    assert 'the math verifier scores the first row\'s reference answer "42" 0.0 ("no final answer found")' in text
    assert "answer_instruction names no answer form" in text
    assert page.input_value("#id_task") == "dataset:bare"  # the form keeps what was typed
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "reward_dry_run_error.png"), full_page=True)
    assert not Run.objects.exists()

    page.fill("#id_answer_instruction", "Put your final answer within \\boxed{}.")
    page.click("#launch")
    page.wait_for_url("**/runs/*/")
    run = Run.objects.get(name="bare answers")
    assert run.config["answer_instruction"] == "Put your final answer within \\boxed{}."
