"""RL on a real pretrained model, kept short: SmolLM2-135M-Instruct (imported from its GGUF file) trained for
two GRPO steps on a reasoning-gym task through its chat template, checkpointed, stopped and resumed (the
resumed run's metrics equal an uninterrupted run's), and its checkpoint evaluated with pass@k."""
from __future__ import annotations

import math

import pytest
import torch

from tests.training.conftest import ListSink, comparable
from training.checkpoint import latest_checkpoint
from training.config import TrainConfig
from training.evaluate import evaluate_examples
from training.loop import load_model, train
from training.prompts import PromptTemplate

INSTRUCTION = "Give only the final number inside <answer></answer>."


def real_config(model_dir: str, **overrides) -> TrainConfig:
    base = {"preset": "grpo", "model_path": model_dir, "task": "reasoning_gym:basic_arithmetic", "task_size": 100,
            "answer_instruction": INSTRUCTION, "total_steps": 2, "prompts_per_step": 2, "group_size": 2,
            "max_new_tokens": 24, "temperature": 1.0, "kl_coef": 0.0, "lr": 1e-6, "samples_per_step": 2,
            "checkpoint_every": 1, "seed": 11, "device": "cpu"}
    base.update(overrides)
    return TrainConfig.from_dict(base)


@pytest.fixture(scope="module")
def uninterrupted(smollm2_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("real-full")
    sink = ListSink()
    result = train(real_config(smollm2_dir), str(out), sink)
    return result, sink, out


def test_two_rl_steps_on_smollm2_through_its_chat_template(uninterrupted):
    result, sink, out = uninterrupted
    assert result.status == "succeeded" and [s for s, _ in sink.metrics] == [1, 2]
    for _, m in sink.metrics:
        for key in ("reward/mean", "loss/policy", "entropy", "length/mean", "grad_norm"):
            assert math.isfinite(m[key]), key
        assert m["length/mean"] > 1 and m["entropy"] > 0
    row = sink.samples[-1][1][0]
    assert row["details"]  # the reasoning_gym verifier said what it extracted and from which task
    assert latest_checkpoint(str(out))[0] == 2 and [s for s, _ in sink.checkpoints] == [1, 2]


def test_a_stopped_real_run_resumes_to_the_same_metrics(smollm2_dir, uninterrupted, tmp_path):
    _, full, _ = uninterrupted
    first = ListSink()
    stopped = train(real_config(smollm2_dir), str(tmp_path), first, should_stop=lambda: len(first.metrics) >= 1)
    assert (stopped.status, stopped.step) == ("stopped", 1)
    second = ListSink()
    assert train(real_config(smollm2_dir), str(tmp_path), second).status == "succeeded"
    assert comparable(first.metrics + second.metrics) == comparable(full.metrics)


def test_the_checkpoint_is_evaluated_with_pass_at_k(uninterrupted):
    from training.data import make_prompt_source

    _, _, out = uninterrupted
    model, tokenizer = load_model(latest_checkpoint(str(out))[1], torch.device("cpu"))
    model.eval()
    examples = make_prompt_source("reasoning_gym:basic_arithmetic").eval_set(2)
    result = evaluate_examples(model, tokenizer, examples, n=2, ks=[1, 2], max_new_tokens=24,
                               rewards=[{"name": "reasoning_gym"}], seed=0, keep_completions=1,
                               template=PromptTemplate(instruction=INSTRUCTION))
    assert set(result["pass@k"]) == {"1", "2"} and 0.0 <= result["pass@k"]["1"] <= result["pass@k"]["2"] <= 1.0
    assert len(result["problems"]) == 2 and result["problems"][0]["samples"]


def test_smollm2_ends_at_its_end_of_turn_and_at_stop_strings_across_tokens(smollm2_dir):
    """Its chat template closes a turn with <|im_end|>, which ends a completion; a stop string spread over
    several BPE tokens ends one at the token that completes it."""
    from tests.training.test_rollout import _assert_cut, _expected_ends
    from training.rollout import HFRolloutEngine, end_token_ids

    model, tok = load_model(smollm2_dir, torch.device("cpu"))
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert im_end in end_token_ids(model, tok)
    prompt = PromptTemplate(instruction=INSTRUCTION).encode(tok, "What is 2 + 3?")
    engine = HFRolloutEngine(model, tok)
    kw = dict(max_new_tokens=24, temperature=1.0, top_p=1.0, top_k=0)
    stop = [" is 5", "= 5", "\n\n"]
    free = engine.generate([prompt] * 8, generator=torch.Generator().manual_seed(0), **kw)
    cut = engine.generate([prompt] * 8, generator=torch.Generator().manual_seed(0), stop=stop, **kw)
    ends = _expected_ends(tok, free, stop, end_ids=[im_end])
    assert any(e is not None and free.completion_ids[i, e] == im_end for i, e in enumerate(ends))
    assert any(e is not None and free.completion_ids[i, e] != im_end for i, e in enumerate(ends))
    _assert_cut(model, tok, free, cut, ends, temperature=1.0)
