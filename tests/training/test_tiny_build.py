"""The built-in tiny model is built once, by whichever process asks first, and appears whole or not at all.

These builds stop at the first held-out check (band (0, 1)), so each takes seconds; the real band is what
``./seedbed test``'s set-up builds and every other test uses.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import threading

import pytest

from tests.conftest import REPO, tiny_config, wait_for
from tests.training.conftest import ListSink
from training.tiny import ensure_tiny_model, tiny_build_state, tiny_model_ready

QUICK = {"band": (0.0, 1.0)}


def build_in_subprocess(out: str, log_file) -> subprocess.Popen:
    code = ("import sys; from training.tiny import ensure_tiny_model; "
            f"ensure_tiny_model(sys.argv[1], band=(0.0, 1.0), log=lambda s: print(s, flush=True))")
    return subprocess.Popen([sys.executable, "-c", code, out], cwd=REPO, stdout=log_file, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": str(REPO)})


def test_two_processes_asking_at_once_build_it_once(tmp_path):
    out = str(tmp_path / "models" / "tiny")
    logs = [open(tmp_path / f"p{i}.log", "w+") for i in range(2)]
    procs = [build_in_subprocess(out, log) for log in logs]
    for proc in procs:
        assert proc.wait(timeout=300) == 0
    texts = [(tmp_path / f"p{i}.log").read_text() for i in range(2)]
    assert sum("building the built-in tiny model" in t for t in texts) == 1, texts
    assert tiny_model_ready(out)
    assert {"config.json", "model.safetensors", "tokenizer.json", "seedbed_bootstrap.json"} <= set(os.listdir(out))
    assert tiny_build_state(out) == {"state": "ready"}
    leftovers = [name for name in os.listdir(tmp_path / "models") if name.startswith(".tiny-build-")]
    assert leftovers == [] and not os.path.exists(out + ".progress.json")
    assert ensure_tiny_model(out, log=lambda s: None) is None  # already there: nothing built


def test_a_build_that_died_leaves_nothing_that_looks_ready_and_the_next_one_cleans_up(tmp_path):
    out = str(tmp_path / "tiny")
    staging = tmp_path / ".tiny-build-dead"
    staging.mkdir()
    (staging / "config.json").write_text("{}")  # what a build killed while saving leaves behind
    (tmp_path / "tiny.lock").write_text("")
    assert tiny_build_state(out)["state"] == "missing"  # the lock file exists but nobody holds it
    info = ensure_tiny_model(out, log=lambda s: None, **QUICK)
    assert info["sft_steps"] == 25 and tiny_model_ready(out)
    assert not staging.exists()


def test_the_build_state_reports_progress_while_another_process_holds_the_lock(tmp_path):
    out = str(tmp_path / "tiny")
    with open(out + ".lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        (tmp_path / "tiny.progress.json").write_text(json.dumps({"step": 75, "pass1": 0.05, "target": 0.15}))
        state = tiny_build_state(out)
    assert state == {"state": "building", "step": 75, "pass1": 0.05, "target": 0.15}


def test_a_run_on_the_built_in_model_waits_for_the_build_then_trains(tmp_path, tiny_model_dir, monkeypatch):
    """train() with an empty model_path waits while another process builds the model, then starts."""
    from training.config import TrainConfig
    from training.loop import train
    from training.sink import NullSink

    target = str(tmp_path / "models" / "tiny")
    os.makedirs(os.path.dirname(target))
    monkeypatch.setenv("SEEDBED_TINY_MODEL", target)
    cfg = TrainConfig.from_dict(tiny_config(total_steps=2))  # accepted although the model is not built yet
    assert cfg.resolved_model_path() == target
    sink, result = ListSink(), {}
    with open(target + ".lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # "another process" is building it
        worker = threading.Thread(target=lambda: result.update(r=train(cfg, str(tmp_path / "run"), sink)))
        worker.start()
        wait_for(lambda: any("waiting" in line for line in sink.logs), timeout=30, what="the run to wait for the build")
        assert not result and worker.is_alive()
        staging = tmp_path / "models" / ".tiny-build-copy"
        shutil.copytree(tiny_model_dir, staging)
        os.rename(staging, target)  # what the building process does last
    worker.join(timeout=120)
    assert result["r"].status == "succeeded" and result["r"].step == 2
    assert not any("building the built-in" in line for line in sink.logs)
    assert [step for step, _ in sink.metrics] == [1, 2]


def test_the_config_accepts_the_built_in_model_before_it_is_built_but_not_a_missing_named_folder(tmp_path,
                                                                                                 monkeypatch):
    from training.config import TrainConfig
    from training.fields import FieldErrors

    monkeypatch.setenv("SEEDBED_TINY_MODEL", str(tmp_path / "not-built-yet"))
    TrainConfig.from_dict({"preset": "grpo"})
    with pytest.raises(FieldErrors) as info:
        TrainConfig.from_dict({"preset": "grpo", "model_path": str(tmp_path / "not-built-yet")})
    assert "no such folder" in info.value.errors["model_path"]
