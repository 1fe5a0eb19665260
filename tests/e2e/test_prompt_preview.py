"""The run page's "Prompt" section in a browser: the prompt it shows is the first one training gives the model,
its task's settings (task_params) included, as the run's logged samples show it."""
import os
import shutil

import pytest

from tests.conftest import log_in, tiny_config, wait_for
from webapp.runs import services as run_services
from webapp.runs.models import Sample

pytestmark = [pytest.mark.django_db(transaction=True)]

SCREENS = os.environ.get("SEEDBED_ISSUE_SCREENS", "")  # where a closing note's screenshots go, when asked
TWO_ONE_DIGIT_TERMS = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}


def test_the_prompt_preview_is_the_first_prompt_training_logs(live_server, celery_worker, django_user_model,
                                                               browser_page, tmp_path):
    run = run_services.run_create(config=tiny_config(task="reasoning_gym:basic_arithmetic", seed=3, total_steps=1,
                                                     task_params=TWO_ONE_DIGIT_TERMS, samples_per_step=4),
                                  name="two-term sums")
    page = browser_page
    log_in(page, live_server, django_user_model, start=f"/runs/{run.pk}/")
    page.wait_for_selector("#prompt-text", timeout=30_000)
    if SCREENS:
        shot = tmp_path / "prompt.png"
        page.locator("#prompt-section").screenshot(path=str(shot))
        shutil.copy(shot, os.path.join(SCREENS, "item1-prompt.png"))
    shown = page.text_content("#prompt-text")
    first = wait_for(lambda: Sample.objects.filter(run=run, step=1).order_by("index").first(), timeout=240,
                     what="the first step's samples")
    assert shown == first.prompt  # the tiny model: plain text, no instruction
    terms = [t for t in shown.rstrip(".").split() if t.lstrip("-").isdigit()]
    assert len(terms) == 2 and all(len(t.lstrip("-")) <= 2 for t in terms), shown  # "Calculate 2 + 6."


def first_training_prompt(config: dict, tokenizer) -> str:
    """The first prompt the training loop gives the model for ``config``: its prompt source's first draw with the
    loop's data generator (training.loop), rendered by the run's prompt template."""
    import torch

    from training.config import TrainConfig
    from training.data import make_prompt_source

    cfg = TrainConfig.from_dict(config, check_paths=False)
    source = make_prompt_source(cfg.task, cfg.data_path, cfg.prompt_field, cfg.answer_field, seed=cfg.seed,
                                task_size=cfg.task_size, task_params=cfg.task_params, data_fields=cfg.data_fields,
                                held_out_fraction=cfg.held_out_fraction, split_seed=cfg.split_seed)
    first = source.sample(cfg.prompts_per_step, torch.Generator().manual_seed(cfg.seed * 1000))[0]
    return cfg.prompt_template().render(tokenizer, first["prompt"])


def test_a_chat_models_preview_is_its_first_training_prompt_through_the_chat_template(
        live_server, django_user_model, browser_page, smollm2_dir, settings, tmp_path):
    from transformers import AutoTokenizer

    settings.SEEDBED_DATA_ROOTS = [*settings.SEEDBED_DATA_ROOTS, os.path.dirname(smollm2_dir)]
    # the SmolLM2 demo's task; device cuda: queue gpu, which no test worker takes (the run stays queued)
    config = {"model_path": smollm2_dir, "task": "reasoning_gym:basic_arithmetic", "task_params": TWO_ONE_DIGIT_TERMS,
              "seed": 5, "prompts_per_step": 4, "answer_instruction": "Put your answer in <answer></answer>.",
              "device": "cuda"}
    run = run_services.run_create(config=config, name="SmolLM2 two-term sums")
    page = browser_page
    log_in(page, live_server, django_user_model, start=f"/runs/{run.pk}/")
    page.wait_for_selector("#prompt-text", timeout=60_000)
    page.locator("#prompt-section").scroll_into_view_if_needed()
    if SCREENS:
        shot = tmp_path / "prompt.png"
        page.locator("#prompt-section").screenshot(path=str(shot))
        shutil.copy(shot, os.path.join(SCREENS, "item1-smollm2-prompt.png"))
    shown = page.text_content("#prompt-text")
    assert "<|im_start|>assistant" in shown and "Put your answer in <answer></answer>." in shown
    assert shown == first_training_prompt(config, AutoTokenizer.from_pretrained(smollm2_dir))
