"""bench/real_model.py's memory run, kept from rotting: on the tiny model, its check of the chunked output layer
against the un-chunked path (the model's own [B, T, V] logits, one log-softmax) finds them equal per step, it
records each step's values, and it reports the memory model's estimate beside the measured peak."""
from __future__ import annotations

import os
import sys

from tests.conftest import REPO

sys.path.insert(0, os.path.join(REPO, "bench"))
import real_model  # noqa: E402


def test_the_memory_run_checks_the_chunked_path_against_the_unchunked_one(tiny_model_dir):
    import training.step_update as step_update
    from training.distributed import Parallel

    policy_loss, forward = step_update.policy_loss, Parallel.forward
    res = real_model.run_memory("", 2, 0, (4, 4, 8), {"micro_batch_size": 8}, check=True, tiny=True)
    assert step_update.policy_loss is policy_loss and Parallel.forward is forward  # the bench's wrappers are gone
    assert [s["step"] for s in res["steps"]] == [1, 2]
    for s in res["steps"]:
        diffs = s["unchunked"]
        assert diffs["loss"] <= 1e-5 and diffs["entropy"] <= 1e-5 and diffs["logp_rel_l2"] <= 1e-5, diffs
        assert len(s["logp"]) > 0 and s["rss_mb"] > 0
    assert res["prompt_tokens"] > 0 and res["estimate_mb"] > 0 and "micro-batch 8" in res["estimate"]


def test_two_recorded_runs_compare_token_by_token():
    ref = [{"loss": 1.0, "entropy": 2.0, "logp": [-1.0, -2.0]}]
    same_tokens_other_order = [{"loss": 1.0, "entropy": 2.0, "logp": [-2.0, -1.0]}]
    assert real_model.compare_steps(ref, same_tokens_other_order) == {"loss": 0.0, "entropy": 0.0, "logp": 0.0}
    moved = [{"loss": 1.1, "entropy": 2.0, "logp": [-1.0, -2.0, -3.0]}]
    worst = real_model.compare_steps(ref, moved)
    assert abs(worst["loss"] - 0.1 / 1.1) < 1e-12 and worst["logp"] == float("inf")
