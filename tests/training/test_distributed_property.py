"""Distributed runs end, whatever the data (training.loop.micro_batch_counts, training.completion_forward: single_call).

Every rank of a run must make the same sequence of collectives: FSDP2 all-gathers a layer in each forward call
and reduce-scatters it in each backward, DDP reduces gradients once per optimizer step, and a rank that makes one
call more than its peer waits for it for ever. What a rank holds depends on its data: dynamic sampling keeps other
groups on each rank (so other row counts, so other micro-batch counts), and completion lengths could send one
rank's forward down the packed sequence and the other's past ``PACK_MAX_TOKENS``. Each case is a real 2-rank run through the CLI
(torchrun, gloo, the tiny model) that must end ``succeeded`` within ``LIMIT_S`` with every step's metrics; the
suite runs a few fixed cases (seeds whose runs hung at 2 ranks before), ``bench/distributed_property.py`` draws
many (``random_case``).
"""
from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIMIT_S = 120  # a case's wall time (a run of these sizes takes 15-25 s on a loaded 2-core machine)


def case_config(seed: int, strategy: str, *, preset: str = "dapo", prompts: int = 4, group: int = 4,
                tokens: int = 8, micro: int = 0, steps: int = 3) -> dict:
    return {"preset": preset, "task": "arithmetic", "total_steps": steps, "prompts_per_step": prompts,
            "group_size": group, "max_new_tokens": tokens, "micro_batch_size": micro, "nproc_per_node": 2,
            "strategy": strategy, "seed": seed, "device": "cpu", "samples_per_step": 1}


def random_case(seed: int) -> dict:
    """A case drawn from ``seed``: strategy, preset (dapo: dynamic sampling), prompts, group size, completion
    length and micro-batch size; one in four with groups of 16 and up to 72 tokens. (The tiny model's arithmetic
    answers end after a few tokens, so no pack here passes ``PACK_MAX_TOKENS``: that layout's one call is
    ``tests/training/test_completion_forward.py: test_single_call_is_one_model_call_whatever_the_rows...``.)"""
    rnd = random.Random(seed)
    long = rnd.random() < 0.25
    return case_config(seed, rnd.choice(["fsdp", "ddp"]), preset=rnd.choice(["dapo", "dapo", "grpo"]),
                       prompts=rnd.choice([2, 4]) if long else rnd.choice([2, 4, 6]),
                       group=16 if long else rnd.choice([2, 4, 8]), tokens=72 if long else rnd.choice([4, 8, 16]),
                       micro=0 if long else rnd.choice([0, 0, 2, 3]))


def run_case(config: dict, limit_s: float = LIMIT_S) -> dict:
    """Run ``config`` through the CLI in its own process group; killed (every rank with it) at ``limit_s``.
    Returns {"ended": bool, "code", "wall_s", "steps": {step: metrics}, "tail": the end of its output}."""
    with tempfile.TemporaryDirectory(prefix="seedbed-dist-case-") as tmp:
        path, out = os.path.join(tmp, "config.json"), os.path.join(tmp, "out")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(config, fh)
        env = {**os.environ, "PYTHONPATH": REPO, "SEEDBED_TORCH_THREADS": "1"}
        started = time.monotonic()
        with open(os.path.join(tmp, "log"), "w+", encoding="utf-8") as log:
            proc = subprocess.Popen([sys.executable, "-m", "training", "run", path, "--out", out], cwd=REPO,
                                    env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                code, ended = proc.wait(timeout=limit_s), True
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                code, ended = proc.wait(), False
            log.seek(0)
            tail = log.read()[-3000:]
        steps = {}
        if os.path.exists(os.path.join(out, "metrics.jsonl")):
            with open(os.path.join(out, "metrics.jsonl"), encoding="utf-8") as fh:
                for line in fh:
                    row = json.loads(line)
                    steps[row["step"]] = row
        return {"ended": ended, "code": code, "wall_s": time.monotonic() - started, "steps": steps, "tail": tail}


def assert_case_ends(config: dict, result: dict) -> None:
    assert result["ended"], f"{config}: still running after {LIMIT_S} s (a hang):\n{result['tail']}"
    assert result["code"] == 0, f"{config}: exit code {result['code']}:\n{result['tail']}"
    assert sorted(result["steps"]) == list(range(1, config["total_steps"] + 1)), result["tail"]
    for step, metrics in result["steps"].items():  # (a step with no informative group trains nothing: no grad_norm)
        assert math.isfinite(metrics.get("grad_norm", 0.0)) and math.isfinite(metrics["reward/mean"]), (step, metrics)


@pytest.mark.parametrize("config", [
    case_config(2, "fsdp"),              # dynamic sampling keeps 1 group on one rank, 2 on the other: hung at step 1
    case_config(3, "fsdp", micro=3),     # hung at step 3
    case_config(2, "ddp", micro=2),
], ids=["fsdp-seed2", "fsdp-seed3-micro3", "ddp-seed2-micro2"])
def test_two_rank_runs_end_with_their_metrics_whatever_each_rank_holds(tiny_model_dir, config):
    assert_case_ends(config, run_case(config))
