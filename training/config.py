"""The one training config schema.

The web form, the REST API, the CLI's YAML file, the worker and every checkpoint use this schema. Every knob
is a dataclass field whose ``metadata["help"]`` is its docstring (the form shows it as help text). Unknown
keys and invalid values are rejected with the field named: ``ConfigError.errors`` maps field -> message.

Presets (``grpo``, ``dapo``, ``dr_grpo``) are plain sets of knob values applied before the user's own values.
"""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from typing import Any, Optional, get_args, get_origin

CHOICES: dict[str, tuple[str, ...]] = {
    "preset": ("grpo", "dapo", "dr_grpo"),
    "task": ("arithmetic", "countdown", "file"),
    "rollout_engine": ("hf", "vllm"),
    "adv_estimator": ("grpo", "rloo", "reinforce_pp_baseline"),
    "loss_agg": ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"),
    "kl_estimator": ("k1", "k2", "k3"),
    "device": ("auto", "cpu", "cuda"),
}


class ConfigError(ValueError):
    """Invalid config. ``errors`` maps each bad field name to a precise message."""

    def __init__(self, errors: dict[str, str]):
        self.errors = dict(errors)
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.errors.items()))


def _f(default: Any, help: str, **kw: Any) -> Any:
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: json.loads(json.dumps(d)), metadata={"help": help, **kw})
    return field(default=default, metadata={"help": help, **kw})


@dataclass
class TrainConfig:
    """One run's complete configuration (one seed of one config)."""

    # --- what to train on -------------------------------------------------------------------------
    preset: str = _f("grpo", "Algorithm preset applied before your own values: grpo (DeepSeekMath), dapo "
                     "(Clip-Higher, dynamic sampling, token-level loss, overlong shaping) or dr_grpo (no std "
                     "normalisation, length-unbiased loss).")
    model_path: str = _f("", "Local Hugging Face model folder (config.json + weights + tokenizer). Nothing is "
                         "downloaded. Empty means the built-in tiny model ($SEEDBED_TINY_MODEL or var/models/tiny).")
    task: str = _f("arithmetic", "Built-in task (arithmetic, countdown) or 'file' for your own JSONL/Parquet data.")
    data_path: str = _f("", "Training data file (.jsonl or .parquet) when task is 'file'.")
    prompt_field: str = _f("prompt", "Field of each data row holding the prompt text.")
    answer_field: str = _f("answer", "Field of each data row holding the reference answer given to the verifier.")
    rewards: list = _f([], "Reward spec: a list of {\"name\": verifier, \"weight\": w, \"params\": {...}}; "
                       "rewards are the weighted sum. Empty means the task's own verifier.")
    max_verifier_error_rate: float = _f(0.1, "Fail the run when more than this share of a step's completions "
                                         "could not be judged (VerifierError).")
    seed: int = _f(0, "Random seed (data order, sampling, initialisation of anything random).")

    # --- rollouts ----------------------------------------------------------------------------------
    total_steps: int = _f(40, "Number of training steps (one rollout batch each).")
    prompts_per_step: int = _f(8, "Prompts per rollout batch.")
    group_size: int = _f(8, "Completions sampled per prompt (G); advantages are relative within a group.")
    max_new_tokens: int = _f(8, "Maximum completion length in tokens (L_max).")
    temperature: float = _f(1.0, "Sampling temperature.")
    top_p: float = _f(1.0, "Nucleus sampling: keep the smallest token set with this probability mass, in (0, 1].")
    top_k: int = _f(0, "Keep only the k most likely tokens when sampling (0 = off).")
    rollout_engine: str = _f("hf", "Rollout engine: hf (transformers generate, CPU or GPU) or vllm (GPU, "
                             "optional 'gpu' extra).")

    # --- advantages and loss -----------------------------------------------------------------------
    adv_estimator: str = _f("grpo", "Advantage estimator: grpo (group mean/std), rloo (leave-one-out mean) or "
                            "reinforce_pp_baseline (group mean, batch std).")
    norm_adv_by_std: bool = _f(True, "Divide GRPO advantages by the group std (false = Dr. GRPO).")
    eps_low: float = _f(0.2, "Lower clip range: ratio clipped at 1 - eps_low.")
    eps_high: float = _f(0.2, "Upper clip range: ratio clipped at 1 + eps_high (DAPO Clip-Higher: 0.28).")
    dual_clip: Optional[float] = _f(None, "Dual-clip constant c > 1 capping the loss of negative-advantage tokens "
                                    "at -c*A (empty = off).")
    loss_agg: str = _f("seq-mean-token-mean", "Loss aggregation: token-mean (DAPO), seq-mean-token-mean (GRPO) "
                       "or seq-mean-token-sum-norm (Dr. GRPO).")
    kl_coef: float = _f(0.0, "KL penalty coefficient beta toward the reference (initial) model; 0 = no reference.")
    kl_estimator: str = _f("k3", "KL estimator: k1, k2 or k3.")
    unbiased_kl: bool = _f(False, "DeepSeek-V3.2 unbiased KL: weight the k3 estimate by pi_theta/pi_old.")
    opsm_delta: Optional[float] = _f(None, "Off-policy sequence masking (DeepSeek-V3.2): drop a negative-advantage "
                                     "sequence whose mean log(pi_old/pi_theta) exceeds delta (empty = off).")
    keep_sampling_mask: bool = _f(False, "Keep sampling mask (DeepSeek-V3.2): renormalise pi_theta over the "
                                  "tokens top-p/top-k kept when sampling.")
    keep_routing: bool = _f(False, "Keep routing (MoE models): replay the experts chosen during sampling in the "
                            "training forward.")
    dynamic_sampling: bool = _f(False, "DAPO dynamic sampling: drop groups whose rewards are all equal and sample "
                                "more prompts until the batch is full.")
    max_gen_batches: int = _f(3, "Dynamic sampling: at most this many generation batches per step.")
    overlong_buffer_len: int = _f(0, "DAPO overlong shaping: soft penalty over the last L_cache tokens before "
                                  "max_new_tokens (0 = off).")
    overlong_penalty_factor: float = _f(1.0, "Overlong shaping: penalty reached at max_new_tokens.")
    overlong_filtering: bool = _f(False, "Mask truncated completions (no EOS within max_new_tokens) from the loss.")

    # --- optimisation ------------------------------------------------------------------------------
    lr: float = _f(1e-4, "AdamW learning rate.")
    warmup_steps: int = _f(0, "Linear learning-rate warm-up steps.")
    weight_decay: float = _f(0.0, "AdamW weight decay.")
    max_grad_norm: float = _f(1.0, "Gradient clipping norm (0 = off).")
    ppo_epochs: int = _f(1, "Passes over each rollout batch (updates after the first are off-policy).")
    minibatch_size: int = _f(0, "Sequences per optimizer step (0 = the whole batch in one step).")

    # --- bookkeeping -------------------------------------------------------------------------------
    checkpoint_every: int = _f(0, "Save a checkpoint every N steps (0 = only at the end and on stop).")
    samples_per_step: int = _f(4, "Completions logged per step (shown in the UI).")
    eval_every: int = _f(0, "Evaluate pass@k on held-out problems every N steps (0 = off).")
    eval_problems: int = _f(32, "Held-out problems for periodic evaluation.")
    eval_n: int = _f(8, "Samples per held-out problem for periodic evaluation.")
    eval_k: list = _f([1, 4], "k values logged as eval/pass@k.")
    device: str = _f("auto", "auto, cpu or cuda.")

    # ------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict, *, check_paths: bool = True) -> "TrainConfig":
        """Build and validate a config: preset values first, then ``data``; raises ConfigError."""
        if not isinstance(data, dict):
            raise ConfigError({"config": f"expected a mapping of knobs, got {type(data).__name__}"})
        names = {f.name: f for f in dataclasses.fields(cls)}
        errors: dict[str, str] = {}
        for key in data:
            if key not in names:
                errors[key] = f"unknown key {key!r}"
        preset = data.get("preset", "grpo")
        if preset not in PRESETS:
            errors["preset"] = f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}"
            preset = "grpo"
        values = {**PRESETS[preset], **{k: v for k, v in data.items() if k in names}}
        kwargs = {}
        for name, f in names.items():
            if name not in values:
                continue
            try:
                kwargs[name] = _coerce(values[name], f.type)
            except (TypeError, ValueError) as exc:
                errors[name] = str(exc)
        if errors:
            raise ConfigError(errors)
        cfg = cls(**kwargs)
        cfg.validate(check_paths=check_paths)
        return cfg

    @classmethod
    def from_file(cls, path: str) -> "TrainConfig":
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        if path.endswith((".yaml", ".yml")):
            import yaml
            data = yaml.safe_load(text) or {}
        else:
            data = json.loads(text)
        return cls.from_dict(data)

    def resolved_model_path(self) -> str:
        return self.model_path or default_tiny_model_dir()

    def validate(self, *, check_paths: bool = True) -> None:
        e: dict[str, str] = {}
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                e[name] = f"must be one of {', '.join(allowed)}; got {getattr(self, name)!r}"
        positive_ints = ("total_steps", "prompts_per_step", "max_new_tokens", "max_gen_batches", "ppo_epochs",
                         "eval_problems", "eval_n")
        for name in positive_ints:
            if getattr(self, name) < 1:
                e[name] = f"must be at least 1; got {getattr(self, name)}"
        for name in ("top_k", "warmup_steps", "minibatch_size", "checkpoint_every", "samples_per_step",
                     "eval_every", "overlong_buffer_len"):
            if getattr(self, name) < 0:
                e[name] = f"must be 0 or more; got {getattr(self, name)}"
        if self.group_size < 2:
            e["group_size"] = f"must be at least 2 (advantages compare completions within a group); got {self.group_size}"
        if not self.lr > 0:
            e["lr"] = f"must be > 0; got {self.lr}"
        if not 0 < self.top_p <= 1:
            e["top_p"] = f"must lie in (0, 1]; got {self.top_p}"
        if not self.temperature > 0:
            e["temperature"] = f"must be > 0; got {self.temperature}"
        if not 0 <= self.eps_low < 1:
            e["eps_low"] = f"must lie in [0, 1); got {self.eps_low}"
        if self.eps_high < self.eps_low:
            e["eps_high"] = f"must be >= eps_low ({self.eps_low}); got {self.eps_high}"
        if self.dual_clip is not None and not self.dual_clip > 1:
            e["dual_clip"] = f"must be > 1 (or empty for off); got {self.dual_clip}"
        if self.kl_coef < 0:
            e["kl_coef"] = f"must be >= 0; got {self.kl_coef}"
        if self.unbiased_kl and self.kl_estimator != "k3":
            e["unbiased_kl"] = "the unbiased KL form applies to the k3 estimator only"
        if self.opsm_delta is not None and self.opsm_delta < 0:
            e["opsm_delta"] = f"must be >= 0 (or empty for off); got {self.opsm_delta}"
        if self.overlong_buffer_len >= self.max_new_tokens and self.overlong_buffer_len > 0:
            e["overlong_buffer_len"] = (f"must be smaller than max_new_tokens ({self.max_new_tokens}); "
                                        f"got {self.overlong_buffer_len}")
        if self.overlong_penalty_factor < 0:
            e["overlong_penalty_factor"] = f"must be >= 0; got {self.overlong_penalty_factor}"
        if not 0 <= self.max_verifier_error_rate <= 1:
            e["max_verifier_error_rate"] = f"must lie in [0, 1]; got {self.max_verifier_error_rate}"
        if self.weight_decay < 0:
            e["weight_decay"] = f"must be >= 0; got {self.weight_decay}"
        if self.max_grad_norm < 0:
            e["max_grad_norm"] = f"must be >= 0; got {self.max_grad_norm}"
        if self.seed < 0:
            e["seed"] = f"must be >= 0; got {self.seed}"
        if any((not isinstance(k, int)) or k < 1 for k in self.eval_k):
            e["eval_k"] = f"must be a list of integers >= 1; got {self.eval_k}"
        elif self.eval_k and max(self.eval_k) > self.eval_n:
            e["eval_k"] = f"every k must be <= eval_n ({self.eval_n}); got {self.eval_k}"
        rerr = _check_rewards(self.rewards)
        if rerr:
            e["rewards"] = rerr
        if self.rollout_engine == "vllm" and (self.keep_sampling_mask or self.keep_routing):
            e["rollout_engine"] = "vllm returns no kept-token masks or expert choices: use hf for keep_sampling_mask/keep_routing"
        if self.task == "file" and not self.data_path:
            e["data_path"] = "required when task is 'file'"
        if check_paths and self.model_path:
            # (an empty model_path is the built-in tiny model, which the first run that needs it builds)
            model_dir = self.model_path
            if not os.path.isdir(model_dir):
                e["model_path"] = f"no such folder: {model_dir}"
            elif not os.path.isfile(os.path.join(model_dir, "config.json")):
                e["model_path"] = f"not a model folder (no config.json): {model_dir}"
        if check_paths:
            if self.task == "file" and self.data_path and not os.path.isfile(self.data_path):
                e["data_path"] = f"no such file: {self.data_path}"
            elif self.task == "file" and self.data_path and not self.data_path.endswith((".jsonl", ".parquet")):
                e["data_path"] = f"must be a .jsonl or .parquet file: {self.data_path}"
        if e:
            raise ConfigError(e)


def _check_rewards(rewards: list) -> str:
    for i, item in enumerate(rewards):
        if not isinstance(item, dict) or "name" not in item:
            return f"item {i} must be a mapping with a 'name'"
        extra = set(item) - {"name", "weight", "params"}
        if extra:
            return f"item {i} has unknown keys {sorted(extra)}"
        w = item.get("weight", 1.0)
        if isinstance(w, bool) or not isinstance(w, (int, float)):
            return f"item {i}: weight must be a number"
    return ""


def _coerce(value: Any, annotation: Any) -> Any:
    """Check/convert one value to the field's annotated type (strings from forms are accepted)."""
    ann = annotation if not isinstance(annotation, str) else _ANNOTATIONS[annotation]
    optional = get_origin(ann) is not None and type(None) in get_args(ann)
    if optional:
        if value is None or value == "":
            return None
        ann = next(a for a in get_args(ann) if a is not type(None))
    if ann is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on", "false", "0", "no", "off"):
            return value.lower() in ("true", "1", "yes", "on")
        raise ValueError(f"expected true or false; got {value!r}")
    if ann is int:
        if isinstance(value, bool):
            raise ValueError(f"expected an integer; got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise ValueError(f"expected an integer; got {value!r}")
    if ann is float:
        if isinstance(value, bool):
            raise ValueError(f"expected a number; got {value!r}")
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        raise ValueError(f"expected a number; got {value!r}")
    if ann is str:
        if not isinstance(value, str):
            raise ValueError(f"expected a string; got {value!r}")
        return value
    if ann is list:
        if isinstance(value, str):
            try:
                value = json.loads(value) if value.strip() else []
            except json.JSONDecodeError as exc:
                raise ValueError(f"expected a JSON list: {exc.msg}") from None
        if not isinstance(value, list):
            raise ValueError(f"expected a list; got {value!r}")
        return value
    return value


_ANNOTATIONS = {"str": str, "int": int, "float": float, "bool": bool, "list": list,
                "Optional[float]": Optional[float], "Optional[int]": Optional[int]}

# Presets: just sets of knobs (DESIGN §3). Sources: DeepSeekMath (GRPO), DAPO arXiv 2503.14476,
# Dr. GRPO arXiv 2503.20783.
PRESETS: dict[str, dict[str, Any]] = {
    "grpo": {"adv_estimator": "grpo", "norm_adv_by_std": True, "eps_low": 0.2, "eps_high": 0.2,
             "loss_agg": "seq-mean-token-mean", "kl_coef": 0.04, "kl_estimator": "k3",
             "dynamic_sampling": False, "overlong_buffer_len": 0},
    "dapo": {"adv_estimator": "grpo", "norm_adv_by_std": True, "eps_low": 0.2, "eps_high": 0.28,
             "loss_agg": "token-mean", "kl_coef": 0.0, "dynamic_sampling": True, "max_gen_batches": 3,
             "overlong_buffer_len": 2, "overlong_penalty_factor": 1.0},
    "dr_grpo": {"adv_estimator": "grpo", "norm_adv_by_std": False, "eps_low": 0.2, "eps_high": 0.2,
                "loss_agg": "seq-mean-token-sum-norm", "kl_coef": 0.0, "dynamic_sampling": False,
                "overlong_buffer_len": 0},
}


def default_tiny_model_dir() -> str:
    """Where the built-in tiny model lives: $SEEDBED_TINY_MODEL, else var/models/tiny under the project."""
    env = os.environ.get("SEEDBED_TINY_MODEL")
    if env:
        return env
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(root, "var", "models", "tiny")


def field_specs() -> list[dict]:
    """Describe every knob for form generation: name, kind, default, help, choices, group."""
    specs = []
    defaults = TrainConfig()
    for f in dataclasses.fields(TrainConfig):
        ann = f.type if not isinstance(f.type, str) else _ANNOTATIONS[f.type]
        optional = get_origin(ann) is not None and type(None) in get_args(ann)
        base = next(a for a in get_args(ann) if a is not type(None)) if optional else ann
        kind = "choice" if f.name in CHOICES else {bool: "bool", int: "int", float: "float", str: "str",
                                                    list: "json"}[base]
        specs.append({"name": f.name, "kind": kind, "default": getattr(defaults, f.name),
                      "help": f.metadata["help"], "choices": list(CHOICES.get(f.name, ())),
                      "optional": optional})
    return specs
