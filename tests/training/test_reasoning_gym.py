"""reasoning-gym's tasks as Seedbed tasks: "reasoning_gym:<name>" draws seeded problems (the held-out set the
same for every seed), and the `reasoning_gym` verifier agrees with each task's own score_answer."""
from __future__ import annotations

import json

import pytest
import reasoning_gym
import torch

from training.config import TrainConfig
from training.data import HELD_OUT_SEED, make_prompt_source
from training.fields import FieldErrors
from training.verifiers import check_reward_spec, get_verifier
from training.verifiers.reasoning_gym import extract_answer

TASKS = ["basic_arithmetic", "chain_sum", "gsm_symbolic", "leg_counting", "simple_equations", "gcd", "word_sorting"]


def prompts(source, n=8, seed=0):
    return [e["prompt"] for e in source.sample(n, torch.Generator().manual_seed(seed))]


def test_a_task_draws_seeded_problems_and_one_held_out_set():
    a = make_prompt_source("reasoning_gym:chain_sum", seed=1, task_size=200)
    b = make_prompt_source("reasoning_gym:chain_sum", seed=1, task_size=200)
    c = make_prompt_source("reasoning_gym:chain_sum", seed=2, task_size=200)
    assert prompts(a) == prompts(b) and prompts(a) != prompts(c)
    assert len(a.examples) == 200
    assert [e["prompt"] for e in a.eval_set(20)] == [e["prompt"] for e in c.eval_set(20)]  # seed-independent
    reference = reasoning_gym.create_dataset("chain_sum", size=20, seed=HELD_OUT_SEED)
    assert [e["prompt"] for e in a.eval_set(5)] == [reference[i]["question"] for i in range(5)]
    example = a.sample(1, torch.Generator().manual_seed(0))[0]
    assert example["prompt"] == example["question"] and isinstance(example["answer"], str)
    json.dumps(example)  # samples and eval results store what the verifier saw


@pytest.mark.parametrize("task", TASKS)
def test_the_verifier_agrees_with_the_tasks_own_scorer(task):
    """Differential: for right answers, wrong answers and near misses, our score is the package's
    score_answer of the same extracted answer (and 0 without an <answer> tag)."""
    dataset = reasoning_gym.create_dataset(task, size=30, seed=5)
    verifier = get_verifier("reasoning_gym")
    scores = []
    for i in range(30):
        entry = dataset[i]
        example = {**entry, "prompt": entry["question"], "answer": str(entry["answer"])}
        for candidate in (str(entry["answer"]), str(entry["answer"]) + "0", "banana", str(entry["answer"]).upper()):
            ours = verifier(f"Let me think.\n<answer>{candidate}</answer>", example).score
            assert ours == dataset.score_answer(candidate, entry), (task, candidate)
            scores.append(ours)
        assert verifier(str(entry["answer"]), example).score == 0.0  # asked for <answer>…</answer>
    assert max(scores) == 1.0 and min(scores) < 1.0


def test_answer_extraction_forms():
    assert extract_answer("a <answer>1</answer> b <ANSWER> 2 </ANSWER>") == "2"
    assert extract_answer("no tag") is None
    assert extract_answer(r"so \boxed{\frac{1}{2}}", "boxed") == r"\frac{1}{2}"
    assert extract_answer("step\n\n42\n", "last_line") == "42" and extract_answer(" x ", "whole") == "x"
    assert extract_answer("8 + 4 = 12, so -3.5 it is.", "last_number") == "-3.5"
    assert extract_answer("no digits", "last_number") is None
    assert "extract must be one of" in check_reward_spec([{"name": "reasoning_gym", "params": {"extract": "xml"}}])


def test_the_config_names_reasoning_gym_tasks():
    cfg = TrainConfig.from_dict({"task": "reasoning_gym:basic_arithmetic", "task_size": 500}, check_paths=False)
    assert cfg.task == "reasoning_gym:basic_arithmetic" and cfg.task_size == 500
    for task, message in (("reasoning_gym:chess", "reasoning-gym has no task 'chess'"),
                          ("gsm8k", "must be arithmetic, countdown, humaneval, ifbench, file, dataset:<name> or reasoning_gym:<task>")):
        with pytest.raises(FieldErrors) as info:
            TrainConfig.from_dict({"task": task}, check_paths=False)
        assert message in info.value.errors["task"]
    with pytest.raises(FieldErrors) as info:
        TrainConfig.from_dict({"task": "reasoning_gym:gcd", "task_size": 0}, check_paths=False)
    assert "task_size" in info.value.errors


def test_the_cli_evaluates_a_reasoning_gym_task(tiny_model_dir, capsys):
    from training.__main__ import main

    assert main(["eval", "--model", tiny_model_dir, "--data", "reasoning_gym:basic_arithmetic", "--problems", "3",
                 "--n", "2", "--k", "1,2", "--max-new-tokens", "4", "--compact"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert len(result["problems"]) == 3 and set(result["pass@k"]) == {"1", "2"}
    assert main(["eval", "--model", tiny_model_dir, "--data", "reasoning_gym:nope", "--n", "2", "--k", "1"]) == 2
    assert "error: --data: reasoning-gym has no task 'nope'" in capsys.readouterr().err


def test_task_params_set_the_tasks_difficulty_and_are_checked():
    easy = {"min_terms": 2, "max_terms": 2, "max_digits": 1, "allow_parentheses": False, "allow_negation": False}
    source = make_prompt_source("reasoning_gym:basic_arithmetic", seed=1, task_size=50, task_params=easy)
    for example in [source.examples[i] for i in range(20)] + source.eval_set(20):
        numbers = [t for t in example["prompt"].removeprefix("Calculate ").rstrip(".").split() if t.isdigit()]
        assert len(numbers) == 2 and all(int(n) <= 10 for n in numbers), example["prompt"]  # "1 digit": 0..10
    for params, message in (({"bogus": 1}, "unknown setting(s) ['bogus']"),
                            ({"min_terms": 5, "max_terms": 2}, "max_terms must be >= min_terms"),
                            ({"max_terms": {"a": 1}}, "expected a number")):
        with pytest.raises(FieldErrors) as info:
            TrainConfig.from_dict({"task": "reasoning_gym:basic_arithmetic", "task_params": params}, check_paths=False)
        assert message in info.value.errors["task_params"]
    with pytest.raises(FieldErrors) as info:
        TrainConfig.from_dict({"task": "arithmetic", "task_params": {"a": 1}}, check_paths=False)
    assert "only a reasoning_gym:<task> takes parameters" in info.value.errors["task_params"]
