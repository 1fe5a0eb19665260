"""The loop end to end on the tiny model: determinism, exact resume, stop, and each stabilizer switch."""
import json
import math
import os

import pytest
import torch

from training.checkpoint import latest_checkpoint
from training.loop import train
from training.sink import JsonlSink

from .conftest import ListSink, comparable, small_config


def run(cfg, out, stop_after=None):
    sink = ListSink()
    should_stop = (lambda: len(sink.metrics) >= stop_after) if stop_after else (lambda: False)
    return train(cfg, str(out), sink, should_stop), sink


def test_same_seed_same_metrics_other_seed_differs(tmp_path, tiny_model_dir):
    _, a = run(small_config(seed=1, total_steps=3), tmp_path / "a")
    _, b = run(small_config(seed=1, total_steps=3), tmp_path / "b")
    _, c = run(small_config(seed=2, total_steps=3), tmp_path / "c")
    assert comparable(a.metrics) == comparable(b.metrics)
    assert comparable(a.metrics) != comparable(c.metrics)
    assert [s for s, _ in a.metrics] == [1, 2, 3]


def test_resume_after_stop_matches_an_uninterrupted_run(tmp_path, tiny_model_dir):
    cfg = small_config(seed=3, total_steps=5)
    full, full_sink = run(cfg, tmp_path / "full")
    stopped, first = run(cfg, tmp_path / "resumed", stop_after=2)
    assert (stopped.status, stopped.step) == ("stopped", 2)
    assert latest_checkpoint(str(tmp_path / "resumed"))[0] == 2  # the stop saved the last completed step
    resumed, second = run(cfg, tmp_path / "resumed")
    assert (full.status, resumed.status) == ("succeeded", "succeeded")
    assert comparable(first.metrics + second.metrics) == comparable(full_sink.metrics)


def test_cli_sink_files_after_resume_equal_uninterrupted(tmp_path, tiny_model_dir):
    cfg = small_config(seed=4, total_steps=4)
    train(cfg, str(tmp_path / "u"), JsonlSink(str(tmp_path / "u")))
    sink = JsonlSink(str(tmp_path / "r"))
    n = []
    train(cfg, str(tmp_path / "r"), type("S", (JsonlSink,), {"on_metrics": lambda self, s, m: (n.append(s), JsonlSink.on_metrics(self, s, m))})(str(tmp_path / "r")),
          should_stop=lambda: len(n) >= 2)
    train(cfg, str(tmp_path / "r"), JsonlSink(str(tmp_path / "r")))

    def lines(d):
        rows = [json.loads(x) for x in open(os.path.join(d, "metrics.jsonl"))]
        return comparable([(r["step"], r) for r in rows])
    assert lines(tmp_path / "u") == lines(tmp_path / "r")


def test_metric_names_and_samples(tmp_path, tiny_model_dir):
    cfg = small_config(preset="grpo", total_steps=2, kl_coef=0.04, samples_per_step=3)
    _, sink = run(cfg, tmp_path)
    step, m = sink.metrics[-1]
    for key in ("reward/mean", "reward/std", "reward/exact/mean", "accuracy", "frac_zero_std_groups",
                "loss/policy", "kl", "entropy", "clip/low_frac", "clip/high_frac", "length/mean", "length/max",
                "length/clipped_frac", "grad_norm", "lr", "tokens_per_s", "step_time_s", "num_gen_batches"):
        assert key in m and math.isfinite(m[key]), key
    assert len(sink.samples[-1][1]) == 3
    row = sink.samples[-1][1][0]
    assert set(row) >= {"prompt", "completion", "reward", "answer", "details"}
    # the reward of a sample is the verifier's verdict on that completion
    assert row["reward"] == float(row["completion"].strip() == row["answer"])
    assert os.path.isfile(os.path.join(sink.checkpoints[-1][1], "seedbed_config.json"))


@pytest.mark.parametrize("overrides", [
    {"top_p": 0.7, "keep_sampling_mask": True},
    {"top_k": 3, "keep_sampling_mask": False},
    {"opsm_delta": 0.0, "ppo_epochs": 2, "minibatch_size": 8},
    {"preset": "grpo", "kl_coef": 0.1, "unbiased_kl": True, "ppo_epochs": 2, "minibatch_size": 8},
    {"preset": "dr_grpo", "dual_clip": 3.0, "adv_estimator": "rloo"},
    {"adv_estimator": "reinforce_pp_baseline", "overlong_buffer_len": 3, "overlong_filtering": True,
     "max_new_tokens": 4},
    {"eval_every": 1, "eval_problems": 4, "eval_n": 4, "eval_k": [1, 4]},
])
def test_each_switch_trains_with_finite_metrics(tmp_path, tiny_model_dir, overrides):
    cfg = small_config(total_steps=2, **overrides)
    result, sink = run(cfg, tmp_path)
    assert result.status == "succeeded"
    for _, m in sink.metrics:
        bad = {k: v for k, v in m.items() if isinstance(v, float) and not math.isfinite(v)}
        assert not bad
    last = sink.metrics[-1][1]
    if cfg.opsm_delta is not None:
        assert 0.0 <= last["opsm/masked_frac"] <= 1.0
    if cfg.eval_every:
        assert 0.0 <= last["eval/pass@1"] <= last["eval/pass@4"] <= 1.0
    if cfg.keep_sampling_mask:
        # with the sampling mask the first update is exactly on-policy: no ratio clipping possible
        assert sink.metrics[0][1]["clip/low_frac"] == 0.0 and sink.metrics[0][1]["clip/high_frac"] == 0.0


def test_dynamic_sampling_keeps_only_informative_groups(tmp_path, tiny_model_dir):
    _, sink = run(small_config(total_steps=2, dynamic_sampling=True, max_gen_batches=4), tmp_path)
    for _, m in sink.metrics:
        assert 1 <= m["num_gen_batches"] <= 4
        assert m["num_groups_trained"] <= 4
        if m["num_gen_batches"] < 4:
            assert m["num_groups_trained"] == 4  # stopped drawing because the batch was full


def test_verifier_errors_past_the_rate_fail_the_run(tmp_path, tiny_model_dir):
    from training.verifiers import VerifierError, register_verifier

    @register_verifier("always_broken_for_test")
    def broken(completion, example):
        raise VerifierError("judge unreachable")

    cfg = small_config(total_steps=2, rewards=[{"name": "always_broken_for_test"}])
    with pytest.raises(RuntimeError, match="verifier errors"):
        run(cfg, tmp_path)
