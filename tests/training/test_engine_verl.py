"""engine: verl, the parts that run without a GPU: the command and verl's own config composed from it, the knobs
verl lacks as field errors, the task as verl's parquet scored by Seedbed's verifiers, ingestion of what verl's own
``Tracking`` file logger writes (and of its checkpoint and rollout files), and the kill of a process tree."""
import dataclasses
import importlib.util
import json
import os
import sys
import time

import pytest

from training.config import TrainConfig
from training.engines import verl
from training.engines.events import EventReader
from training.engines.process import EVENTS_FILE, STOP_FILE, run_process
from training.fields import FieldErrors

from .conftest import ListSink


def verl_config(**knobs) -> TrainConfig:
    """A valid Seedbed config moved to engine verl (from_dict would refuse verl here: no GPU)."""
    cfg = TrainConfig.from_dict({"rollout_engine": "vllm", "model_path": "/srv/seedbed/models/qwen", **knobs},
                                check_paths=False)
    return dataclasses.replace(cfg, engine="verl")


def tracking_file() -> str:
    """verl's own verl/utils/tracking.py (the installed package's file)."""
    return os.path.join(importlib.util.find_spec("verl").submodule_search_locations[0], "utils", "tracking.py")


def load_tracking():
    # verl's package __init__ imports ray and tensordict (its GPU stack, not installed here): its tracking module
    # is loaded from its file, unchanged; it needs only orjson and packaging
    spec = importlib.util.spec_from_file_location("verl_tracking", tracking_file())
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- the command and its composed config ----------------------------------------------------------------------

def test_command_composes_into_verls_config_with_seedbeds_values(tmp_path, monkeypatch):
    monkeypatch.delenv(verl.VERL_PYTHON_ENV, raising=False)
    cfg = dataclasses.replace(verl_config(preset="dapo", prompts_per_step=6, group_size=4, minibatch_size=12,
                                          max_new_tokens=64, overlong_buffer_len=16, checkpoint_every=5,
                                          total_steps=30, top_k=20, eval_every=10, eval_n=4, seed=7, lr=3e-6),
                              nproc_per_node=2)
    command = verl.verl_command(cfg, str(tmp_path), prompt_length=300)
    assert command[:3] == [sys.executable, "-m", "verl.trainer.main_ppo"]
    c = verl.compose_verl_config(command[3:])
    actor, rollout, trainer = c["actor_rollout_ref"]["actor"], c["actor_rollout_ref"]["rollout"], c["trainer"]
    assert trainer["logger"] == ["console", "file"]
    assert trainer["default_local_dir"] == str(tmp_path / "checkpoints")
    assert (trainer["save_freq"], trainer["total_training_steps"], trainer["resume_mode"]) == (5, 30, "auto")
    assert (trainer["n_gpus_per_node"], trainer["nnodes"], trainer["test_freq"]) == (2, 1, 10)
    assert trainer["rollout_data_dir"] == str(tmp_path / "rollouts")
    assert c["actor_rollout_ref"]["model"]["path"] == "/srv/seedbed/models/qwen"
    assert (c["data"]["train_batch_size"], c["data"]["max_prompt_length"]) == (6, 300)
    assert c["data"]["train_files"] == str(tmp_path / verl.TRAIN_FILE)
    assert (rollout["n"], rollout["response_length"], rollout["top_k"], rollout["name"]) == (4, 64, 20, "vllm")
    assert rollout["val_kwargs"]["n"] == 4 and rollout["val_kwargs"]["do_sample"] is True
    assert (actor["clip_ratio_low"], actor["clip_ratio_high"]) == (cfg.eps_low, cfg.eps_high) == (0.2, 0.28)
    assert actor["clip_ratio_c"] == verl.NO_DUAL_CLIP  # dual clip off
    assert (actor["loss_agg_mode"], actor["use_kl_loss"]) == ("token-mean", False)  # the dapo preset
    assert actor["ppo_mini_batch_size"] == 3  # 12 completions = 3 prompt groups of 4
    assert (actor["optim"]["lr"], actor["optim"]["weight_decay"], actor["data_loader_seed"]) == (3e-6, 0.0, 7)
    assert "hf_model" in actor["checkpoint"]["save_contents"]
    assert c["algorithm"]["filter_groups"]["enable"] is True
    assert c["reward"]["reward_manager"]["name"] == "dapo"
    assert c["reward"]["reward_kwargs"] == {"max_resp_len": 64, "overlong_buffer_cfg": {
        "enable": True, "len": 16, "penalty_factor": 1.0, "log": False}}
    reward_fn = c["reward"]["custom_reward_function"]
    assert os.path.isfile(reward_fn["path"]) and reward_fn["name"] == "compute_score"

    monkeypatch.setenv(verl.VERL_PYTHON_ENV, "/opt/verl/venv/bin/python")
    assert verl.verl_command(cfg, str(tmp_path))[0] == "/opt/verl/venv/bin/python"


def test_grpo_knobs_map_onto_verls_names(tmp_path):
    cfg = verl_config(adv_estimator="reinforce_pp_baseline", kl_coef=0.05, kl_estimator="k2", dual_clip=3.5,
                      loss_agg="seq-mean-token-sum-norm", max_grad_norm=0.0, max_new_tokens=40, warmup_steps=3,
                      samples_per_step=0)
    c = verl.compose_verl_config(verl.verl_overrides(cfg, str(tmp_path)))
    actor = c["actor_rollout_ref"]["actor"]
    assert c["algorithm"]["adv_estimator"] == "reinforce_plus_plus_baseline"
    assert (actor["use_kl_loss"], actor["kl_loss_coef"], actor["kl_loss_type"]) == (True, 0.05, "k2")
    assert (actor["clip_ratio_c"], actor["loss_agg_mode"], actor["loss_scale_factor"]) == (
        3.5, "seq-mean-token-sum-norm", 40)
    assert actor["optim"]["clip_grad"] == float("inf") and actor["optim"]["lr_warmup_steps"] == 3
    assert c["trainer"]["save_freq"] == cfg.total_steps and c["trainer"]["rollout_data_dir"] is None
    assert c["reward"]["reward_manager"]["name"] == "naive" and "reward_kwargs" not in c["reward"]


# --- what verl's schema and Seedbed refuse --------------------------------------------------------------------

def test_a_key_verls_schema_lacks_is_refused(tmp_path):
    overrides = verl.verl_overrides(verl_config(), str(tmp_path))
    with pytest.raises(verl.VerlConfigError, match="clip_ratio_hi"):
        verl.compose_verl_config(overrides + ["actor_rollout_ref.actor.clip_ratio_hi=0.3"])
    with pytest.raises(verl.VerlConfigError, match="max_respone_length"):
        verl.compose_verl_config(overrides + ["data.max_respone_length=10"])


def test_knobs_verl_lacks_are_field_errors_naming_the_engine():
    with pytest.raises(FieldErrors) as caught:
        TrainConfig.from_dict({"engine": "verl", "rollout_engine": "vllm", "unbiased_kl": True, "opsm_delta": 0.5},
                              check_paths=False)
    errors = caught.value.errors
    assert "the verl engine has no unbiased_kl" in errors["unbiased_kl"]
    assert "the verl engine has no opsm_delta" in errors["opsm_delta"]
    if not verl.verl_available():
        assert errors["engine"] == "verl needs verl and a CUDA GPU on this server"


def test_verl_errors_maps_what_verl_has_and_refuses_the_rest():
    ok = verl_config(preset="dapo", adv_estimator="rloo", kl_coef=0.1, kl_estimator="k1", dual_clip=3.0,
                     minibatch_size=16, ppo_epochs=2)
    assert {k: v for k, v in verl.ENGINE.config_errors(ok).items() if k != "engine"} == {}  # its rules and lacks
    bad = dataclasses.replace(ok, keep_routing=True, keep_sampling_mask=True, overlong_filtering=True,
                              max_gen_batches=5, stop=["</answer>"], eval_k=[1], max_verifier_error_rate=0.5,
                              rollout_engine="hf", device="cpu", chat_template="off", minibatch_size=6,
                              adv_estimator="reinforce_pp_baseline", norm_adv_by_std=False,
                              model_path="/srv/it's")
    errors = verl.ENGINE.config_errors(bad)
    errors.pop("engine", None)
    assert set(errors) == {"keep_routing", "keep_sampling_mask", "overlong_filtering", "max_gen_batches", "stop",
                           "eval_k", "max_verifier_error_rate", "rollout_engine", "device", "chat_template",
                           "minibatch_size", "norm_adv_by_std", "model_path"}
    assert errors["keep_routing"].startswith("the verl engine has no keep_routing")
    assert errors["keep_routing"].endswith("use engine seedbed")
    uneven = dataclasses.replace(ok, nproc_per_node=3)  # 64 completions over 3 GPUs
    assert "nproc_per_node" in verl.verl_errors(uneven)


# --- the task as verl's data, scored by Seedbed's verifiers ---------------------------------------------------

def test_task_becomes_verls_parquet_scored_by_seedbeds_verifiers(tmp_path, tiny_model_dir):
    import pyarrow.parquet as pq
    from transformers import AutoTokenizer

    from training.engines.verl_reward import compute_score

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.chat_template = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}<assistant>"
    cfg = verl_config(task="arithmetic", total_steps=3, prompts_per_step=4, eval_problems=5,
                      system_prompt="Be brief.")
    longest = verl.write_verl_data(cfg, str(tmp_path), tokenizer)
    train = pq.read_table(tmp_path / verl.TRAIN_FILE).to_pylist()
    val = pq.read_table(tmp_path / verl.VAL_FILE).to_pylist()
    assert (len(train), len(val)) == (12, 5)
    row = train[0]
    assert [m["role"] for m in row["prompt"]] == ["system", "user"] and row["prompt"][0]["content"] == "Be brief."
    example = json.loads(row["extra_info"]["example"])
    assert row["reward_model"]["ground_truth"] == example["answer"]
    text = tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
    assert longest >= len(tokenizer.encode(text, add_special_tokens=False)) > 0
    right = compute_score(row["data_source"], example["answer"], row["reward_model"]["ground_truth"],
                          row["extra_info"])
    wrong = compute_score(row["data_source"], example["answer"] + "9", row["reward_model"]["ground_truth"],
                          row["extra_info"])
    assert (right["score"], wrong["score"]) == (1.0, 0.0)


# --- ingestion of what verl writes ------------------------------------------------------------------------------

def test_lines_of_verls_own_file_logger_are_read_as_metrics(tmp_path, monkeypatch):
    import numpy as np

    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / EVENTS_FILE))
    tracking = load_tracking().Tracking(project_name="seedbed", experiment_name="run", default_backend=["file"])
    logged = {1: {"actor/pg_loss": -0.25, "critic/score/mean": np.float32(0.5), "response_length/mean": 12},
              2: {"actor/pg_loss": 0.125, "critic/score/mean": np.float64(0.75), "response_length/mean": 9}}
    for step, data in logged.items():
        tracking.log(data={**data, "val/generations": "a table, not a number"}, step=step)
    tracking.finish()
    events, problems = EventReader(str(tmp_path / EVENTS_FILE)).read()
    assert problems == []
    assert {ev.step: ev.metrics for ev in events} == {
        step: {k: float(v) for k, v in data.items()} for step, data in logged.items()}


FAKE_VERL = r'''
"""verl's loop as far as Seedbed sees it: rollouts dumped, a checkpoint saved, then the step logged by verl's own
Tracking file logger (VERL_FILE_LOGGER_PATH, from Seedbed)."""
import importlib.util, json, os, sys

spec = importlib.util.spec_from_file_location("verl_tracking", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
tracking = module.Tracking(project_name="seedbed", experiment_name="run", default_backend=["file"])
os.makedirs("rollouts", exist_ok=True)
for step in (1, 2, 3):
    with open(f"rollouts/{step}.jsonl", "w") as fh:
        for i in range(3):
            fh.write(json.dumps({"input": f"q{step}", "output": f"a{i}", "gts": "4", "score": i / 2,
                                 "step": step}) + "\n")
    if step == 2:
        hf = "checkpoints/global_step_2/actor/huggingface"
        os.makedirs(hf)
        for name in ("config.json", "model.safetensors"):
            open(os.path.join(hf, name), "w").close()
        with open("checkpoints/latest_checkpointed_iteration.txt", "w") as fh:
            fh.write("2")
    tracking.log(data={"critic/score/mean": step / 4, "actor/lr": 1e-6}, step=step)
tracking.finish()
'''


def test_verls_log_checkpoints_and_rollouts_reach_the_sink(tmp_path):
    script = tmp_path / "fake_verl.py"
    script.write_text(FAKE_VERL)
    out = tmp_path / "run"
    sink = ListSink()
    status, step = run_process([sys.executable, str(script), tracking_file()], out_dir=str(out),
                               sink=verl.VerlProgress(sink, str(out), samples_per_step=2),
                               should_stop=lambda: False, env=verl.verl_env(str(out)), poll_s=0.05)
    assert (status, step) == ("succeeded", 3)
    assert sink.metrics == [(s, {"critic/score/mean": s / 4, "actor/lr": 1e-6}) for s in (1, 2, 3)]
    hf = os.path.realpath(out / "checkpoints" / "global_step_2" / "actor" / "huggingface")
    assert sink.checkpoints == [(2, hf)] and verl.latest_checkpoint_step(str(out)) == 2
    assert [(s, [(r["completion"], r["reward"]) for r in rows]) for s, rows in sink.samples] == [
        (s, [("a0", 0.0), ("a1", 0.5)]) for s in (1, 2, 3)]


# --- kill of the process tree -----------------------------------------------------------------------------------

TREE = r'''
"""A leader that starts a child that starts a grandchild; none reads the stop file; the leader and the
grandchild ignore SIGTERM (like a trainer busy in a CUDA call), so only SIGKILL ends them."""
import os, signal, subprocess, sys, time

role, pids = sys.argv[1], sys.argv[2]
if role in ("leader", "grandchild"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
after = {"leader": "child", "child": "grandchild"}.get(role)
if after:
    subprocess.Popen([sys.executable, __file__, after, pids])
with open(os.path.join(pids, role), "w") as fh:
    fh.write(str(os.getpid()))
while True:
    time.sleep(0.05)
'''


def gone(pid: int) -> bool:
    """No such process, or a zombie nobody reaped yet (it runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_stop_kills_the_whole_process_tree(tmp_path):
    script, pids, out = tmp_path / "tree.py", tmp_path / "pids", tmp_path / "run"
    script.write_text(TREE)
    pids.mkdir()
    roles = ("leader", "child", "grandchild")
    sink = ListSink()
    started = time.monotonic()
    status, _ = run_process([sys.executable, str(script), "leader", str(pids)], out_dir=str(out), sink=sink,
                            should_stop=lambda: all((pids / r).exists() for r in roles),
                            grace_s=verl.GRACE_S, term_s=0.5, poll_s=0.05)
    assert status == "stopped" and time.monotonic() - started < 20
    assert (out / STOP_FILE).exists()
    assert any("SIGTERM" in line for line in sink.logs)
    tree = [int((pids / r).read_text()) for r in roles]
    deadline = time.monotonic() + 5
    while not all(gone(pid) for pid in tree) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in tree if not gone(pid)] == []
