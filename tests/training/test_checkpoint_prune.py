"""Checkpoint retention of the CLI (training.checkpoint.prune_checkpoints): keep_checkpoints' newest N whole
checkpoints stay, older ones go, a folder being written is left alone; a real CLI run checkpointing every step
keeps its newest 3 by default (b1d04b3 kept every one)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import REPO, tiny_config
from training.checkpoint import checkpoint_dir, latest_checkpoint, prune_checkpoints



def make(out, step: int, whole: bool = True) -> None:
    folder = os.path.join(checkpoint_dir(str(out)), f"step_{step:06d}" + ("" if whole else ".tmp"))
    os.makedirs(folder)
    if whole:
        open(os.path.join(folder, "trainer_state.pt"), "wb").close()


def test_the_newest_whole_checkpoints_stay(tmp_path):
    for step in (1, 2, 3, 4, 5):
        make(tmp_path, step)
    make(tmp_path, 6, whole=False)
    assert prune_checkpoints(str(tmp_path), 0) == []
    assert prune_checkpoints(str(tmp_path), 3) == [1, 2]
    assert sorted(os.listdir(checkpoint_dir(str(tmp_path)))) == ["step_000003", "step_000004", "step_000005",
                                                                 "step_000006.tmp"]
    assert latest_checkpoint(str(tmp_path))[0] == 5
    assert prune_checkpoints(str(tmp_path / "none"), 3) == []


def test_a_cli_run_keeps_its_newest_three_by_default(tmp_path, tiny_model_dir):
    config = tmp_path / "run.json"
    config.write_text(json.dumps(tiny_config(total_steps=5, checkpoint_every=1)))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "training", "run", str(config), "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(os.listdir(checkpoint_dir(str(out)))) == ["step_000003", "step_000004", "step_000005"]
