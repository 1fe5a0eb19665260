"""Guards against silent waste (training.silent_run), fed by hand and through the CLI's sink on a real run built to
fail that way: the tiny arithmetic model answers with bare digits, which the math verifier (it wants a final
answer marker such as \\boxed{}) never rewards."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO, tiny_config
from training.silent_run import NO_SIGNAL, ZERO_REWARD, SilentRunGuard


def feed(guard, steps, reward, zero_std=1.0, reason="no final answer found"):
    for s in steps:
        guard.on_metrics(s, {"reward/mean": reward, "frac_zero_std_groups": zero_std})
        guard.on_samples(s, [{"details": {"math": {"reason": reason}}}, {"details": {"math": {"reason": "other"}}}])


def test_zero_reward_is_raised_after_the_first_steps_with_the_most_common_reason():
    guard = SilentRunGuard(steps=3)
    feed(guard, [1, 2], 0.0)
    assert guard.warnings() == []  # not before the third step
    feed(guard, [3], 0.0)
    (w,) = guard.warnings()
    assert w["kind"] == ZERO_REWARD and w["step"] == 3
    assert w["reason"] == 'math: "no final answer found" in 50 % of the logged samples'
    assert guard.warnings() == []  # once


def test_one_rewarded_step_means_no_warning_and_equal_groups_are_no_learning_signal():
    guard = SilentRunGuard(steps=3)
    feed(guard, [1, 3], 0.0)
    feed(guard, [2], 0.0625, zero_std=0.75)
    assert guard.warnings() == []
    easy = SilentRunGuard(steps=2)
    feed(easy, [1, 2], 1.0)  # every sample right: every group equal, nothing to learn
    assert [w["kind"] for w in easy.warnings()] == [NO_SIGNAL]


def test_a_resumed_run_logs_its_steps_again():
    guard = SilentRunGuard(steps=2)
    feed(guard, [1, 2], 0.25, zero_std=0.5)
    guard.forget_after(1)
    feed(guard, [2], 0.0)
    assert guard.warnings() == []  # step 1 was rewarded


def test_the_cli_prints_the_warning_and_writes_it(tmp_path, tiny_model_dir):
    config = tmp_path / "run.json"
    config.write_text(json.dumps(tiny_config(total_steps=6, rewards=[{"name": "math", "weight": 1.0}])))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "training", "run", str(config), "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "WARNING: reward 0 for every sample in the first 5 steps" in proc.stderr
    (w,) = [json.loads(line) for line in open(out / "warnings.jsonl")]
    assert w["kind"] == ZERO_REWARD and w["reason"].startswith('math: "no final answer found" in 100 %'), w
