"""The run page's prompt is the first one training draws: ``training.first_prompt.first_training_example`` (no torch, a
data file streamed) against the loop's own draw (``PromptSource.sample`` with the loop's data generator), for every
built-in task, reasoning-gym tasks with and without task_params, benchmarks, and a dataset with a held-out split."""
from __future__ import annotations

import json

import pytest
import torch

from training.config import TrainConfig
from training.data import data_generator_seed, first_draw, prompt_source
from training.first_prompt import first_training_example, preview


def loops_first_example(cfg: TrainConfig) -> dict:
    """What training.loop draws first: its prompt source, its data generator, a step's prompts_per_step."""
    generator = torch.Generator().manual_seed(data_generator_seed(cfg.seed))
    return prompt_source(cfg).sample(cfg.prompts_per_step, generator)[0]


@pytest.mark.parametrize("seed", [0, 1, 7, 12345, 4_294_967, 2**32 - 1])
@pytest.mark.parametrize("n", [1, 3, 37, 1000, 10_000_000, 2**28 - 1])
def test_the_first_draw_is_torchs_first_randint_for_any_seed_and_range(seed, n):
    generator_seed = data_generator_seed(seed)  # past 2**32 for large seeds: torch keeps the low 32 bits
    drawn = torch.randint(0, n, (5,), generator=torch.Generator().manual_seed(generator_seed))
    assert first_draw(n, generator_seed) == drawn[0].item()


def test_first_draw_refuses_a_range_it_is_not_checked_for():
    for n in (0, 2**28):
        with pytest.raises(ValueError, match=r"need 0 < n < 2\*\*28"):
            first_draw(n, 1)


TASKS = [
    ("arithmetic", {}), ("countdown", {}), ("humaneval", {}), ("ifbench", {}),
    ("reasoning_gym:basic_arithmetic", {}),
    ("reasoning_gym:basic_arithmetic", {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}),
    ("reasoning_gym:chain_sum", {"min_terms": 2, "max_terms": 3}),
    ("reasoning_gym:leg_counting", {}), ("reasoning_gym:gsm_symbolic", {}),
]


@pytest.mark.parametrize("task, params", TASKS)
@pytest.mark.parametrize("seed", [0, 3])
def test_the_first_training_example_of_every_task_is_the_loops_first_draw(task, params, seed):
    cfg = TrainConfig.from_dict({"task": task, "task_params": params, "seed": seed, "prompts_per_step": 4,
                                 "task_size": 200}, check_paths=False)
    assert first_training_example(cfg) == loops_first_example(cfg)


def test_task_params_change_the_first_prompt_as_they_change_training():
    easy = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}
    base = TrainConfig.from_dict({"task": "reasoning_gym:basic_arithmetic"}, check_paths=False)
    with_params = TrainConfig.from_dict({"task": "reasoning_gym:basic_arithmetic", "task_params": easy},
                                        check_paths=False)
    terms = [t for t in first_training_example(with_params)["prompt"].rstrip(".").split() if t.lstrip("-").isdigit()]
    assert len(terms) == 2 and first_training_example(base) != first_training_example(with_params)


@pytest.mark.parametrize("held_out_fraction", [0.0, 0.2])
@pytest.mark.parametrize("seed", [0, 5])
def test_a_datasets_first_training_row_is_streamed_as_the_loop_draws_it(tmp_path, held_out_fraction, seed):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"q": f"question {i}", "a": str(i), "sys": f"system {i}"}) + "\n"
                            for i in range(37)))
    cfg = TrainConfig.from_dict({"task": "dataset:d", "data_path": str(path), "prompt_field": "q", "answer_field": "a",
                                 "data_fields": {"system_prompt": "sys"}, "held_out_fraction": held_out_fraction,
                                 "split_seed": 4, "seed": seed}, check_paths=False)
    assert first_training_example(cfg) == loops_first_example(cfg)


def test_the_preview_renders_the_first_example_as_training_encodes_it(tmp_path, smollm2_dir):
    from transformers import AutoTokenizer

    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"q": f"question {i}", "a": str(i), "sys": f"system {i}"}) + "\n"
                            for i in range(20)))
    cfg = TrainConfig.from_dict({"task": "dataset:d", "data_path": str(path), "prompt_field": "q", "answer_field": "a",
                                 "data_fields": {"system_prompt": "sys"}, "seed": 2}, check_paths=False)
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    shown = preview(cfg, tokenizer)
    first = loops_first_example(cfg)
    template = cfg.prompt_template()
    assert shown["question"] == first["prompt"] and f"system {first['answer']}" in shown["text"]
    # the text shown is the text whose tokens the loop gives the model
    assert tokenizer.encode(shown["text"], add_special_tokens=False) == template.encode_example(tokenizer, first)
    assert shown["tokens"] == len(template.encode_example(tokenizer, first)) and shown["first_step"]


def test_the_preview_is_the_first_prompt_the_training_loop_logs(tmp_path, smollm2_dir):
    """One real step of the loop (SmolLM2 on CPU: about a minute alone, minutes on a busy machine)."""
    from training.loop import train
    from training.light_tokenizer import LightTokenizer

    from .conftest import ListSink

    params = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}
    cfg = TrainConfig.from_dict({"model_path": smollm2_dir, "task": "reasoning_gym:basic_arithmetic",
                                 "task_params": params, "seed": 4,
                                 "total_steps": 1, "prompts_per_step": 2, "group_size": 2, "max_new_tokens": 2,
                                 "samples_per_step": 2, "device": "cpu", "eval_every": 0}, check_paths=False)
    sink = ListSink()
    train(cfg, str(tmp_path / "run"), sink)
    logged = sink.samples[0][1][0]  # step 1's first sample, as the run page's samples show it
    shown = preview(cfg, LightTokenizer(smollm2_dir))  # as the web process renders it (no torch, no transformers)
    assert shown["question"] == logged["prompt"] and shown["answer"] == logged["answer"]
    assert shown["text"].endswith("<|im_start|>assistant\n") and logged["prompt"] in shown["text"]
