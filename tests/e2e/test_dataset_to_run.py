"""A person's path from their own data to a run on a real model, in a real browser: upload a JSONL file on the
datasets page, check its first rows and mapping, follow "New run on it" to the run form, pick SmolLM2-135M-Instruct
and launch; a worker trains a step on the dataset's rows with the mapping the run recorded."""
from __future__ import annotations

import json
import os

import pytest

from tests.conftest import SCREENSHOTS, log_in, wait_for
from webapp.datasets.models import DatasetEntry
from webapp.runs.models import MetricPoint, Run

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_upload_a_dataset_and_launch_a_run_on_smollm2_from_the_form(live_server, celery_worker, django_user_model,
                                                                     browser_page, smollm2_dir, settings, tmp_path):
    settings.SEEDBED_LIBRARY_DIR = tmp_path / "library"
    settings.SEEDBED_DATA_ROOTS = [*settings.SEEDBED_DATA_ROOTS, os.path.dirname(smollm2_dir)]
    rows = [{"problem": f"What is {a} + {b}?", "solution": str(a + b)} for a in range(1, 7) for b in range(1, 7)]
    data = tmp_path / "sums.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))

    page = browser_page
    log_in(page, live_server, django_user_model, start="/datasets/")
    page.fill("#upload-form input[name=name]", "sums")
    page.set_input_files("#upload-form input[name=file]", str(data))
    page.click("#upload-form button[type=submit]")
    page.wait_for_url("**/datasets/*/")
    entry = DatasetEntry.objects.get(name="sums")
    assert (entry.rows, entry.prompt_field, entry.answer_field) == (36, "problem", "solution")
    assert page.text_content("#dataset-rows") == "36"
    assert "What is 1 + 1?" in page.text_content("#dataset-preview")
    assert "4 rows held out" in page.text_content("#dataset-split")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "dataset_page.png"), full_page=True)

    page.click("#new-run-with-dataset")
    page.wait_for_url("**/runs/new/?task=dataset:sums")
    assert page.input_value("#id_task") == "dataset:sums"
    page.click("summary:has-text('Every other knob')")  # the knobs beyond the main ones
    page.fill("#id_name", "smol on my data")
    page.fill("#id_model_path", smollm2_dir)
    for field, value in {"total_steps": "1", "prompts_per_step": "2", "group_size": "2", "max_new_tokens": "8",
                         "samples_per_step": "1", "eval_every": "0", "answer_instruction": "Reply with the number only.",
                         "rewards": '[{"name": "math", "weight": 1.0, "params": {"extract": "last_number", "processes": 1}}]'
                         }.items():
        page.fill(f"#id_{field}", value)
    page.click("#launch")
    page.wait_for_url("**/runs/*/")
    run = Run.objects.get(name="smol on my data")
    assert run.config["data_path"] == entry.path and run.config["prompt_field"] == "problem"
    assert run.config["model_path"] == smollm2_dir and run.config["held_out_fraction"] == 0.1
    wait_for(lambda: MetricPoint.objects.filter(run=run, key="reward/mean", step=1).exists(), timeout=300,
             what="the first step of SmolLM2 on the uploaded dataset")
    page.screenshot(path=str(SCREENSHOTS / "dataset_run_page.png"), full_page=True)
    page.goto(f"{live_server.url}/datasets/")
    assert page.locator("tr[data-dataset=sums]").count() == 1
    page.screenshot(path=str(SCREENSHOTS / "datasets_page.png"), full_page=True)
