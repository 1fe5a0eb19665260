"""``engine: trl``: TRL's ``GRPOTrainer`` as a Seedbed run.

The run's process (the worker's training child) starts ``torchrun --standalone --nproc-per-node N -m
training.engines.entry.trl <run folder>`` in its own process group (``training.engines.process``); every rank
builds the trainer from the run's Seedbed config (``trl_args``: Seedbed's knobs mapped onto ``GRPOConfig``),
with Seedbed's verifiers as reward functions, and rank 0's callback streams metrics, samples, checkpoints
and the resolved ``GRPOConfig`` through the JSONL event contract. A stop request (the stop file) is agreed by
all ranks at the end of a Seedbed step; they save a checkpoint and exit.

One Seedbed step is one rollout batch (``prompts_per_step`` × ``group_size`` completions). TRL counts optimizer
steps, so one Seedbed step is ``updates_per_step`` = ``ppo_epochs`` × minibatches of TRL's (its
``num_iterations`` × ``steps_per_generation``); logging, saving and stopping happen on those boundaries.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import sys

from training.engines import METRICS_FROM_EVENTS, Engine, one_node_lacks
from training.engines.process import run_process

# Seedbed's loss aggregation -> TRL's loss_type (trl/trainer/grpo_trainer.py, _compute_loss): "grpo" averages
# each sequence's tokens then the sequences; "dapo" averages over all active tokens of the global batch;
# "dr_grpo" sums and divides by a constant (max_completion_length × sequences).
LOSS_TYPES = {"seq-mean-token-mean": "grpo", "token-mean": "dapo", "seq-mean-token-sum-norm": "dr_grpo"}

# TRL's logged names -> Seedbed's (docs/architecture.md#the-training-core); the raw names are kept too, under trl/
METRIC_NAMES = {
    "reward": "reward/mean", "reward_std": "reward/std", "frac_reward_zero_std": "frac_zero_std_groups",
    "entropy": "entropy", "completions/mean_length": "length/mean", "completions/max_length": "length/max",
    "completions/clipped_ratio": "length/clipped_frac", "clip_ratio/low_mean": "clip/low_frac",
    "clip_ratio/high_mean": "clip/high_frac", "kl": "kl", "grad_norm": "grad_norm", "learning_rate": "lr",
    "loss": "loss/policy", "accuracy": "accuracy", "verifier/errors": "verifier/errors",
}
_REWARD_FN = re.compile(r"^rewards/(.+)/mean$")


def trl_installed() -> bool:
    return importlib.util.find_spec("trl") is not None


def minibatch(cfg) -> tuple[int, int]:
    """(sequences per optimizer step, optimizer steps per epoch over a rollout batch)."""
    batch = cfg.prompts_per_step * cfg.group_size
    size = cfg.minibatch_size or batch
    return size, max(1, batch // size)


def updates_per_step(cfg) -> int:
    """TRL optimizer steps per Seedbed step (one rollout batch)."""
    return cfg.ppo_epochs * minibatch(cfg)[1]


_LACKS_TEXT = "the trl engine (TRL's GRPOTrainer) has no {what}; use engine seedbed"

#: Seedbed knobs TRL's GRPOTrainer does not have: under engine trl each must keep its default
LACKS = {
    **one_node_lacks("trl"),
    "dual_clip": _LACKS_TEXT.format(what="dual clip (its delta is an upper bound on the ratio, not dual clip)"),
    "keep_sampling_mask": _LACKS_TEXT.format(what="keep sampling mask"),
    "keep_routing": _LACKS_TEXT.format(what="keep routing"),
    "dynamic_sampling": _LACKS_TEXT.format(what="dynamic sampling"),
    "stop": _LACKS_TEXT.format(what="stop strings"),
    "micro_batch_size": _LACKS_TEXT.format(what="micro_batch_size here (each process takes its minibatch in one "
                                                "pass; gradient_checkpointing lowers its memory)"),
}


def trl_errors(cfg) -> dict[str, str]:
    """Field errors for the values TRL's GRPOTrainer cannot run (beyond the knobs it lacks, ``LACKS``)."""
    e: dict[str, str] = {}
    if not trl_installed():
        e["engine"] = "trl is not installed on this server (pip install trl, the version in pyproject.toml)"
    if cfg.adv_estimator != "grpo":
        e["adv_estimator"] = _LACKS_TEXT.format(what=f"{cfg.adv_estimator} advantage estimator (only grpo's group "
                                                     "baseline)")
    if cfg.kl_estimator != "k3":
        e["kl_estimator"] = _LACKS_TEXT.format(what=f"{cfg.kl_estimator} KL estimator (it estimates KL with k3)")
    size, _ = minibatch(cfg)
    batch = cfg.prompts_per_step * cfg.group_size
    if batch % size:
        e["minibatch_size"] = (f"the trl engine needs a minibatch that divides the rollout batch (prompts_per_step × "
                               f"group_size = {batch}); got {size}")
    elif size % cfg.nproc_per_node:
        e["nproc_per_node"] = (f"the trl engine splits each minibatch ({size} sequences) evenly over its processes; "
                               f"{cfg.nproc_per_node} does not divide it")
    return e


def trl_args(cfg, out_dir: str) -> dict:
    """The ``GRPOConfig`` keyword arguments for a Seedbed config (every mapped knob, nothing left to TRL's
    defaults that Seedbed has a value for):

    loss_agg → loss_type · eps_low/eps_high → epsilon/epsilon_high · kl_coef → beta · unbiased_kl →
    use_bias_correction_kl · opsm_delta → off_policy_mask_threshold · norm_adv_by_std → scale_rewards
    (group | none) · group_size → num_generations · prompts_per_step × group_size → generation_batch_size ·
    minibatch_size → per_device_train_batch_size × processes, steps_per_generation · ppo_epochs →
    num_iterations · max_new_tokens → max_completion_length · temperature, top_p, top_k · lr → learning_rate ·
    warmup_steps (× updates per step), constant schedule after it · weight_decay · max_grad_norm ·
    total_steps (× updates per step) → max_steps · seed · overlong_filtering → mask_truncated_completions ·
    rollout_engine vllm → use_vllm (colocated) · checkpoint_every → save_steps · device cpu → use_cpu ·
    precision bf16 → bf16 (autocast, float32 weights, as the seedbed engine's) ·
    gradient_checkpointing → activation_checkpointing (off by default, as in Seedbed's loop; TRL's default is on).
    Overlong shaping is Seedbed's own reward term (training.engines.entry.trl), the same formula as the loop's.
    """
    ups = updates_per_step(cfg)
    size, n_minibatches = minibatch(cfg)
    use_cpu = cfg.device == "cpu" or (cfg.device == "auto" and not _cuda())
    return {
        "output_dir": os.path.join(out_dir, "checkpoints"),
        "loss_type": LOSS_TYPES[cfg.loss_agg], "epsilon": cfg.eps_low, "epsilon_high": cfg.eps_high,
        "beta": cfg.kl_coef, "use_bias_correction_kl": cfg.unbiased_kl, "off_policy_mask_threshold": cfg.opsm_delta,
        "scale_rewards": "group" if cfg.norm_adv_by_std else "none",
        "num_generations": cfg.group_size,
        "per_device_train_batch_size": size // cfg.nproc_per_node, "gradient_accumulation_steps": 1,
        "steps_per_generation": n_minibatches, "num_iterations": cfg.ppo_epochs,
        "max_completion_length": cfg.max_new_tokens, "temperature": cfg.temperature, "top_p": cfg.top_p,
        "top_k": cfg.top_k, "learning_rate": cfg.lr, "lr_scheduler_type": "constant_with_warmup",
        "warmup_steps": cfg.warmup_steps * ups, "weight_decay": cfg.weight_decay, "max_grad_norm": cfg.max_grad_norm,
        "max_steps": cfg.total_steps * ups, "seed": cfg.seed, "data_seed": cfg.seed,
        "mask_truncated_completions": cfg.overlong_filtering,
        "use_vllm": cfg.rollout_engine == "vllm", "vllm_mode": "colocate",
        "logging_steps": ups, "save_strategy": "steps",
        "save_steps": (cfg.checkpoint_every or cfg.total_steps) * ups,
        # TRL turns activation checkpointing on by default; Seedbed's loop keeps activations unless
        # gradient_checkpointing, so the same config does the same compute on both engines (and a tiny model's step
        # is 15-20 % faster without it)
        "activation_checkpointing": cfg.gradient_checkpointing,
        "use_cpu": use_cpu, "bf16": cfg.precision == "bf16", "fp16": False,
        "report_to": "none", "disable_tqdm": True, "log_completions": False, "dataloader_num_workers": 0,
    }


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def latest_trl_checkpoint(out_dir: str) -> tuple[int, str] | None:
    """(TRL global step, folder) of the newest complete TRL checkpoint of the run (its trainer_state.json is
    written last), or None."""
    root = os.path.join(out_dir, "checkpoints")
    found = []
    for name in os.listdir(root) if os.path.isdir(root) else ():
        m = re.match(r"^checkpoint-(\d+)$", name)
        if m and os.path.isfile(os.path.join(root, name, "trainer_state.json")):
            found.append((int(m.group(1)), os.path.join(root, name)))
    return max(found) if found else None


def map_metrics(logs: dict) -> dict[str, float]:
    """TRL's logged values under Seedbed's names (docs/architecture.md#the-training-core), each raw name kept under trl/.

    >>> m = map_metrics({"reward": 0.5, "rewards/math/mean": 0.25, "completions/mean_length": 7.0, "epoch": 1})
    >>> m["reward/mean"], m["reward/math/mean"], m["length/mean"], m["trl/reward"], "epoch" in m
    (0.5, 0.25, 7.0, 0.5, False)
    """
    out: dict[str, float] = {}
    for key, value in logs.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or key == "epoch":
            continue
        out[f"trl/{key}"] = float(value)
        if key in METRIC_NAMES:
            out[METRIC_NAMES[key]] = float(value)
        elif (m := _REWARD_FN.match(key)):
            out[f"reward/{m.group(1)}/mean"] = float(value)
    return out


def trl_command(cfg, out_dir: str) -> list[str]:
    from training.ranks import TORCHRUN_MODULE

    return [sys.executable, "-m", TORCHRUN_MODULE, "--standalone", "--nproc-per-node",
            str(cfg.nproc_per_node), "-m", "training.engines.entry.trl", out_dir]


def run_trl(cfg, out_dir: str, sink, should_stop):
    """Run (or resume, from the newest checkpoint the run recorded) a TRL run; returns (status, step)."""
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "seedbed_config.json"), "w", encoding="utf-8") as fh:
        json.dump(cfg.to_dict(), fh, indent=2, sort_keys=True)
    if not cfg.model_path:  # the built-in tiny model: the first run that needs it builds it
        from training.tiny import ensure_tiny_model

        ensure_tiny_model(cfg.resolved_model_path(), log=sink.on_log)
    resume = latest_trl_checkpoint(out_dir)
    start = resume[0] // updates_per_step(cfg) if resume else 0
    sink.truncate_after(start)
    sink.on_log(f"{'resuming at step ' + str(start) if resume else 'starting'}: {cfg.total_steps} steps with "
                f"TRL's GRPOTrainer on {cfg.nproc_per_node} process(es)")
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", os.environ.get("SEEDBED_TORCH_THREADS", "1"))
    env["SEEDBED_TRL_RESUME"] = resume[1] if resume else ""
    from training.data import default_rewards
    from training.verifiers.judge import export_endpoints

    judges = os.path.join(out_dir, "judge_endpoints.json")
    if export_endpoints(cfg.rewards or default_rewards(cfg.task), judges):  # the ranks have no database
        env["SEEDBED_JUDGE_ENDPOINTS"] = judges
    env["PYTHONPATH"] = os.pathsep.join([_project_root(), *filter(None, [env.get("PYTHONPATH")])])
    status, step = run_process(trl_command(cfg, out_dir), out_dir=out_dir, sink=sink, should_stop=should_stop,
                               env=env, on_engine_config=sink.on_engine_config)
    return status, max(step, start)


def _project_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


ENGINE = Engine(
    name="trl", label="trl: TRL's GRPOTrainer, under torchrun", run=run_trl, order=10, lacks=LACKS,
    errors=trl_errors, available=trl_installed,
    launch="torchrun --standalone --nproc-per-node N -m training.engines.entry.trl, a process group Seedbed owns",
    metrics=METRICS_FROM_EVENTS + " (rank 0's trainer callback)",
    resolved_config="TRL's resolved GRPOConfig", version=("trl_version", "TRL"))
