"""The one training config schema.

The web form, the REST API, the CLI's YAML file, the worker and every checkpoint use this schema. Every knob
is a dataclass field whose ``metadata["help"]`` is its docstring (the form shows it as help text) and whose
metadata ``min``/``max``/``gt``/``lt`` is its range (``training.fields``: the form's help, ``validate`` and
the API read the same numbers). Unknown keys and invalid values are rejected with the field named:
``FieldErrors.errors`` maps field -> message.

The field defaults are the defaults, and they are the ``grpo`` preset. The other presets (``dapo``,
``dr_grpo``) are plain sets of knob values that override them, applied before the user's own values, so
``TrainConfig()`` equals ``TrainConfig.from_dict({})``.
"""
from __future__ import annotations

import dataclasses
import json
import re
import os
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, get_args, get_origin

from training.data import DATA_SUFFIXES, data_fields_error, is_file_task, task_error, task_params_error
from training.fields import RANGE_KEYS, FieldErrors, coerce, range_error, range_text
from training.reward_hacking import reward_hacking_error
from training.memory import read_model_config

CHOICES: dict[str, tuple[str, ...]] = {
    "preset": ("grpo", "dapo", "dr_grpo"),
    "rollout_engine": ("hf", "vllm"),
    "adv_estimator": ("grpo", "rloo", "reinforce_pp_baseline"),
    "loss_agg": ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"),
    "kl_estimator": ("k1", "k2", "k3"),
    "device": ("auto", "cpu", "cuda"),
    "precision": ("fp32", "bf16"),
    "chat_template": ("auto", "on", "off"),
    "strategy": ("none", "ddp", "fsdp"),  # training.ranks.STRATEGIES
}



def choices_of(name: str) -> tuple[str, ...]:
    """The values a choice knob takes (``CHOICES``; the engine's: the registered engines, training.engines);
    () for any other knob."""
    if name == "engine":
        from training.engines import engine_names

        return tuple(engine_names())
    return CHOICES.get(name, ())


def _f(default: Any, help: str, **meta: Any) -> Any:
    """A knob: its default, its help text and, in ``meta``, its range (min, max, gt, lt) or other facts."""
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: json.loads(json.dumps(d)), metadata={"help": help, **meta})
    return field(default=default, metadata={"help": help, **meta})


@dataclass
class TrainConfig:
    """One run's complete configuration (one seed of one config)."""

    # --- which trainer runs it ------------------------------------------------------------------------
    engine: str = _f("seedbed", "Trainer: seedbed (Seedbed's own loop), trl (TRL's GRPOTrainer under torchrun, the "
                     "knobs below mapped onto its GRPOConfig), verl (GPU servers with verl installed) or command (a "
                     "trainer the operator registered, streaming the JSONL event contract). A knob the engine "
                     "does not have is an error, never dropped.")
    nproc_per_node: int = _f(1, "Processes per node (torchrun --nproc-per-node): one per GPU, or CPU processes. "
                             "The seedbed engine splits each step's groups over nproc_per_node × nnodes ranks "
                             "(strategy ddp or fsdp).", min=1, max=64)
    nnodes: int = _f(1, "Machines the run spans (seedbed engine). More than one needs a Slurm queue: Slurm allocates "
                     "the nodes together, torchrun runs on each with the rendezvous on the first.", min=1, max=64)
    strategy: str = _f("none", "How the seedbed engine trains on several ranks: none (one process), ddp "
                       "(DistributedDataParallel: every rank holds the model, gradients all-reduced) or fsdp "
                       "(FSDP2: parameters, gradients and optimizer state sharded per decoder layer).")
    collective_timeout_s: int = _f(300, "Seconds a rank of a multi-rank run waits in one collective (an all-reduce, "
                                   "an all-gather, FSDP2's gathers) for its peers before the run fails with an "
                                   "error naming the rank, the collective and the step (torch's own default: 30 "
                                   "minutes). Longer than anything one rank does while the others wait: rank 0's "
                                   "checkpoint export, its periodic evaluation.", min=10, max=3600)
    command: str = _f("", "For engine command: the name of a trainer the operator registered (the list is on the "
                      "new-run page); a config never holds a command line.")

    # --- what to train on -------------------------------------------------------------------------
    preset: str = _f("grpo", "Algorithm preset applied before your own values: grpo (DeepSeekMath), dapo "
                     "(Clip-Higher, dynamic sampling, token-level loss, overlong shaping) or dr_grpo (no std "
                     "normalisation, length-unbiased loss).")
    model_path: str = _f("", "Local Hugging Face model folder (config.json + weights + tokenizer). Nothing is "
                         "downloaded. Empty means the built-in tiny model ($SEEDBED_TINY_MODEL or var/models/tiny).")
    task: str = _f("arithmetic", "Built-in task (the generated ones of training/tasks/: arithmetic, countdown), a benchmark (humaneval: scored by running "
                   "its tests in the sandbox; ifbench: the prompts whose constraints ifeval checks), dataset:<name> "
                   "for one of your project's datasets (the datasets page), 'file' for a JSONL/Parquet/CSV file, or "
                   "reasoning_gym:<task> for one of reasoning-gym's seeded generators (e.g. "
                   "reasoning_gym:basic_arithmetic), scored by the task's own score_answer.")
    task_params: dict = _f({}, "A reasoning_gym task's own settings (its difficulty), e.g. {\"max_terms\": 2, "
                           "\"max_digits\": 1} for basic_arithmetic; the same for its held-out problems.")
    task_size: int = _f(1000, "Training problems a reasoning_gym task generates from the run's seed (its held-out "
                        "problems are one fixed set, the same for every seed).", min=1, max=1_000_000)
    data_path: str = _f("", "Training data file (.jsonl, .parquet or .csv) when task is 'file' (for dataset:<name> "
                        "the library fills it in).")
    prompt_field: str = _f("prompt", "Field of each data row holding the prompt text.")
    data_fields: dict = _f({}, "Other fields of a data row under the names the verifiers read, e.g. {\"tests\": "
                           "\"test\", \"entry_point\": \"entry_point\"} (tests, entry_point, setup_code, "
                           "constraints, system_prompt).")
    held_out_fraction: float = _f(0.0, "Share of a data file's rows kept out of training for the periodic eval, "
                                  "drawn with split_seed (0: the eval reads the first training rows).",
                                  min=0.0, max=0.5)
    split_seed: int = _f(0, "Seed of the train/held-out split of a data file (the same for every seed of a sweep).",
                         min=0, max=2**32 - 1)
    chat_template: str = _f("auto", "Prompts through the model's chat template (system turn, the question as the "
                            "user's turn, the assistant's turn opened): auto when its tokenizer has one, on "
                            "(required), off (plain text).")
    system_prompt: str = _f("", "The system turn of a chat prompt (empty: the template's own default).")
    answer_instruction: str = _f("", "Appended to each question: how to give the answer, matching the verifier "
                                 "(e.g. 'Put your final answer inside <answer></answer>.' for reasoning_gym). "
                                 "Empty: the task's own, if it has one (humaneval asks for the whole function in "
                                 "a ```python block).")
    answer_field: str = _f("answer", "Field of each data row holding the reference answer given to the verifier "
                           "(empty: none, e.g. code judged by its tests).")
    rewards: list = _f([], "Reward spec: a list of {\"name\": verifier, \"weight\": w, \"params\": {...}}; "
                       "rewards are the weighted sum. Empty means the task's own verifier.")
    max_verifier_error_rate: float = _f(0.1, "Fail the run when more than this share of a step's completions "
                                         "could not be judged (VerifierError).", min=0.0, max=1.0)
    seed: int = _f(0, "Random seed (data order, sampling, initialisation of anything random).", min=0, max=2**32 - 1)

    # --- rollouts ----------------------------------------------------------------------------------
    total_steps: int = _f(40, "Number of training steps (one rollout batch each).", min=1, max=1_000_000)
    prompts_per_step: int = _f(8, "Prompts per rollout batch.", min=1, max=4096)
    group_size: int = _f(8, "Completions sampled per prompt (G); advantages are relative within a group, so at "
                         "least 2.", min=2, max=1024)
    max_new_tokens: int = _f(8, "Maximum completion length in tokens (L_max).", min=1, max=131_072)
    temperature: float = _f(1.0, "Sampling temperature.", gt=0.0, max=10.0)
    top_p: float = _f(1.0, "Nucleus sampling: keep the smallest token set with this probability mass.", gt=0.0, max=1.0)
    top_k: int = _f(0, "Keep only the k most likely tokens when sampling (0 = off).", min=0, max=1_000_000)
    rollout_engine: str = _f("hf", "Rollout engine: hf (transformers generate, CPU or GPU) or vllm (GPU, "
                             "optional 'gpu' extra).")
    stop: list = _f([], "Stop strings: a completion ends once its text contains one (kept in the completion, like "
                    "the end-of-sequence token), e.g. [\"</answer>\"] or [\"\\n\\nQuestion:\"]; at most 4, each 1 to "
                    "32 characters. Training, its periodic eval and evaluations of its checkpoints all stop there.")

    # --- advantages and loss -----------------------------------------------------------------------
    adv_estimator: str = _f("grpo", "Advantage estimator: grpo (group mean/std), rloo (leave-one-out mean) or "
                            "reinforce_pp_baseline (group mean, batch std).")
    norm_adv_by_std: bool = _f(True, "Divide GRPO advantages by the group std (false = Dr. GRPO).")
    eps_low: float = _f(0.2, "Lower clip range: ratio clipped at 1 - eps_low.", min=0.0, lt=1.0)
    eps_high: float = _f(0.2, "Upper clip range: ratio clipped at 1 + eps_high (DAPO Clip-Higher: 0.28); at least "
                         "eps_low.", min=0.0, max=10.0)
    dual_clip: Optional[float] = _f(None, "Dual-clip constant c > 1 capping the loss of negative-advantage tokens "
                                    "at -c*A (empty = off).", gt=1.0, max=100.0)
    loss_agg: str = _f("seq-mean-token-mean", "Loss aggregation: token-mean (DAPO), seq-mean-token-mean (GRPO) "
                       "or seq-mean-token-sum-norm (Dr. GRPO).")
    kl_coef: float = _f(0.04, "KL penalty coefficient beta toward the reference (initial) model; 0 = no reference.",
                        min=0.0, max=100.0)
    kl_estimator: str = _f("k3", "KL estimator: k1, k2 or k3.")
    unbiased_kl: bool = _f(False, "DeepSeek-V3.2 unbiased KL: weight the k3 estimate by pi_theta/pi_old.")
    opsm_delta: Optional[float] = _f(None, "Off-policy sequence masking (DeepSeek-V3.2): drop a negative-advantage "
                                     "sequence whose mean log(pi_old/pi_theta) exceeds delta (empty = off).",
                                     min=0.0, max=100.0)
    keep_sampling_mask: bool = _f(False, "Keep sampling mask (DeepSeek-V3.2): renormalise pi_theta over the "
                                  "tokens top-p/top-k kept when sampling.")
    keep_routing: bool = _f(False, "Keep routing (MoE models): replay the experts chosen during sampling in the "
                            "training forward.")
    dynamic_sampling: bool = _f(False, "DAPO dynamic sampling: drop groups whose rewards are all equal and sample "
                                "more prompts until the batch is full.")
    max_gen_batches: int = _f(3, "Dynamic sampling: at most this many generation batches per step.", min=1, max=100)
    overlong_buffer_len: int = _f(0, "DAPO overlong shaping: soft penalty over the last L_cache tokens before "
                                  "max_new_tokens (0 = off).", min=0, max=131_072)
    overlong_penalty_factor: float = _f(1.0, "Overlong shaping: penalty reached at max_new_tokens.", min=0.0, max=100.0)
    overlong_filtering: bool = _f(False, "Mask truncated completions (no EOS within max_new_tokens) from the loss.")

    # --- optimisation ------------------------------------------------------------------------------
    lr: float = _f(1e-4, "AdamW learning rate.", gt=0.0, max=1.0)
    warmup_steps: int = _f(0, "Linear learning-rate warm-up steps.", min=0, max=1_000_000)
    weight_decay: float = _f(0.0, "AdamW weight decay.", min=0.0, max=10.0)
    max_grad_norm: float = _f(1.0, "Gradient clipping norm (0 = off).", min=0.0, max=1e6)
    ppo_epochs: int = _f(1, "Passes over each rollout batch (updates after the first are off-policy).", min=1, max=100)
    minibatch_size: int = _f(0, "Sequences per optimizer step (0 = the whole batch in one step).", min=0,
                             max=1_000_000)
    micro_batch_size: int = _f(0, "Sequences per forward/backward pass inside an optimizer step: their gradients "
                               "are accumulated, the loss is the same as one pass over the minibatch, the peak "
                               "memory lower (0 = automatic: the memory model's choice, one pass when it fits, "
                               "training.memory).", min=0, max=1_000_000)
    gradient_checkpointing: bool = _f(False, "Activation checkpointing: keep only each decoder layer's input and "
                                      "recompute the rest in the backward (less memory for activations, about a "
                                      "third more compute in the training forward).")

    # --- bookkeeping -------------------------------------------------------------------------------
    max_restarts: int = _f(2, "When the run's worker is lost (no heartbeat: the machine or the process died), "
                           "restart it from its last checkpoint this many times, waiting 10 s, 20 s, 40 s... "
                           "(0: mark it lost and wait for a person).", min=0, max=20)
    checkpoint_every: int = _f(0, "Save a checkpoint every N steps (0 = only at the end and on stop).", min=0,
                               max=1_000_000)
    keep_checkpoints: int = _f(3, "Keep only the run's newest N checkpoints, removing older ones as new ones land "
                               "(0 = keep all, up to the project's disk budgets). A checkpoint a run started from "
                               "or an evaluation read is always kept.", min=0, max=100_000)
    keep_best: int = _f(0, "With keep_checkpoints: also keep the N checkpoints whose keep_best_metric was best "
                        "at their step (0 = only the newest).", min=0, max=100_000)
    keep_best_metric: str = _f("reward/mean", "The logged metric keep_best ranks checkpoints by; higher is better, "
                               "or lower with a 'min:' prefix (e.g. min:loss).")
    samples_per_step: int = _f(4, "Completions logged per step (shown in the UI).", min=0, max=256)
    eval_every: int = _f(0, "Evaluate pass@k on held-out problems every N steps (0 = off).", min=0, max=1_000_000)
    eval_problems: int = _f(32, "Held-out problems for periodic evaluation.", min=1, max=10_000)
    eval_n: int = _f(8, "Samples per held-out problem for periodic evaluation.", min=1, max=1024)
    eval_k: list = _f([1, 4], "k values logged as eval/pass@k.")
    reward_hacking_guard: dict = _f({}, "Reward-hacking guard (empty: off), e.g. {\"action\": \"stop\"}: warns "
                                    "(action warn) or also stops the run (stop, killed by guard:reward_hacking) on "
                                    "any of its rules (all by default): eval_trend, the training reward rose by "
                                    "min_rise (0.1) over the last `evals` (3) periodic evaluations while held-out "
                                    "pass@k gained at most eval_tolerance (0.02), so it needs eval_every > 0; "
                                    "same_completion, one completion text is a share same_completion (0.5) of a "
                                    "step's completions, rewarded, across min_prompts (3) prompts; paid_reason, one "
                                    "verifier reason given with partial credit (0 < score < 1) is a share "
                                    "reason_share (0.8) of them. Per-step rules hold for_steps (2) steps in a row; "
                                    "e.g. {\"action\": \"warn\", \"rules\": [\"eval_trend\"], \"min_rise\": 0.2}.")
    device: str = _f("auto", "auto, cpu or cuda.")
    precision: str = _f("fp32", "Compute precision: fp32, or bf16 (mixed precision: sampling and the training "
                        "forward run under bfloat16 autocast; weights, gradients and optimizer state stay float32). "
                        "A GPU gains speed and memory from bf16; a CPU runs it too, without gain.")

    # ------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def prompt_template(self) -> "PromptTemplate":
        from training.prompts import PromptTemplate

        from training.data import default_instruction

        return PromptTemplate(chat=self.chat_template, system_prompt=self.system_prompt,
                              instruction=self.answer_instruction or default_instruction(self.task),
                              stop=tuple(self.stop))

    @classmethod
    def from_dict(cls, data: dict, *, check_paths: bool = True, roots: Sequence[str] | None = None,
                  dry_run: bool = False) -> "TrainConfig":
        """Build and validate a config: preset values first, then ``data``; raises FieldErrors. ``roots``: the
        folders model_path and data_path must lie in (a request's config; None for the CLI, whose user names
        their own files). ``dry_run``: where a run is submitted, its verifiers must reward the dataset's first
        reference answer (``validate``)."""
        if not isinstance(data, dict):
            raise FieldErrors({"config": f"expected a mapping of knobs, got {type(data).__name__}"})
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
                kwargs[name] = coerce(values[name], f.type)
            except (TypeError, ValueError) as exc:
                errors[name] = str(exc)
        if errors:
            raise FieldErrors(errors)
        cfg = cls(**kwargs)
        cfg.validate(check_paths=check_paths, roots=roots, dry_run=dry_run)
        return cfg

    @classmethod
    def from_file(cls, path: str, *, dry_run: bool = False) -> "TrainConfig":
        """A YAML (.yaml/.yml) or JSON file; a file that cannot be read or parsed is a FieldErrors on
        ``config``, like any other bad input."""
        import yaml

        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read(MAX_CONFIG_BYTES + 1)
        except OSError as exc:
            raise FieldErrors({"config": f"cannot read {path}: {exc.strerror or exc}"}) from None
        except UnicodeDecodeError:
            raise FieldErrors({"config": f"{path} is not UTF-8 text"}) from None
        if len(text) > MAX_CONFIG_BYTES:
            raise FieldErrors({"config": f"{path} is larger than {MAX_CONFIG_BYTES // 1000} kB"})
        try:
            data = (yaml.safe_load(text) or {}) if path.endswith((".yaml", ".yml")) else json.loads(text)
        except (yaml.YAMLError, json.JSONDecodeError) as exc:
            raise FieldErrors({"config": f"{path} is not valid {'YAML' if path.endswith(('.yaml', '.yml')) else 'JSON'}: "
                                         f"{str(exc).splitlines()[0]}"}) from None
        return cls.from_dict(data, dry_run=dry_run)

    def resolved_model_path(self) -> str:
        return self.model_path or default_tiny_model_dir()

    def validate(self, *, check_paths: bool = True, roots: Sequence[str] | None = None, dry_run: bool = False) -> None:
        """Every field in its range (its metadata) or among its choices, then the rules that tie fields
        together; raises FieldErrors naming each bad field. With ``roots``, model_path and data_path must lie
        inside one of those folders (checked before anything about the path is looked at, so a path outside
        says nothing about what is there). With ``dry_run`` (a submitted run on a dataset file), the run's
        verifiers are dry-run on the first row's reference answer (training.reward_dry_run): one that does not
        score it 1 is an error on ``rewards``."""
        e = self._path_name_errors(roots)
        if e:
            check_paths = False  # a path outside the roots says nothing about what is there
        self._field_errors(e)
        self._rules_between_fields(e)
        if "engine" not in e:
            from training.engines import engine_errors

            for name, message in engine_errors(self).items():
                e.setdefault(name, message)
        self._task_errors(e)
        if check_paths:
            self._model_folder_errors(e)
            self._data_file_errors(e)
        if dry_run and check_paths and is_file_task(self.task) and not e:
            self._dry_run_errors(e)
        if e:
            raise FieldErrors(e)

    def _path_name_errors(self, roots: Sequence[str] | None) -> dict[str, str]:
        """model_path and data_path: no NUL byte, and inside ``roots`` when given (before anything is looked at)."""
        e: dict[str, str] = {}
        for name in ("model_path", "data_path"):
            problem = nul_error(getattr(self, name))
            if not problem and roots is not None:
                problem = outside_roots(getattr(self, name), roots)
            if problem:
                e[name] = problem
        return e

    def _field_errors(self, e: dict[str, str]) -> None:
        """Each field among its choices and in its range (its metadata)."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if choices_of(f.name) and value not in choices_of(f.name):
                e[f.name] = f"must be one of {', '.join(choices_of(f.name))}; got {value!r}"
            message = range_error(value, f.metadata)
            if message:
                e[f.name] = message

    def _rules_between_fields(self, e: dict[str, str]) -> None:
        """The rules that tie fields together (the engine's aside: training.engines)."""
        if self.eps_high < self.eps_low and "eps_high" not in e:
            e["eps_high"] = f"must be >= eps_low ({self.eps_low}); got {self.eps_high}"
        if self.unbiased_kl and self.kl_estimator != "k3":
            e["unbiased_kl"] = "the unbiased KL form applies to the k3 estimator only"
        if self.overlong_buffer_len >= self.max_new_tokens and self.overlong_buffer_len > 0:
            e["overlong_buffer_len"] = (f"must be smaller than max_new_tokens ({self.max_new_tokens}); "
                                        f"got {self.overlong_buffer_len}")
        if (len(self.eval_k) > MAX_EVAL_K or
                any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in self.eval_k)):
            e["eval_k"] = f"must be a list of at most {MAX_EVAL_K} integers >= 1; got {self.eval_k}"
        elif self.eval_k and max(self.eval_k) > self.eval_n:
            e["eval_k"] = f"every k must be <= eval_n ({self.eval_n}); got {self.eval_k}"
        if reward_hacking_error(self.reward_hacking_guard, self.eval_every):
            e["reward_hacking_guard"] = reward_hacking_error(self.reward_hacking_guard, self.eval_every)
        if not re.fullmatch(r"(min:)?[A-Za-z0-9_./@:-]{1,200}", self.keep_best_metric or ""):
            e["keep_best_metric"] = ("must name a logged metric (letters, digits, _ . / @ : -, at most 200), with an "
                                     f"optional 'min:' prefix; got {self.keep_best_metric!r}")
        if stop_error(self.stop):
            e["stop"] = stop_error(self.stop)
        if len(self.rewards) > MAX_REWARDS:
            e["rewards"] = f"at most {MAX_REWARDS} verifiers; got {len(self.rewards)}"
        else:
            from training.verifiers import check_reward_spec  # the registry loads the verifiers lazily

            problem = check_reward_spec(self.rewards)
            if problem:
                e["rewards"] = problem
        if self.rollout_engine == "vllm" and (self.keep_sampling_mask or self.keep_routing):
            e["rollout_engine"] = "vllm returns no kept-token masks or expert choices: use hf for keep_sampling_mask/keep_routing"

    def _task_errors(self, e: dict[str, str]) -> None:
        """The task, its parameters, the prompt texts and the data file a file task needs (named, not read)."""
        if task_error(self.task):
            e["task"] = task_error(self.task)
        elif task_params_error(self.task, self.task_params):
            e["task_params"] = task_params_error(self.task, self.task_params)
        for name, limit in (("system_prompt", 4000), ("answer_instruction", 1000)):
            if len(getattr(self, name)) > limit:
                e[name] = f"at most {limit} characters; got {len(getattr(self, name))}"
        if data_fields_error(self.data_fields):
            e["data_fields"] = data_fields_error(self.data_fields)
        if self.task == "file" and not self.data_path:
            e["data_path"] = "required when task is 'file'"
        elif is_file_task(self.task) and not self.data_path:
            e["data_path"] = (f"required for {self.task}: the web app and the API fill it in from the project's "
                              "dataset library; on the command line give the dataset's file")

    def _model_folder_errors(self, e: dict[str, str]) -> None:
        """The model folder exists and is one (the built-in tiny model when empty), its chat template when asked
        for, and room for a prompt in its context."""
        if not self.model_path and "max_new_tokens" not in e:
            # the built-in tiny model (once built: the first run that needs it builds it) has a short context
            context = model_context_length(default_tiny_model_dir())
            if context is not None and self.max_new_tokens >= context:
                e["max_new_tokens"] = (f"must leave room for the prompt in the built-in tiny model's context of "
                                       f"{context} tokens; got {self.max_new_tokens}")
        if self.model_path:
            # (an empty model_path is the built-in tiny model, which the first run that needs it builds)
            model_dir = self.model_path
            if not os.path.isdir(model_dir):
                e["model_path"] = f"no such folder: {model_dir}"
            elif not os.path.isfile(os.path.join(model_dir, "config.json")):
                e["model_path"] = f"not a model folder (no config.json): {model_dir}"
            elif self.chat_template == "on":
                from training.models import describe_model

                if not describe_model(model_dir)["chat_template"]:
                    e["chat_template"] = f"'on' but the model has no chat template: {model_dir}"
            if "model_path" not in e and "max_new_tokens" not in e:
                context = model_context_length(model_dir)
                if context is not None and self.max_new_tokens >= context:
                    e["max_new_tokens"] = (f"must leave room for the prompt in the model's context of {context} "
                                           f"tokens; got {self.max_new_tokens}")

    def _data_file_errors(self, e: dict[str, str]) -> None:
        """A file task's data file exists, has a data suffix, and its size and first rows are valid (streamed)."""
        file_task = is_file_task(self.task)
        if file_task and self.data_path and not os.path.isfile(self.data_path):
            e["data_path"] = f"no such file: {self.data_path}"
        elif file_task and self.data_path and not self.data_path.endswith(DATA_SUFFIXES):
            e["data_path"] = f"must be a .jsonl, .parquet or .csv file: {self.data_path}"
        elif file_task and self.data_path and "data_path" not in e and "data_fields" not in e:
            # the size limit and the first rows, streamed (bounded memory), before any run is made
            from training.data import DatasetError, check_file_dataset

            try:
                check_file_dataset(self.data_path, self.prompt_field, self.answer_field,
                                   fields=self.data_fields)
            except DatasetError as exc:
                e["data_path"] = str(exc).removeprefix("data_path: ")

    def _dry_run_errors(self, e: dict[str, str]) -> None:
        """Last, for a config valid in every other way (it builds the verifiers and reads a row): the verifiers
        dry-run on the first row's reference answer."""
        from training.reward_dry_run import reward_dry_run_error

        problem = reward_dry_run_error(self)
        if problem:
            e["rewards"] = problem


def model_context_length(model_dir: str) -> int | None:
    """The longest sequence a model folder's config declares (None when it declares none or is unreadable)."""
    data = read_model_config(model_dir)
    if data is None:
        return None
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = data.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


NUL_ERROR = "must not contain a NUL byte (\\u0000)"


def nul_error(path) -> str:
    """"" unless ``path`` is a string holding a NUL byte, which no file name can (the OS calls raise ValueError).

    >>> nul_error("/srv/m\\x00odel"), nul_error("/srv/model"), nul_error(None)
    ('must not contain a NUL byte (\\\\u0000)', '', '')
    """
    return NUL_ERROR if isinstance(path, str) and "\x00" in path else ""


def outside_roots(path: str, roots: Sequence[str]) -> str:
    """"" when ``path`` is empty or lies inside one of ``roots`` once symlinks and ".." are resolved, else the
    field message. A config names data, it never points at the machine's files (docs/architecture.md#projects-and-trust).

    >>> outside_roots("/srv/seedbed/models/../../../etc/passwd", ["/srv/seedbed"])
    'must lie inside the allowed folders (/srv/seedbed); got /srv/seedbed/models/../../../etc/passwd'
    >>> outside_roots("/srv/seedbed/models/qwen", ["/srv/seedbed"])
    ''
    """
    if not path:
        return ""
    if nul_error(path):
        return nul_error(path)
    real = os.path.realpath(path)
    for root in roots:
        base = os.path.realpath(root)
        if real == base or real.startswith(base.rstrip(os.sep) + os.sep):
            return ""
    return f"must lie inside the allowed folders ({', '.join(map(str, roots))}); got {path}"


MAX_REWARDS = 16
MAX_CONFIG_BYTES = 100_000
MAX_EVAL_K = 32
MAX_STOP, MAX_STOP_CHARS = 4, 32


def stop_error(stop) -> str:
    """"" when ``stop`` is a valid list of stop strings, else the field message.

    >>> stop_error(["</answer>", "\\n\\n"]), stop_error(["a", ""]), stop_error("</answer>")
    ('', 'item 1 must be 1 to 32 characters; got 0', "must be a list of strings; got str '</answer>'")
    """
    if not isinstance(stop, list):
        return f"must be a list of strings; got {type(stop).__name__} {stop!r}"[:200]
    if len(stop) > MAX_STOP:
        return f"at most {MAX_STOP} stop strings; got {len(stop)}"
    for i, s in enumerate(stop):
        if not isinstance(s, str):
            return f"item {i} must be a string; got {s!r}"[:200]
        if not 1 <= len(s) <= MAX_STOP_CHARS:
            return f"item {i} must be 1 to {MAX_STOP_CHARS} characters; got {len(s)}"
    return ""


# Presets: sets of knobs that override the field defaults (which are GRPO's), docs/architecture.md#the-training-core. Sources: DeepSeekMath
# (GRPO), DAPO arXiv 2503.14476, Dr. GRPO arXiv 2503.20783.
PRESETS: dict[str, dict[str, Any]] = {
    "grpo": {},
    "dapo": {"eps_high": 0.28, "loss_agg": "token-mean", "kl_coef": 0.0, "dynamic_sampling": True,
             "overlong_buffer_len": 2},
    "dr_grpo": {"norm_adv_by_std": False, "loss_agg": "seq-mean-token-sum-norm", "kl_coef": 0.0},
}


def default_tiny_model_dir() -> str:
    """Where the built-in tiny model lives: $SEEDBED_TINY_MODEL, else var/models/tiny under the project."""
    env = os.environ.get("SEEDBED_TINY_MODEL")
    if env:
        return env
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(root, "var", "models", "tiny")


# What the forms offer for `task` after the built-in tasks (``task_suggestions``; any reasoning_gym:<name> is
# accepted; these are examples that suit RLVR).
TASK_SUGGESTIONS = ("humaneval", "ifbench", "file", "reasoning_gym:basic_arithmetic", "reasoning_gym:chain_sum",
                    "reasoning_gym:gsm_symbolic", "reasoning_gym:leg_counting", "reasoning_gym:simple_equations",
                    "reasoning_gym:decimal_arithmetic", "reasoning_gym:gcd", "reasoning_gym:lcm")


def task_suggestions() -> tuple[str, ...]:
    """What the forms offer for ``task``: the built-in tasks (``training.tasks``), then ``TASK_SUGGESTIONS``."""
    from training.tasks import task_names

    return (*task_names(), *TASK_SUGGESTIONS)


def field_specs() -> list[dict]:
    """Describe every knob for form generation: name, kind, default, help, choices, range text and bounds."""
    specs = []
    defaults = TrainConfig()
    for f in dataclasses.fields(TrainConfig):
        ann = f.type if not isinstance(f.type, str) else _ANNOTATIONS[f.type]
        optional = get_origin(ann) is not None and type(None) in get_args(ann)
        base = next(a for a in get_args(ann) if a is not type(None)) if optional else ann
        kind = "choice" if choices_of(f.name) else {bool: "bool", int: "int", float: "float", str: "str",
                                                    list: "json", dict: "json"}[base]
        suggestions = task_suggestions() if f.name == "task" else ()
        specs.append({"name": f.name, "kind": kind, "default": getattr(defaults, f.name), "suggestions": suggestions,
                      "help": f.metadata["help"], "choices": list(choices_of(f.name)),
                      "optional": optional, "range": range_text(f.metadata),
                      "bounds": {k: f.metadata[k] for k in RANGE_KEYS if k in f.metadata}})
    return specs


_ANNOTATIONS = {"str": str, "int": int, "float": float, "bool": bool, "list": list, "dict": dict,
                "Optional[float]": Optional[float], "Optional[int]": Optional[int]}
