"""A run's log carries no progress bars: the training child (forked from a slot that imported transformers already)
silences transformers', huggingface_hub's and tqdm's bars before it loads its models (workers.runner
.silence_progress_bars). Checked on a real model load in a real process writing to a log file, as the child does;
the same load without it draws "Loading weights: 0%|...", so the check can fail."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

QUIET_SWITCHES = ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS", "HF_DATASETS_DISABLE_PROGRESS_BARS")

LOAD = """
import sys, tempfile
import transformers  # as the slot preloads it before forking the run's child
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM
if sys.argv[1] == "child":
    from workers.runner import silence_progress_bars
    silence_progress_bars()
folder = tempfile.mkdtemp(dir=sys.argv[2])  # (a checkpoint's save draws a bar too: "Writing model shards")
LlamaForCausalLM(LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                             num_key_value_heads=2, vocab_size=64)).save_pretrained(folder)
AutoModelForCausalLM.from_pretrained(folder)
AutoModelForCausalLM.from_pretrained(folder)  # (a run loads its policy and its reference)
print("loaded", flush=True)
"""


@pytest.mark.parametrize("how", ["child", "without"])
def test_a_model_load_in_the_training_child_draws_no_progress_bar(how, tmp_path):
    log = tmp_path / "worker.log"
    with open(log, "w") as out:
        # a clean environment: a run started earlier in this test process may have set the switches it checks
        env = {k: v for k, v in os.environ.items() if k not in QUIET_SWITCHES}
        done = subprocess.run([sys.executable, "-c", LOAD, how, str(tmp_path)], cwd=REPO, stdout=out,
                              stderr=subprocess.STDOUT, timeout=240, env=env)
    text = log.read_text()
    assert done.returncode == 0 and "loaded" in text, text[-2000:]
    if how == "child":
        assert "Loading weights" not in text and "%|" not in text, text
    else:  # the bar the child silences
        assert text.count("Loading weights") >= 2
