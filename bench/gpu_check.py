"""The GPU acceptance check: Seedbed's GPU paths, one command, on one GPU.

    python bench/gpu_check.py [--device cuda] [--only bf16,ranks] [--skip vllm] [--smoke]
                              [--smollm2 DIR | --gguf FILE] [--smollm2-arch DIR] [--steps N] [--real-steps N]

Paths (each prints its lines, then one row of the final table: pass, fail or skipped, completion tokens/s and
peak memory; the exit code is 1 when a path that ran failed):

- ``vllm``: rollouts of the vLLM engine against the hf engine (``training.rollout``) on the same prompts and row
  seeds (the tiny model, 32 arithmetic prompts x 8 = 256 samples each): their mean rewards must agree within
  2 standard errors of the difference. Needs vLLM (the ``gpu`` extra) and CUDA.
- ``bf16``: the training loop (``training.loop.train``) with ``precision: bf16`` (bfloat16 autocast, float32
  weights) on the tiny model's arithmetic task, DAPO: every metric finite, the model's linear layers computed in
  bfloat16 (seen by a forward hook), and learning: the mean reward of the last 10 steps above the first 10's by
  more than 0.05.
- ``smollm2``: bench/real_model.py's workload (SmolLM2-135M-Instruct, GRPO on easy basic_arithmetic through its
  chat template: 8 prompts x 4 completions, 24 tokens, lr 5e-6) trained by Seedbed's loop and by TRL's
  GRPOTrainer on the same device and precision (bf16 autocast on a GPU, both), then held-out pass@1 of the base
  model and of each result (the same evaluator). Passes when both ran every step with finite rewards and
  Seedbed's pass@1 is not below TRL's beyond the 95 % interval of their paired difference. The weights: a
  model folder (``--smollm2``), else a GGUF file imported here (``--gguf``), else var/models/smollm2-135m-instruct;
  failing all three, a RANDOMLY INITIALISED model of SmolLM2's architecture (``--smollm2-arch``: its config and
  tokenizer), said so in the output: it measures throughput and memory only. Needs trl, datasets and
  reasoning_gym.
- ``ranks``: 2 ranks (``nproc_per_node: 2``, DDP) through the project's own path: ``python -m training run``,
  which starts torchrun and ``training.distributed``. On one GPU both ranks share it over gloo (NCCL refuses two
  ranks on one GPU); the same config in one process alongside, and the first steps' rewards compared (the same
  completions are expected: each row has its own sampling seed).

- ``packed``: 8 seeds of SmolLM2-135M-Instruct (its weights as for ``smollm2``, else its architecture) packed in
  one process (``training.loop.train_group``, docs/architecture.md#packed-seeds) against one seed alone, the same
  config (4 prompts x 8 completions x 64 tokens, GRPO): completion tokens/s of all the seeds together against the
  one seed's, and peak memory (goal: at least 4x the throughput). Passes when every seed ran every step with
  finite metrics.

``--device cpu --smoke`` runs every path it can without CUDA, small (a few steps, a shrunken SmolLM2
architecture with random weights), as the test suite does (tests/training/test_gpu_check.py). Completion
tokens/s are over the training steps' own time (the loop's ``step_time_s``, TRL's ``step_time``). Peak memory:
``torch.cuda.max_memory_allocated`` of this process on CUDA (for ``ranks``: the most device memory the two rank
processes held together, from ``torch.cuda.mem_get_info``, CUDA contexts included); the peak RSS on CPU.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import json
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

PATHS = ("vllm", "bf16", "smollm2", "ranks", "packed")
NEEDS = {"vllm": ("vllm",), "bf16": (), "smollm2": ("trl", "datasets", "reasoning_gym"), "ranks": (), "packed": ()}
SMOLLM2_FOLDER = os.path.join(ROOT, "var", "models", "smollm2-135m-instruct")


@dataclass
class Result:
    path: str
    status: str                          # "pass", "fail" or "skipped"
    reason: str = ""                     # why skipped or failed; for a pass, what it showed
    tokens_per_s: float | None = None    # completion tokens per second
    peak_mb: float | None = None
    details: dict = field(default_factory=dict)


def missing(packages) -> str | None:
    """The first of ``packages`` that cannot be imported here, or None."""
    for name in packages:
        if importlib.util.find_spec(name) is None:
            return name
    return None


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--only", default="", help="comma-separated paths to run (default: all of " + ",".join(PATHS) + ")")
    ap.add_argument("--skip", default="", help="comma-separated paths not to run")
    ap.add_argument("--smoke", action="store_true", help="a few steps of each, small models (the test suite's run)")
    ap.add_argument("--steps", type=int, default=0, help="bf16 path: training steps (default 80; smoke 4)")
    ap.add_argument("--real-steps", type=int, default=0, help="smollm2 path: steps per engine (default 40; smoke 2)")
    ap.add_argument("--rank-steps", type=int, default=0, help="ranks path: steps (default 8; smoke 2)")
    ap.add_argument("--problems", type=int, default=0, help="smollm2 path: held-out problems (default 128; smoke 4)")
    ap.add_argument("--smollm2", default="", help="a SmolLM2-135M-Instruct model folder")
    ap.add_argument("--gguf", default="", help="a SmolLM2-135M-Instruct GGUF file to import")
    ap.add_argument("--smollm2-arch", default="", help="a folder with SmolLM2's config.json and tokenizer only")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    for opt in ("only", "skip"):
        names = [n for n in getattr(args, opt).split(",") if n]
        unknown = [n for n in names if n not in PATHS]
        if unknown:
            ap.error(f"--{opt}: unknown path {unknown[0]!r}; choose from {', '.join(PATHS)}")
        setattr(args, opt, names)
    args.paths = [p for p in PATHS if (not args.only or p in args.only) and p not in args.skip]
    return args


# --- measuring ------------------------------------------------------------------------------------------------

def reset_peak(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def peak_mb(device) -> float:
    import torch

    if device.type == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def free_memory(device) -> None:
    import torch

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


class MetricsSink:
    """The loop's metrics in memory."""

    def __init__(self):
        self.metrics: list[dict] = []

    def truncate_after(self, step): pass
    def on_samples(self, step, rows): pass
    def on_checkpoint(self, step, path): pass
    def on_log(self, line): pass
    def flush(self): pass

    def on_metrics(self, step, metrics):
        self.metrics.append({"step": step, **metrics})


def completion_tokens(metrics: list[dict], prompts: int, group: int) -> float:
    """Completion tokens the loop generated over these steps (every generation batch of dynamic sampling)."""
    return sum(m["length/mean"] * prompts * group * m.get("num_gen_batches", 1.0) for m in metrics)


def all_finite(metrics: list[dict], keys=("reward/mean", "length/mean", "entropy", "loss/policy")) -> bool:
    return all(math.isfinite(m[k]) for m in metrics for k in keys if k in m)


@contextlib.contextmanager
def linear_dtypes():
    """The dtypes of the first nn.Linear outputs computed inside (a global forward hook, removed after 32 calls)."""
    import torch

    seen: set = set()
    calls = [0]
    handle = None

    def hook(module, inputs, output):
        if isinstance(module, torch.nn.Linear) and isinstance(output, torch.Tensor):
            seen.add(str(output.dtype).replace("torch.", ""))
            calls[0] += 1
            if calls[0] >= 32:
                handle.remove()

    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    try:
        yield seen
    finally:
        handle.remove()


def mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


# --- vllm: rollouts of the vLLM engine against the hf engine --------------------------------------------------

def check_vllm(args, device, out) -> Result:
    import torch

    from training.config import TrainConfig, default_tiny_model_dir
    from training.data import default_rewards, make_prompt_source
    from training.evaluate import decode_completions
    from training.loop import load_model
    from training.rollout_engines import make_rollout_engine
    from training.verifiers import build_reward

    if device.type != "cuda":
        return Result("vllm", "skipped", "vLLM needs CUDA")
    prompts, group, max_new = 32, 8, 8
    model, tok = load_model(default_tiny_model_dir(), device)
    model.eval()
    examples = make_prompt_source("arithmetic").eval_set(prompts)
    template = TrainConfig.from_dict({"task": "arithmetic"}, check_paths=False).prompt_template()
    ids = [template.encode_example(tok, ex) for ex in examples for _ in range(group)]
    rows = [ex for ex in examples for _ in range(group)]
    seeds = torch.randint(0, 2**62, (len(ids),), generator=torch.Generator().manual_seed(args.seed)).tolist()
    reward = build_reward(default_rewards("arithmetic"))
    stats, tokens, seconds = {}, 0.0, 0.0
    for name in ("hf", "vllm"):
        engine = make_rollout_engine(name, model, tok)
        t0 = time.perf_counter()
        batch = engine.generate(ids, max_new_tokens=max_new, temperature=1.0, top_p=1.0, top_k=0,
                                generator=torch.Generator().manual_seed(args.seed), row_seeds=seeds)
        elapsed = time.perf_counter() - t0
        r = reward(decode_completions(tok, batch), rows).totals
        m = mean(r)
        se = math.sqrt(sum((x - m) ** 2 for x in r) / (len(r) - 1) / len(r))
        stats[name] = (m, se, len(r))
        if name == "vllm":
            tokens, seconds = float(batch.lengths.sum()), elapsed
        out(f"[vllm] {name:<4} engine: mean reward {m:.3f} ± {se:.3f} (SE) over {len(r)} samples, "
            f"{float(batch.lengths.sum()) / elapsed:.0f} completion tokens/s")
    (m1, s1, _), (m2, s2, _) = stats["hf"], stats["vllm"]
    bound = 2 * math.sqrt(s1 ** 2 + s2 ** 2)
    ok = abs(m1 - m2) <= bound
    return Result("vllm", "pass" if ok else "fail", f"|hf - vllm| = {abs(m1 - m2):.3f} vs 2 SE = {bound:.3f}",
                  tokens / seconds if seconds else None, peak_mb(device))


# --- bf16: the training loop under bfloat16 autocast ----------------------------------------------------------

def check_bf16(args, device, out) -> Result:
    from training.config import TrainConfig
    from training.loop import train

    steps = args.steps or (4 if args.smoke else 80)
    prompts, group = (4, 4) if args.smoke else (32, 8)
    cfg = TrainConfig.from_dict({"preset": "dapo", "task": "arithmetic", "total_steps": steps,
                                 "prompts_per_step": prompts, "group_size": group, "max_new_tokens": 6, "lr": 1e-4,
                                 "warmup_steps": 0 if args.smoke else 5, "seed": args.seed, "samples_per_step": 0,
                                 "device": device.type, "precision": "bf16"})
    out(f"[bf16] tiny model, arithmetic, dapo: {steps} steps x {prompts} prompts x {group}, precision bf16, "
        f"device {device.type}")
    sink = MetricsSink()
    with tempfile.TemporaryDirectory(prefix="gpu-check-bf16-") as tmp, linear_dtypes() as dtypes:
        t0 = time.perf_counter()
        result = train(cfg, tmp, sink)
        wall = time.perf_counter() - t0
    ms = sink.metrics
    rewards = [m["reward/mean"] for m in ms]
    k = min(10, max(1, len(rewards) // 2))
    first, last = mean(rewards[:k]), mean(rewards[-k:])
    step_s = sum(m["step_time_s"] for m in ms)
    tok_s = completion_tokens(ms, prompts, group) / step_s if step_s else None
    out(f"[bf16] {result.status} after {result.step} steps in {wall:.1f} s ({step_s / max(len(ms), 1):.3f} s/step); "
        f"linear layers computed in {', '.join(sorted(dtypes)) or 'nothing seen'}")
    out(f"[bf16] reward/mean per step: {' '.join(f'{r:.2f}' for r in rewards)}")
    out(f"[bf16] reward mean of the first {k} steps {first:.3f}, of the last {k} {last:.3f}")
    problems = []
    if result.status != "succeeded" or len(ms) != steps:
        problems.append(f"ran {len(ms)} of {steps} steps ({result.status})")
    if not all_finite(ms):
        problems.append("a metric is not finite")
    if dtypes != {"bfloat16"}:
        problems.append(f"linear layers computed in {sorted(dtypes)}, not bfloat16")
    if not args.smoke and not last > first + 0.05:
        problems.append(f"no learning: last {k} steps' reward {last:.3f} not above the first {k}'s {first:.3f} + 0.05")
    learned = "not judged (smoke)" if args.smoke else f"reward rose {first:.3f} -> {last:.3f}"
    return Result("bf16", "fail" if problems else "pass", "; ".join(problems) or f"{learned}, bf16 compute",
                  tok_s, peak_mb(device), {"rewards": rewards})


# --- smollm2: Seedbed's loop against TRL's GRPOTrainer --------------------------------------------------------

def smollm2_model(args, tmp: str, out) -> tuple[str, str]:
    """(model folder, what it is): real weights where they can be had, else a random init of the architecture."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    def has_weights(folder):
        return folder and os.path.isfile(os.path.join(folder, "config.json")) and any(
            n.endswith(".safetensors") for n in os.listdir(folder))

    if not args.smoke:
        if has_weights(args.smollm2):
            return args.smollm2, "SmolLM2-135M-Instruct, real weights"
        if args.gguf and os.path.isfile(args.gguf):
            from training.models import import_gguf

            folder = os.path.join(tmp, "smollm2")
            import_gguf(args.gguf, folder, log=lambda line: out(f"[smollm2] {line}"))
            return folder, "SmolLM2-135M-Instruct, real weights (imported from its GGUF file here)"
        if has_weights(SMOLLM2_FOLDER):
            return SMOLLM2_FOLDER, "SmolLM2-135M-Instruct, real weights"
    # the architecture alone: its config and tokenizer, from whatever folder or GGUF file has them
    if args.smollm2_arch and os.path.isfile(os.path.join(args.smollm2_arch, "config.json")):
        source, kw = args.smollm2_arch, {}
    elif os.path.isfile(os.path.join(SMOLLM2_FOLDER, "config.json")):
        source, kw = SMOLLM2_FOLDER, {}
    else:
        from training.models import smollm2_gguf

        gguf = args.gguf if args.gguf and os.path.isfile(args.gguf) else smollm2_gguf()
        source, kw = os.path.dirname(gguf), {"gguf_file": os.path.basename(gguf)}
    config = AutoConfig.from_pretrained(source, **kw)
    tokenizer = AutoTokenizer.from_pretrained(source, **kw)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    if args.smoke:  # the same family, tokenizer and chat template; a model small enough for a CPU test
        config.num_hidden_layers, config.hidden_size, config.intermediate_size = 2, 64, 128
        config.num_attention_heads, config.num_key_value_heads, config.head_dim = 4, 2, 16
    torch.manual_seed(args.seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    folder = os.path.join(tmp, "smollm2-random")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    what = ("a shrunken SmolLM2 architecture, random weights (smoke)" if args.smoke else
            "RANDOM INIT of SmolLM2-135M-Instruct's architecture (its weights were not available here): "
            "throughput and memory only, no learning expected")
    return folder, what


def run_seedbed_engine(model_dir, steps, seed, device, precision, out_dir, shape, task_size) -> dict:
    from real_model import INSTRUCTION, LR, REWARDS, TASK, TASK_PARAMS, TEMPERATURE

    from training.config import TrainConfig
    from training.loop import train

    prompts, group, max_new = shape
    cfg = TrainConfig.from_dict({
        "preset": "grpo", "model_path": model_dir, "task": TASK, "task_params": TASK_PARAMS, "task_size": task_size,
        "rewards": REWARDS, "chat_template": "on", "answer_instruction": INSTRUCTION, "temperature": TEMPERATURE,
        "total_steps": steps, "prompts_per_step": prompts, "group_size": group, "max_new_tokens": max_new,
        "lr": LR, "kl_coef": 0.0, "seed": seed, "samples_per_step": 0, "device": device.type,
        "precision": precision})
    sink = MetricsSink()
    t0 = time.perf_counter()
    result = train(cfg, out_dir, sink)
    wall = time.perf_counter() - t0
    ms = sink.metrics
    return {"wall_s": wall, "step_s": sum(m["step_time_s"] for m in ms), "steps": len(ms), "status": result.status,
            "tokens": completion_tokens(ms, prompts, group), "rewards": [m["reward/mean"] for m in ms],
            "model_dir": os.path.join(out_dir, "checkpoints", f"step_{steps:06d}")}


def run_trl_engine(model_dir, steps, seed, device, precision, out_dir, shape, task_size) -> dict:
    from real_model import trl_trainer

    prompts, group, max_new = shape
    trainer, tok = trl_trainer(model_dir, out_dir, steps=steps, seed=seed, task_size=task_size, prompts=prompts,
                               group=group, max_new=max_new, use_cpu=device.type == "cpu", bf16=precision == "bf16")
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # its per-step log dicts; the figures are printed below
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0
    logs = [h for h in trainer.state.log_history if "completions/mean_length" in h]
    trainer.save_model(out_dir)
    tok.save_pretrained(out_dir)
    del trainer
    # its own timing of each step where it logs one (else the training call's wall time)
    step_s = sum(float(h["step_time"]) for h in logs) if all("step_time" in h for h in logs) else wall
    return {"wall_s": wall, "step_s": step_s, "steps": len(logs), "status": "succeeded",
            "tokens": sum(h["completions/mean_length"] for h in logs) * prompts * group,
            "rewards": [h.get("reward", float("nan")) for h in logs], "model_dir": out_dir}


def pass1(model_dir, device, problems, samples, max_new) -> list[float]:
    from real_model import INSTRUCTION, REWARDS, TEMPERATURE, held_out

    from training.evaluate import evaluate_examples
    from training.loop import load_model
    from training.prompts import PromptTemplate

    model, tok = load_model(model_dir, device)
    model.eval()
    res = evaluate_examples(model, tok, held_out(problems), n=samples, ks=[1], temperature=TEMPERATURE,
                            max_new_tokens=max_new, rewards=REWARDS, seed=12345,
                            template=PromptTemplate(chat="on", instruction=INSTRUCTION))
    del model
    return [p["c"] / p["n"] for p in res["problems"]]


def check_smollm2(args, device, out) -> Result:
    from real_model import GROUP, MAX_TOKENS, PROMPTS, gain_with_ci

    steps = args.real_steps or (2 if args.smoke else 40)
    shape = (2, 2, 8) if args.smoke else (PROMPTS, GROUP, MAX_TOKENS)
    problems, samples = (args.problems or (4 if args.smoke else 128)), (2 if args.smoke else 4)
    precision = "bf16" if device.type == "cuda" else "fp32"
    runs, peaks = {}, {}
    with tempfile.TemporaryDirectory(prefix="gpu-check-smollm2-") as tmp:
        t0 = time.perf_counter()
        try:
            model_dir, what = smollm2_model(args, tmp, out)
        except FileNotFoundError as exc:  # no weights, no GGUF file, no architecture folder
            return Result("smollm2", "skipped", f"SmolLM2's files missing ({exc})")
        real = "real weights" in what
        out(f"[smollm2] model: {what} ({time.perf_counter() - t0:.0f} s to get it)")
        out(f"[smollm2] {steps} steps x {shape[0]} prompts x {shape[1]} completions, at most {shape[2]} tokens, "
            f"precision {precision} on {device.type}, each engine")
        base = pass1(model_dir, device, problems, samples, shape[2])
        out(f"[smollm2] base model: held-out pass@1 {mean(base):.3f} ({problems} problems x {samples})")
        for name, fn in (("seedbed", run_seedbed_engine), ("trl", run_trl_engine)):
            free_memory(device)
            reset_peak(device)
            res = fn(model_dir, steps, args.seed, device, precision, os.path.join(tmp, name), shape,
                     64 if args.smoke else 4096)
            peaks[name] = peak_mb(device)
            free_memory(device)
            res["per_problem"] = pass1(res.pop("model_dir"), device, problems, samples, shape[2])
            runs[name] = res
            out(f"[smollm2] {name:<8} {res['tokens'] / res['step_s']:8.1f} completion tok/s  "
                f"{res['step_s'] / max(res['steps'], 1):6.3f} s/step  ({res['wall_s']:.1f} s training call)  "
                f"peak {peaks[name]:7.0f} MB  "
                f"reward {mean(res['rewards'][:5]):.2f} (first 5 steps) -> {mean(res['rewards'][-5:]):.2f} (last 5)  "
                f"pass@1 {mean(res['per_problem']):.3f}")
    sb, trl = runs["seedbed"], runs["trl"]
    gain, lo, hi = gain_with_ci(trl["per_problem"], sb["per_problem"])
    sb_tok, trl_tok = sb["tokens"] / sb["step_s"], trl["tokens"] / trl["step_s"]
    out(f"[smollm2] seedbed/trl: tokens/s x{sb_tok / trl_tok:.2f}, s/step "
        f"x{(sb['step_s'] / sb['steps']) / (trl['step_s'] / trl['steps']):.2f}, peak memory "
        f"x{peaks['seedbed'] / peaks['trl']:.2f}; pass@1 seedbed - trl {gain:+.3f} [95 % CI {lo:+.3f}, {hi:+.3f}]")
    problems_found = []
    for name, res in runs.items():
        if res["steps"] != steps or res["status"] != "succeeded":
            problems_found.append(f"{name} ran {res['steps']} of {steps} steps")
        if not all(math.isfinite(r) for r in res["rewards"]):
            problems_found.append(f"{name}: a reward is not finite")
    if hi < 0:
        problems_found.append(f"Seedbed's pass@1 is below TRL's beyond the 95 % interval ({gain:+.3f})")
    note = (f"both engines ran; seedbed {sb_tok:.0f} vs trl {trl_tok:.0f} tok/s; pass@1 base {mean(base):.3f}, "
            f"seedbed {mean(sb['per_problem']):.3f}, trl {mean(trl['per_problem']):.3f}")
    if not real:
        note += "; RANDOM WEIGHTS" if not args.smoke else "; random weights (smoke)"
    return Result("smollm2", "fail" if problems_found else "pass", "; ".join(problems_found) or note,
                  sb_tok, peaks["seedbed"], {"trl_tokens_per_s": trl_tok, "trl_peak_mb": peaks["trl"],
                                             "real_weights": real})


# --- ranks: 2 ranks through python -m training run (torchrun + training.distributed) --------------------------

class DeviceMemoryWatch:
    """The most device memory in use (all processes) above what was in use when it started, sampled every 0.1 s."""

    def __init__(self, device):
        import torch

        self.cuda = device.type == "cuda"
        self.peak = 0.0
        self.stop = threading.Event()
        if self.cuda:
            free, total = torch.cuda.mem_get_info()
            self.base = total - free
            self.thread = threading.Thread(target=self._run, daemon=True)
            self.thread.start()

    def _run(self):
        import torch

        while not self.stop.wait(0.1):
            free, total = torch.cuda.mem_get_info()
            self.peak = max(self.peak, (total - free - self.base) / 2**20)

    def finish(self) -> float | None:
        self.stop.set()
        return self.peak if self.cuda else None


def cli_run(config: dict, out_dir: str) -> tuple[list[dict], list, float, str]:
    """``python -m training run`` on ``config``: (metrics per step, the last ranks report, wall s, stderr tail)."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "config.json")
    with open(path, "w") as fh:
        json.dump(config, fh)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "training", "run", path, "--out", os.path.join(out_dir, "run")],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    run_dir = os.path.join(out_dir, "run")
    metrics = []
    if os.path.exists(os.path.join(run_dir, "metrics.jsonl")):
        metrics = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    ranks = []
    events = os.path.join(run_dir, "events.jsonl")
    if os.path.exists(events):
        reports = [json.loads(line)["ranks"] for line in open(events) if '"ranks"' in line]
        ranks = reports[-1] if reports else []
    tail = "" if proc.returncode == 0 else f"exit code {proc.returncode}: {proc.stderr[-2000:]}"
    return metrics, ranks, wall, tail


def check_ranks(args, device, out) -> Result:
    import torch

    if device.type == "cuda" and not torch.distributed.is_gloo_available():
        return Result("ranks", "skipped", "torch.distributed has no gloo backend here (2 ranks on one GPU need it)")
    steps = args.rank_steps or (2 if args.smoke else 8)
    prompts, group = 8, 8 if not args.smoke else 2
    base = {"task": "arithmetic", "total_steps": steps, "prompts_per_step": prompts, "group_size": group,
            "max_new_tokens": 8, "device": device.type, "samples_per_step": 0, "seed": args.seed}
    gpus = torch.cuda.device_count() if device.type == "cuda" else 0
    out(f"[ranks] tiny model, arithmetic: {steps} steps x {prompts} prompts x {group}; 2 ranks, ddp, on "
        + (f"{gpus} GPU(s): " + ("both on one GPU, gloo" if gpus < 2 else "one GPU each, nccl") if gpus else "CPU, gloo"))
    with tempfile.TemporaryDirectory(prefix="gpu-check-ranks-") as tmp:
        watch = DeviceMemoryWatch(device)
        two, ranks, wall, err = cli_run({**base, "nproc_per_node": 2, "strategy": "ddp"}, os.path.join(tmp, "two"))
        peak = watch.finish()
        if err:
            out(f"[ranks] 2 ranks failed: {err}")
        one, _, wall1, err1 = ([], [], 0.0, "") if args.smoke else cli_run(base, os.path.join(tmp, "one"))
    step_s = sum(m["step_time_s"] for m in two)
    tok_s = completion_tokens(two, prompts, group) / step_s if step_s else None
    out(f"[ranks] 2 ranks: {len(two)} steps in {wall:.1f} s wall (torchrun, imports and model load included), "
        f"{step_s / max(len(two), 1):.3f} s/step; ranks reported: "
        + ", ".join(f"rank {r['rank']} pid {r['pid']} step {r['step']}" for r in ranks))
    problems = []
    if err or len(two) != steps:
        problems.append(f"ran {len(two)} of {steps} steps" + (f" ({err.splitlines()[0]})" if err else ""))
    if len(ranks) != 2:
        problems.append(f"{len(ranks)} ranks reported, not 2")
    if not all_finite(two):
        problems.append("a metric is not finite")
    same = None
    if one:
        a = [round(m["reward/mean"], 4) for m in two[:3]]
        b = [round(m["reward/mean"], 4) for m in one[:3]]
        same = a == b
        out(f"[ranks] first steps' reward/mean: 2 ranks {a}, 1 process {b} ({'the same' if same else 'different'}); "
            f"1 process: {wall1:.1f} s wall")
        if err1:
            out(f"[ranks] 1 process failed: {err1}")
    note = f"2 ranks ran {len(two)} of {steps} steps" + ("" if same is None else f"; first steps' rewards as 1 process: {'yes' if same else 'no'}")
    if peak is not None:
        note += "; peak is both ranks' device memory (mem_get_info)"
    return Result("ranks", "fail" if problems else "pass", "; ".join(problems) or note, tok_s, peak)


def check_packed(args, device, out) -> Result:
    from training.config import TrainConfig
    from training.loop import Seed, train, train_group

    seeds, steps = (2, 2) if args.smoke else (8, args.real_steps or 6)
    shape = (2, 2, 8) if args.smoke else (4, 8, 64)
    precision = "bf16" if device.type == "cuda" else "fp32"
    with tempfile.TemporaryDirectory(prefix="gpu-check-packed-") as tmp:
        try:
            model_dir, what = smollm2_model(args, tmp, out)
        except FileNotFoundError as exc:
            return Result("packed", "skipped", f"SmolLM2's files missing ({exc})")
        knobs = {"preset": "grpo", "model_path": model_dir, "task": "arithmetic", "prompts_per_step": shape[0],
                 "group_size": shape[1], "max_new_tokens": shape[2], "total_steps": steps, "kl_coef": 0.0,
                 "chat_template": "on", "samples_per_step": 0, "device": device.type, "precision": precision}
        configs = [TrainConfig.from_dict({**knobs, "seed": n}) for n in range(seeds)]
        out(f"[packed] {what}: {seeds} seeds x {steps} steps x {shape[0]} prompts x {shape[1]} x <= {shape[2]} "
            f"tokens, {precision}, packed against one seed alone")
        free_memory(device)
        reset_peak(device)
        alone = MetricsSink()
        train(configs[0], os.path.join(tmp, "alone"), alone)
        alone_peak = peak_mb(device)
        free_memory(device)
        reset_peak(device)
        sinks = [MetricsSink() for _ in configs]
        train_group([Seed(c, os.path.join(tmp, f"seed{n}"), sink) for n, (c, sink) in enumerate(zip(configs, sinks))])
        packed_peak = peak_mb(device)

    def rate(ms):  # steps after the first (its first-touch costs), completion tokens over the steps' time
        later = ms[1:] or ms
        return completion_tokens(later, shape[0], shape[1]) / sum(m["step_time_s"] for m in later)

    one = rate(alone.metrics)
    together = sum(rate(s.metrics) for s in sinks)  # each seed's own tokens over the group's step times
    ratio = together / one if one else float("nan")
    out(f"[packed] one seed: {one:.0f} tokens/s, peak {alone_peak:.0f} MB; {seeds} packed: {together:.0f} tokens/s "
        f"together ({ratio:.2f}x), peak {packed_peak:.0f} MB ({packed_peak / seeds:.0f} MB a seed)")
    problems = [f"seed {n} ran {len(s.metrics)} of {steps} steps" for n, s in enumerate(sinks) if len(s.metrics) != steps]
    problems += ["a metric is not finite"] if not all(all_finite(s.metrics) for s in sinks) else []
    note = f"{seeds} seeds packed: {ratio:.2f}x one seed's tokens/s (goal >= 4x on a GPU)"
    return Result("packed", "fail" if problems else "pass", "; ".join(problems) or note, together, packed_peak,
                  {"ratio": ratio, "alone_peak_mb": alone_peak})


CHECKS = {"vllm": check_vllm, "bf16": check_bf16, "smollm2": check_smollm2, "ranks": check_ranks,
          "packed": check_packed}


# --- the report ------------------------------------------------------------------------------------------------

def format_report(results: list[Result], device_type: str) -> str:
    mem = "peak GPU MB" if device_type == "cuda" else "peak RSS MB"
    lines = [f"{'path':<8} {'result':<8} {'tokens/s':>9} {mem:>12}  note",
             f"{'-' * 8} {'-' * 8} {'-' * 9} {'-' * 12}  {'-' * 4}"]
    for r in results:
        tok = "-" if r.tokens_per_s is None else f"{r.tokens_per_s:.0f}"
        peak = "-" if r.peak_mb is None else f"{r.peak_mb:.0f}"
        note = f"skipped: {r.reason}" if r.status == "skipped" else r.reason
        lines.append(f"{r.path:<8} {r.status:<8} {tok:>9} {peak:>12}  {note}")
    return "\n".join(lines)


def exit_code(results: list[Result]) -> int:
    return 1 if any(r.status == "fail" for r in results) else 0


def environment(device) -> str:
    import torch
    import transformers

    where = (f"{torch.cuda.get_device_name(device)} ({torch.cuda.get_device_properties(device).total_memory / 2**30:.0f} GiB), "
             f"CUDA {torch.version.cuda}" if device.type == "cuda" else f"CPU ({os.cpu_count()} cores)")
    versions = []
    for name in ("trl", "datasets", "reasoning_gym", "vllm", "accelerate"):
        if missing([name]):
            versions.append(f"{name} missing")
        else:
            try:
                from importlib.metadata import version

                versions.append(f"{name} {version(name.replace('_', '-'))}")
            except Exception:  # noqa: BLE001 - a package without metadata: name it anyway
                versions.append(name)
    return (f"{where}; Python {platform.python_version()}, torch {torch.__version__}, transformers "
            f"{transformers.__version__}; " + ", ".join(versions))


def run_checks(args, out=print) -> list[Result]:
    import torch

    device = torch.device(args.device)
    out(f"bench/gpu_check.py {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {environment(device)}")
    out(f"paths: {', '.join(args.paths)}{' (smoke)' if args.smoke else ''}")
    results = []
    for name in args.paths:
        gone = missing(NEEDS[name])
        if gone:
            results.append(Result(name, "skipped", f"{gone} missing"))
            out(f"\n== {name}: skipped: {gone} missing")
            continue
        out(f"\n== {name}")
        free_memory(device)
        reset_peak(device)
        t0 = time.perf_counter()
        try:
            res = CHECKS[name](args, device, out)
        except Exception as exc:  # noqa: BLE001 - a path that breaks is a failed path, reported; the others run
            out(traceback.format_exc()[-3000:])
            res = Result(name, "fail", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300])
        out(f"== {name}: {res.status}{': ' + res.reason if res.reason else ''} ({time.perf_counter() - t0:.0f} s)")
        results.append(res)
    return results


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # weight loading and saving bars

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here: run with --device cpu (and --smoke for the quick version)", file=sys.stderr)
        return 2
    started = time.perf_counter()
    results = run_checks(args, lambda line: print(line, flush=True))
    print(f"\n{format_report(results, args.device)}")
    code = exit_code(results)
    print(f"\n{time.perf_counter() - started:.0f} s in all; exit code {code}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
