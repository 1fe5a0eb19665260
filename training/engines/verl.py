"""``engine: verl``: verl's PPO trainer (``python -m verl.trainer.main_ppo``), a process Seedbed owns (docs/architecture.md#engines-and-distribution).

A verl run, step by step (``run_verl``):
1. the task becomes verl's parquet files in the run's folder (``write_verl_data``): each row a chat prompt, its
   ground truth, and in ``extra_info`` the Seedbed example and reward spec that ``verl_reward.compute_score``
   (verl's custom reward function, a module Seedbed ships) scores with Seedbed's own verifiers;
2. the run's knobs become hydra overrides (``verl_settings``: one table, knob -> verl key); a knob verl has no
   counterpart for is a field error (``verl_errors``), never dropped. Before anything starts, the overrides are
   composed with verl's own ``ppo_trainer`` config (``compose_verl_config``: hydra on CPU), so a key verl's
   schema lacks fails the launch, not step 1 on the GPUs;
3. verl starts under ``run_process`` with ``VERL_FILE_LOGGER_PATH`` = the run's events file: verl's own ``file``
   logger writes ``{"step": N, "data": {...}}`` there, and Seedbed tails it;
4. what verl leaves in files rather than in its log, its checkpoints (``latest_checkpointed_iteration.txt``) and
   its rollout dumps (``trainer.rollout_data_dir``), reach the sink as each step's metrics arrive (``VerlProgress``);
5. verl has no cooperative stop: a stop is SIGTERM to its process group at once and SIGKILL ``TERM_S`` later (Ray
   starts its workers in process groups of their own; they share the fate of the Ray node verl started, which dies
   with verl). The next attempt resumes from verl's last checkpoint (``trainer.resume_mode=auto``; saved every
   ``checkpoint_every`` steps, else only at the end).

The python that runs verl is the operator's: ``$SEEDBED_VERL_PYTHON`` (a venv with verl, its GPU stack and
Seedbed's verifier dependencies), else this interpreter. A run's config never names it. Seedbed's own venv holds
verl without its dependencies (pyproject's ``no-deps``): its config files, for ``compose_verl_config``.
"""
from __future__ import annotations

import importlib.util
import json
import math
import os
import sys

from training.engines import METRICS_FROM_EVENTS, Engine, one_node_lacks
from training.engines.events import MAX_TEXT
from training.engines.process import EVENTS_FILE, inside, run_process
from training.sink import NullSink

VERL_PYTHON_ENV = "SEEDBED_VERL_PYTHON"
VERL_MAIN = "verl.trainer.main_ppo"
CHECKPOINT_DIR = "checkpoints"  # verl's trainer.default_local_dir: global_step_N/ and the file below
LATEST_FILE = "latest_checkpointed_iteration.txt"
ROLLOUT_DIR = "rollouts"  # verl's trainer.rollout_data_dir: <step>.jsonl per step
TRAIN_FILE, VAL_FILE = "verl_train.parquet", "verl_val.parquet"
REWARD_MODULE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "verl_reward.py")
GRACE_S, TERM_S = 0.0, 10.0  # verl ignores the stop file: SIGTERM at once, SIGKILL 10 s later
DEFAULT_PROMPT_LENGTH = 1024  # data.max_prompt_length until run_verl has measured the prompts
MAX_GENERATED_ROWS = 100_000  # rows written for a generated task (arithmetic, countdown); verl cycles epochs
NO_DUAL_CLIP = 1e9  # verl always dual-clips; its ratio is at most e^20 (log-ratios clamped at ±20) < 1e9: never binds

#: Seedbed knobs verl has no counterpart for: under engine verl each must keep its default.
LACKS = {
    "unbiased_kl": "its KL loss has no pi_theta/pi_old-weighted k3 (its 'k3+' is a different gradient fix)",
    "opsm_delta": "it has no off-policy sequence masking",
    "keep_sampling_mask": "it does not keep the top-p/top-k sampling mask",
    "keep_routing": "it replays MoE routes only with its Megatron backend; Seedbed runs verl with FSDP",
    "overlong_filtering": "it does not mask truncated completions",
    "max_gen_batches": "its dynamic sampling generates until the batch is full, with no bound",
    "max_verifier_error_rate": "it cannot leave an unjudged completion out: a verifier error fails the run",
    "stop": "it samples without stop strings",
    "eval_k": "its validation logs its own best@k/mean@k (k = 1, 2, 4, ... up to eval_n)",
    "precision": "its FSDP workers choose their own mixed precision",
    "micro_batch_size": "its workers choose their own micro-batches (ppo_micro_batch_size_per_gpu)",
    "gradient_checkpointing": "its FSDP workers choose their own (enable_gradient_checkpointing)",
}


def verl_config_dir() -> str | None:
    """verl's installed ``verl/trainer/config`` folder (found without importing verl), or None."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = os.path.join(list(spec.submodule_search_locations)[0], "trainer", "config")
    return folder if os.path.isfile(os.path.join(folder, "ppo_trainer.yaml")) else None


def verl_python() -> str:
    """The interpreter that runs verl: the operator's $SEEDBED_VERL_PYTHON, else this one."""
    return os.environ.get(VERL_PYTHON_ENV) or sys.executable


def verl_available() -> bool:
    """verl is installed and this server has a CUDA GPU (or the operator named a verl python, e.g. on a web
    server whose GPU workers run verl)."""
    if verl_config_dir() is None:
        return False
    if os.environ.get(VERL_PYTHON_ENV):
        return True
    return nvidia_gpu_present()


def nvidia_gpu_present() -> bool:
    """An NVIDIA driver with at least one GPU, read from the driver's files: the web process answers this for
    its forms without importing torch (seconds and hundreds of MB it otherwise never needs)."""
    return os.path.isfile("/proc/driver/nvidia/version") and any(
        name.startswith("nvidia") and name[len("nvidia"):].isdigit() for name in os.listdir("/dev"))


def hydra_safe(text: str) -> bool:
    """A string Seedbed can pass inside a quoted hydra override as it is (no quote, backslash, interpolation)."""
    return not any(c in text for c in "'\\$\n\r")


def verl_errors(cfg) -> dict[str, str]:
    """Field errors of ``cfg`` under engine verl: values verl cannot run, and verl's availability on this server
    (the knobs verl lacks, ``LACKS``, are the registry's: ``ENGINE.lacks``)."""
    e: dict[str, str] = {}
    if not verl_available():
        e["engine"] = "verl needs verl and a CUDA GPU on this server"
    if cfg.rollout_engine != "vllm":
        e["rollout_engine"] = "the verl engine samples with vLLM: set vllm"
    if cfg.device == "cpu":
        e["device"] = "the verl engine trains on CUDA GPUs: use auto or cuda"
    if cfg.chat_template == "off":
        e["chat_template"] = "verl renders every prompt with the model's chat template: use auto or on"
    if cfg.adv_estimator == "reinforce_pp_baseline" and not cfg.norm_adv_by_std:
        e["norm_adv_by_std"] = "verl's reinforce_plus_plus_baseline always whitens its advantages"
    batch = cfg.prompts_per_step * cfg.group_size
    mini = cfg.minibatch_size or batch
    if min(batch, mini, cfg.nproc_per_node) < 1:
        pass  # out of range: the field's own error says so
    elif mini % cfg.group_size or batch % mini:
        e["minibatch_size"] = (f"verl updates on whole prompt groups: 0, or a multiple of group_size "
                               f"({cfg.group_size}) that divides the batch ({batch} completions)")
    elif mini % cfg.nproc_per_node:
        e["nproc_per_node"] = f"verl splits each minibatch ({mini} completions) evenly over the GPUs: use a divisor"
    if not hydra_safe(cfg.model_path):
        e["model_path"] = "the verl engine passes paths to hydra: no quote, backslash or '$'"
    return e


def verl_settings(cfg, out_dir: str, *, prompt_length: int = DEFAULT_PROMPT_LENGTH) -> dict[str, object]:
    """The verl config values of a Seedbed config, as {hydra key: value} (a leading ``+`` adds a key verl's
    schema leaves open). Knob -> verl key:

        (always)              trainer.logger [console, file]; default_local_dir <run>/checkpoints; resume_mode
                              auto; nnodes 1; device cuda; val_before_train false; rollout.name vllm with
                              tensor_model_parallel_size 1; actor.use_dynamic_bsz (micro-batches by tokens);
                              actor.checkpoint.save_contents + hf_model (a loadable model per checkpoint);
                              reward.custom_reward_function -> training/engines/verl_reward.py:compute_score
        model_path            actor_rollout_ref.model.path
        task, data knobs      data.train_files / val_files (written by write_verl_data)
        nproc_per_node        trainer.n_gpus_per_node
        total_steps           trainer.total_training_steps (and total_epochs, so epochs never end it first)
        checkpoint_every      trainer.save_freq (0: total_steps, i.e. at the end only)
        eval_every            trainer.test_freq (0: -1)
        eval_n, temperature…  actor_rollout_ref.rollout.val_kwargs.{n, do_sample, temperature, top_p, top_k}
        samples_per_step      trainer.rollout_data_dir (<run>/rollouts; 0: none)
        seed                  data.seed, actor.data_loader_seed, rollout.seed
        prompts_per_step      data.train_batch_size
        group_size            actor_rollout_ref.rollout.n
        max_new_tokens        data.max_response_length, actor.loss_scale_factor (Dr. GRPO's L_max)
        (measured prompts)    data.max_prompt_length
        temperature, top_p    actor_rollout_ref.rollout.temperature, top_p
        top_k                 actor_rollout_ref.rollout.top_k (0 -> -1, off)
        adv_estimator         algorithm.adv_estimator (grpo, rloo; reinforce_pp_baseline ->
                              reinforce_plus_plus_baseline, which whitens over the batch's tokens)
        norm_adv_by_std       algorithm.norm_adv_by_std_in_grpo
        eps_low, eps_high     actor.clip_ratio_low, clip_ratio_high
        dual_clip             actor.clip_ratio_c (off -> NO_DUAL_CLIP, a cap that never binds)
        loss_agg              actor.loss_agg_mode (same names)
        kl_coef, kl_estimator actor.use_kl_loss (kl_coef > 0), kl_loss_coef, kl_loss_type (k1, k2, k3: same names)
        ppo_epochs            actor.ppo_epochs
        minibatch_size        actor.ppo_mini_batch_size (in prompts: completions / group_size; 0: the batch)
        lr, warmup_steps      actor.optim.lr, lr_warmup_steps
        weight_decay          actor.optim.weight_decay
        max_grad_norm         actor.optim.clip_grad (0, off -> inf: torch's clip then never scales)
        dynamic_sampling      algorithm.filter_groups.enable, metric reward (groups with equal rewards dropped)
        overlong_buffer_len,  reward.reward_manager.name dapo, +reward.reward_kwargs.max_resp_len and
        overlong_penalty_factor  .overlong_buffer_cfg {enable, len, penalty_factor} (DAPO's soft overlong penalty)

    ``actor`` stands for ``actor_rollout_ref.actor``.
    """
    actor, rollout = "actor_rollout_ref.actor", "actor_rollout_ref.rollout"
    out_dir = os.path.abspath(out_dir)
    batch = cfg.prompts_per_step * cfg.group_size
    s: dict[str, object] = {
        "trainer.logger": ["console", "file"],
        "trainer.project_name": "seedbed",
        "trainer.experiment_name": "run",
        "trainer.default_local_dir": os.path.join(out_dir, CHECKPOINT_DIR),
        "trainer.resume_mode": "auto",
        "trainer.save_freq": cfg.checkpoint_every or cfg.total_steps,
        "trainer.total_training_steps": cfg.total_steps,
        "trainer.total_epochs": cfg.total_steps,
        "trainer.n_gpus_per_node": cfg.nproc_per_node,
        "trainer.nnodes": 1,
        "trainer.device": "cuda",
        "trainer.val_before_train": False,
        "trainer.test_freq": cfg.eval_every or -1,
        "trainer.rollout_data_dir": os.path.join(out_dir, ROLLOUT_DIR) if cfg.samples_per_step else None,
        "data.train_files": os.path.join(out_dir, TRAIN_FILE),
        "data.val_files": os.path.join(out_dir, VAL_FILE),
        "data.train_batch_size": cfg.prompts_per_step,
        "data.max_prompt_length": prompt_length,
        "data.max_response_length": cfg.max_new_tokens,
        "data.seed": cfg.seed,
        "actor_rollout_ref.model.path": os.path.abspath(cfg.resolved_model_path()),
        f"{actor}.optim.lr": cfg.lr,
        f"{actor}.optim.lr_warmup_steps": cfg.warmup_steps,
        f"{actor}.optim.weight_decay": cfg.weight_decay,
        f"{actor}.optim.clip_grad": cfg.max_grad_norm or math.inf,
        f"{actor}.ppo_epochs": cfg.ppo_epochs,
        f"{actor}.ppo_mini_batch_size": (cfg.minibatch_size or batch) // cfg.group_size,
        f"{actor}.use_dynamic_bsz": True,
        f"{actor}.ppo_max_token_len_per_gpu": max(16384, prompt_length + cfg.max_new_tokens),
        f"{actor}.clip_ratio_low": cfg.eps_low,
        f"{actor}.clip_ratio_high": cfg.eps_high,
        f"{actor}.clip_ratio_c": cfg.dual_clip if cfg.dual_clip is not None else NO_DUAL_CLIP,
        f"{actor}.loss_agg_mode": cfg.loss_agg,
        f"{actor}.loss_scale_factor": cfg.max_new_tokens,
        f"{actor}.use_kl_loss": cfg.kl_coef > 0,
        f"{actor}.kl_loss_coef": cfg.kl_coef,
        f"{actor}.kl_loss_type": cfg.kl_estimator,
        f"{actor}.data_loader_seed": cfg.seed,
        f"{actor}.checkpoint.save_contents": ["model", "optimizer", "extra", "hf_model"],
        f"{rollout}.name": "vllm",
        f"{rollout}.tensor_model_parallel_size": 1,
        f"{rollout}.n": cfg.group_size,
        f"{rollout}.temperature": cfg.temperature,
        f"{rollout}.top_p": cfg.top_p,
        f"{rollout}.top_k": cfg.top_k or -1,
        f"{rollout}.seed": cfg.seed,
        f"{rollout}.val_kwargs.n": cfg.eval_n,
        f"{rollout}.val_kwargs.do_sample": True,
        f"{rollout}.val_kwargs.temperature": cfg.temperature,
        f"{rollout}.val_kwargs.top_p": cfg.top_p,
        f"{rollout}.val_kwargs.top_k": cfg.top_k or -1,
        "algorithm.adv_estimator": {"reinforce_pp_baseline": "reinforce_plus_plus_baseline"}.get(
            cfg.adv_estimator, cfg.adv_estimator),
        "algorithm.norm_adv_by_std_in_grpo": cfg.norm_adv_by_std,
        "algorithm.use_kl_in_reward": False,
        "algorithm.filter_groups.enable": cfg.dynamic_sampling,
        "algorithm.filter_groups.metric": "reward",
        "reward.custom_reward_function.path": REWARD_MODULE,
        "reward.custom_reward_function.name": "compute_score",
    }
    if cfg.overlong_buffer_len:
        s.update({"reward.reward_manager.name": "dapo",
                  "+reward.reward_kwargs.max_resp_len": cfg.max_new_tokens,
                  "+reward.reward_kwargs.overlong_buffer_cfg.enable": True,
                  "+reward.reward_kwargs.overlong_buffer_cfg.len": cfg.overlong_buffer_len,
                  "+reward.reward_kwargs.overlong_buffer_cfg.penalty_factor": cfg.overlong_penalty_factor,
                  "+reward.reward_kwargs.overlong_buffer_cfg.log": False})
    return s


def hydra_value(value) -> str:
    """A value as hydra's override grammar reads it back.

    >>> [hydra_value(v) for v in (True, None, 3, 0.28, math.inf, "/runs/7 a", ["console", "file"])]
    ['true', 'null', '3', '0.28', 'inf', "'/runs/7 a'", '[console,file]']
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "inf" if value == math.inf else repr(value)
    if isinstance(value, list):
        return "[" + ",".join(value) + "]"
    if not hydra_safe(value):
        raise ValueError(f"cannot pass {value!r} to hydra: no quote, backslash or '$'")
    return f"'{value}'"


def verl_overrides(cfg, out_dir: str, *, prompt_length: int = DEFAULT_PROMPT_LENGTH) -> list[str]:
    """``verl_settings`` as hydra overrides, ``key=value``."""
    return [f"{key}={hydra_value(value)}" for key, value in
            verl_settings(cfg, out_dir, prompt_length=prompt_length).items()]


def verl_command(cfg, out_dir: str, *, prompt_length: int = DEFAULT_PROMPT_LENGTH) -> list[str]:
    return [verl_python(), "-m", VERL_MAIN, *verl_overrides(cfg, out_dir, prompt_length=prompt_length)]


class VerlConfigError(ValueError):
    """verl's own config refuses Seedbed's overrides (or verl is not installed)."""


def compose_verl_config(overrides: list[str]) -> dict:
    """verl's ``ppo_trainer`` config with ``overrides`` applied, composed by hydra as ``main_ppo`` does (on CPU,
    nothing of verl's imported), as a resolved dict. A key verl's schema lacks raises VerlConfigError."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    folder = verl_config_dir()
    if folder is None:
        raise VerlConfigError("verl is not installed here (./seedbed setup installs its config files)")
    try:
        with initialize_config_dir(config_dir=folder, version_base=None):
            composed = compose(config_name="ppo_trainer", overrides=list(overrides))
        return OmegaConf.to_container(composed, resolve=True)
    except (HydraException, OmegaConfBaseException) as exc:
        raise VerlConfigError(f"verl's config refuses Seedbed's overrides: {exc}") from exc


# --- the task as verl's data ------------------------------------------------------------------------------

def verl_rows(cfg, examples) -> list[dict]:
    """verl's rows for Seedbed examples: the chat prompt (the run's system prompt and answer instruction, as
    the seedbed engine gives them), the ground truth, and what verl_reward.compute_score needs in extra_info
    (the example and the reward spec as JSON: rows of one file share one schema whatever the task's fields)."""
    from training.data import default_rewards

    template = cfg.prompt_template()
    spec = json.dumps(cfg.rewards or default_rewards(cfg.task))
    rows = []
    for i, ex in enumerate(examples):
        system = ex.get("system_prompt") if isinstance(ex.get("system_prompt"), str) else template.system_prompt
        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": template.user_text(ex["prompt"])}]
        answer = "" if ex.get("answer") is None else str(ex["answer"])
        rows.append({"data_source": "seedbed", "prompt": messages,
                     "reward_model": {"style": "rule", "ground_truth": answer},
                     "extra_info": {"index": i, "example": json.dumps(ex, default=str), "rewards": spec}})
    return rows


def write_verl_data(cfg, out_dir: str, tokenizer=None) -> int:
    """Write the run's training and held-out problems as verl's parquet files; returns the longest prompt in
    tokens (rendered with the model's chat template, which verl applies). A data set smaller than one batch is
    repeated (Seedbed samples with replacement; verl needs a full batch per step)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from training.data import prompt_source
    from training.tasks import tasks

    source = prompt_source(cfg)
    if source.examples is None:  # a generated task: enough rows for the whole run (verl shuffles them)
        n = max(cfg.prompts_per_step, min(cfg.total_steps * cfg.prompts_per_step, MAX_GENERATED_ROWS))
        example = tasks()[cfg.task].example
        train = [example(i) for i in range(n)]
    else:
        train = list(source.examples)
    train = train * -(-cfg.prompts_per_step // max(1, len(train)))
    val = source.eval_set(cfg.eval_problems)
    if tokenizer is None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(cfg.resolved_model_path())
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("the verl engine renders prompts with the model's chat template; the model has none")
    longest = 1
    for name, examples in ((TRAIN_FILE, train), (VAL_FILE, val)):
        rows = verl_rows(cfg, examples)
        for row in rows:
            text = tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
            longest = max(longest, len(tokenizer.encode(text, add_special_tokens=False)))
        pq.write_table(pa.Table.from_pylist(rows), os.path.join(out_dir, name))
    return longest


# --- what verl leaves in files -----------------------------------------------------------------------------

def latest_checkpoint_step(out_dir: str) -> int | None:
    """The step of verl's last complete checkpoint in the run's folder (its latest_checkpointed_iteration.txt)."""
    try:
        with open(os.path.join(out_dir, CHECKPOINT_DIR, LATEST_FILE), encoding="utf-8") as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def checkpoint_model_dir(out_dir: str, step: int) -> str:
    """The loadable model of verl's checkpoint ``step`` (global_step_N/actor/huggingface, when it holds weights),
    else the checkpoint folder itself."""
    folder = os.path.join(out_dir, CHECKPOINT_DIR, f"global_step_{step}")
    hf = os.path.join(folder, "actor", "huggingface")
    has_weights = os.path.isdir(hf) and any(n.endswith((".safetensors", ".bin")) for n in os.listdir(hf))
    return hf if has_weights and os.path.isfile(os.path.join(hf, "config.json")) else folder


def read_rollouts(path: str, limit: int) -> list[dict]:
    """The first ``limit`` complete lines of verl's rollout dump of one step as Seedbed samples."""
    rows = []
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if len(rows) >= limit or not line.endswith("\n"):
                    break
                obj = json.loads(line)
                score = obj.get("score")
                rows.append({"prompt": str(obj.get("input", ""))[:MAX_TEXT],
                             "completion": str(obj.get("output", ""))[:MAX_TEXT],
                             "reward": float(score) if isinstance(score, (int, float)) else 0.0,
                             "details": {"ground_truth": str(obj.get("gts"))[:MAX_TEXT]}})
    except (OSError, ValueError):
        pass
    return rows


class VerlProgress(NullSink):
    """The run's sink, plus verl's files: when step N's metrics arrive (verl logs a step after saving its
    checkpoint and queueing its rollout dump), a new checkpoint goes to ``on_checkpoint`` and the rollouts of
    the steps before N to ``on_samples``; ``flush`` (the end) collects the rest."""

    def __init__(self, sink, out_dir: str, samples_per_step: int, resumed_at: int = 0):
        self.sink, self.out_dir, self.limit = sink, os.path.abspath(out_dir), samples_per_step
        self.recorded = resumed_at  # the last checkpoint step the sink has
        self.pending: list[int] = []  # steps whose rollouts are still to be read

    def on_metrics(self, step, metrics):
        self.sink.on_metrics(step, metrics)
        self._collect(before=step)
        self.pending.append(step)

    def on_samples(self, step, rows):
        self.sink.on_samples(step, rows)

    def on_checkpoint(self, step, path):
        self.sink.on_checkpoint(step, path)

    def on_log(self, line):
        self.sink.on_log(line)

    def truncate_after(self, step):
        self.sink.truncate_after(step)

    def on_engine_config(self, config):
        self.sink.on_engine_config(config)

    def flush(self):
        self._collect(before=None)
        self.sink.flush()

    def _collect(self, before: int | None) -> None:
        ready = [s for s in self.pending if before is None or s < before]
        self.pending = [s for s in self.pending if s not in ready]
        for s in ready:
            rows = read_rollouts(os.path.join(self.out_dir, ROLLOUT_DIR, f"{s}.jsonl"), self.limit)
            if rows:
                self.sink.on_samples(s, rows)
        step = latest_checkpoint_step(self.out_dir)
        if step is not None and step > self.recorded:
            path = checkpoint_model_dir(self.out_dir, step)
            if inside(path, self.out_dir) and os.path.isdir(path):
                self.recorded = step
                self.sink.on_checkpoint(step, os.path.realpath(path))


def verl_env(out_dir: str) -> dict:
    """verl's environment: this one, with verl's file logger writing straight into the events file Seedbed tails."""
    return {**os.environ, "VERL_FILE_LOGGER_PATH": os.path.join(os.path.abspath(out_dir), EVENTS_FILE)}


def run_verl(cfg, out_dir: str, sink, should_stop):
    """Train ``cfg`` with verl (see the module's docstring); returns (status, last step)."""
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    prompt_length = write_verl_data(cfg, out_dir)
    overrides = verl_overrides(cfg, out_dir, prompt_length=prompt_length)
    composed = compose_verl_config(overrides)  # verl's schema checks every key before any GPU is touched
    sink.on_engine_config(composed)
    resumed_at = latest_checkpoint_step(out_dir) or 0
    sink.truncate_after(resumed_at)  # verl resumes from its last checkpoint; the steps after it are redone
    sink.on_log(f"verl: {'resuming after step ' + str(resumed_at) if resumed_at else 'starting'}; "
                f"prompts up to {prompt_length} tokens")
    return run_process([verl_python(), "-m", VERL_MAIN, *overrides], out_dir=out_dir,
                       sink=VerlProgress(sink, out_dir, cfg.samples_per_step, resumed_at), should_stop=should_stop,
                       env=verl_env(out_dir), grace_s=GRACE_S, term_s=TERM_S)


ENGINE = Engine(
    name="verl", label="verl: verl's trainer (GPU)", run=run_verl, order=20,
    lacks={**one_node_lacks("verl"),
           **{name: f"the verl engine has no {name}: {why}; use engine seedbed" for name, why in LACKS.items()}},
    errors=verl_errors, available=verl_available,
    launch=f"$SEEDBED_VERL_PYTHON -m {VERL_MAIN} with hydra overrides, a process group Seedbed owns",
    metrics=METRICS_FROM_EVENTS + " (verl's own file logger)", resolved_config="verl's resolved config",
    version=("verl_version", "verl"))
