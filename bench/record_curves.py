"""Record real seed-sweep learning curves for bench/early_stopping.py (the real corpus).

Each sweep is one training config (a preset, a learning rate, a task and a few knobs) run with ``seeds``
seeds through the training CLI (``python -m training run CONFIG.json --out DIR``, one torch thread each), at
most ``--jobs`` processes at once. Each sweep is stored as one gzip'd JSON file,
bench/curves/real/<sweep>.json.gz:

    {"format": 2, "sweep": "grpo-lr1e-4", "config": {...BASE and the sweep's knobs...}, "steps": 100, "seeds": 8,
     "seconds": 240.0, "metrics": ["reward/mean", ...],
     "runs": {"seed-0": {"reward/mean": [v1, v2, ...], ...}, ...}}

where list item k holds the value logged at step k + 1, rounded to 4 significant digits (``null`` where the
step did not log the metric: ``kl`` in a run without a reference model, ``entropy`` on a DAPO step whose
dynamic sampling found no group to train on). :func:`load_sweep` reads one file (the benchmark's loader). A
sweep whose file exists is skipped, so the script can be stopped and started again; a sweep with a failed seed
is reported and left unwritten. The corpus was recorded from commit f3094da's training code (a clean copy of
the tree, as other work went on in the checkout): 32 sweeps in 2,697 s of sweep time with --jobs 2 on 2
shared cores, 212 KiB.

    nice -n 5 .venv/bin/python bench/record_curves.py --jobs 2            # every sweep below
    .venv/bin/python bench/record_curves.py --sweeps grpo-lr1e-4 --seeds 8
    .venv/bin/python bench/record_curves.py --convert-legacy             # old bench/curves/*.json -> real40/

The first corpus (10 arithmetic sweeps x 8 seeds x 40 steps, three metrics, plain JSON) was converted to this
format under bench/curves/real40/ with ``--convert-legacy``.
"""
from __future__ import annotations

import argparse
import glob
import gzip
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "bench", "curves", "real")
LEGACY_CORPUS = os.path.join(ROOT, "bench", "curves", "real40")
FORMAT = 2
# What the ranking policies read (reward/mean, accuracy) and what the health guards read (entropy collapse,
# clipped completions, groups without a learning signal), plus the KL and the completion length, which explain
# a collapse when one is seen. Names as training/loop.py logs them.
METRICS = ("reward/mean", "accuracy", "entropy", "length/clipped_frac", "frac_zero_std_groups", "kl",
           "length/mean")

# The reasoning-gym task: one-digit additions written "Calculate 4+1." (no spaces), the answer read as the
# completion's last number. The tiny model (SFT'd on "a+b=") starts at a reward of ~0.03 there and learns to
# ~0.07 in 100 steps at lr 1e-3 with 16 completions a prompt (a probe run); chain_sum's
# one-digit "... 4 - 1 =" rises to ~0.05 then falls back, a curve shape the arithmetic task lacks.
RG_LAST_NUMBER = [{"name": "reasoning_gym", "weight": 1.0, "params": {"extract": "last_number"}}]
RG_ADD = {"task": "reasoning_gym:basic_arithmetic", "rewards": RG_LAST_NUMBER, "prompts_per_step": 2, "group_size": 16,
          "task_params": {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1, "operators": ["+"],
                          "allow_parentheses": False, "allow_negation": False, "whitespace": "no_space"}}
RG_CHAIN = {"task": "reasoning_gym:chain_sum", "rewards": RG_LAST_NUMBER, "prompts_per_step": 2, "group_size": 16,
            "task_params": {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}}
COUNTDOWN = {"task": "countdown", "prompts_per_step": 2, "group_size": 16}

# What every sweep runs unless it says otherwise. 4 prompts x 8 completions a step: on this machine (2 cores
# shared with other work) an 8 x 8 sweep of 8 seeds x 100 steps took 176 s with --jobs 2, and 4 x 8 lets the
# whole corpus record in about an hour; the low-reward tasks (reasoning-gym, countdown) take 2 prompts x 16
# completions (the same 32 a step), or most groups would have no reward variance to learn from.
BASE = {"task": "arithmetic", "total_steps": 100, "prompts_per_step": 4, "group_size": 8, "samples_per_step": 0}

# One sweep per config, in the order they are recorded (the most varied first, so a partial corpus still
# spans presets and tasks): GRPO, DAPO and Dr. GRPO from too low to too high a learning rate (some high-lr seeds
# collapse), other temperatures, KL, estimators, batch shapes, a truncating completion length, longer runs,
# a reasoning-gym task and the harder countdown task (where little is learnt: a sweep of near-ties).
SWEEPS: dict[str, dict] = {
    "grpo-lr2e-4": {"preset": "grpo", "lr": 2e-4},
    "dapo-lr2e-4": {"preset": "dapo", "lr": 2e-4},
    "drgrpo-lr2e-4": {"preset": "dr_grpo", "lr": 2e-4},
    "rg-add-grpo-lr1e-3": {"preset": "grpo", "lr": 1e-3, **RG_ADD},
    "countdown-grpo-lr4e-4": {"preset": "grpo", "lr": 4e-4, **COUNTDOWN},
    "grpo-lr8e-4": {"preset": "grpo", "lr": 8e-4},
    "dapo-lr8e-4": {"preset": "dapo", "lr": 8e-4},
    "drgrpo-lr8e-4": {"preset": "dr_grpo", "lr": 8e-4},
    "rg-add-drgrpo-lr5e-4": {"preset": "dr_grpo", "lr": 5e-4, **RG_ADD},
    "rg-chain-grpo-lr5e-4": {"preset": "grpo", "lr": 5e-4, **RG_CHAIN},
    "grpo-lr5e-5": {"preset": "grpo", "lr": 5e-5},
    "grpo-lr1e-4": {"preset": "grpo", "lr": 1e-4},
    "grpo-lr4e-4": {"preset": "grpo", "lr": 4e-4},
    "dapo-lr1e-4": {"preset": "dapo", "lr": 1e-4},
    "dapo-lr4e-4": {"preset": "dapo", "lr": 4e-4},
    "drgrpo-lr1e-4": {"preset": "dr_grpo", "lr": 1e-4},
    "drgrpo-lr4e-4": {"preset": "dr_grpo", "lr": 4e-4},
    "grpo-nokl-lr2e-4": {"preset": "grpo", "lr": 2e-4, "kl_coef": 0.0},
    "grpo-t1.2-lr1e-4": {"preset": "grpo", "lr": 1e-4, "temperature": 1.2},
    "grpo-t0.7-lr2e-4": {"preset": "grpo", "lr": 2e-4, "temperature": 0.7},
    "grpo-rloo-lr2e-4": {"preset": "grpo", "lr": 2e-4, "adv_estimator": "rloo"},
    "grpo-g16-lr2e-4": {"preset": "grpo", "lr": 2e-4, "prompts_per_step": 2, "group_size": 16},
    "grpo-p8-lr2e-4": {"preset": "grpo", "lr": 2e-4, "prompts_per_step": 8},
    "grpo-tok3-lr2e-4": {"preset": "grpo", "lr": 2e-4, "max_new_tokens": 3},
    "rg-add-grpo-lr3e-4": {"preset": "grpo", "lr": 3e-4, **RG_ADD},
    "dapo-g16-lr4e-4": {"preset": "dapo", "lr": 4e-4, "prompts_per_step": 2, "group_size": 16},
    "grpo-kl0.2-lr4e-4": {"preset": "grpo", "lr": 4e-4, "kl_coef": 0.2},
    "dapo-tok3-lr2e-4": {"preset": "dapo", "lr": 2e-4, "max_new_tokens": 3},
    "grpo-200steps-lr1e-4": {"preset": "grpo", "lr": 1e-4, "total_steps": 200},
    "dapo-150steps-lr2e-4": {"preset": "dapo", "lr": 2e-4, "total_steps": 150},
    "countdown-grpo-lr1e-4": {"preset": "grpo", "lr": 1e-4, **COUNTDOWN},
    "countdown-drgrpo-lr8e-4": {"preset": "dr_grpo", "lr": 8e-4, **COUNTDOWN},
}


def round_sig(value: float, digits: int = 4) -> float | None:
    """``value`` to ``digits`` significant digits (``float(f"{v:.4g}")``); None for a missing or non-finite
    value (JSON has no NaN)."""
    if value is None or not math.isfinite(value):
        return None
    return float(f"{value:.{digits}g}")


def run_seed(model: str, sweep_config: dict, seed: int, workdir: str) -> dict[str, list]:
    """Train one seed of a sweep's config (BASE and its own knobs) through the CLI and return its curves (one
    value per step for each metric)."""
    config = {"model_path": model, "seed": seed, **sweep_config}
    steps = config["total_steps"]
    out = os.path.join(workdir, f"seed-{seed}")
    path = os.path.join(workdir, f"seed-{seed}.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(config, fh)
    # One thread per process: the machine's cores are shared with other work.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "training", "run", path, "--out", out], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"seed {seed} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    by_step: dict[int, dict] = {}
    with open(os.path.join(out, "metrics.jsonl"), encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            by_step[row["step"]] = row
    if sorted(by_step) != list(range(1, steps + 1)):
        raise RuntimeError(f"seed {seed}: expected steps 1..{steps}, got {sorted(by_step)[:5]}...")
    return {name: [round_sig(by_step[s].get(name)) for s in range(1, steps + 1)] for name in METRICS}


def write_sweep(path: str, data: dict) -> None:
    """One sweep as gzip'd compact JSON (written to a temporary name first: a stopped run leaves no half file;
    no name and mtime 0 in the gzip header, so the same curves give the same bytes)."""
    tmp = path + ".part"
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=9, mtime=0) as fh:
        fh.write(json.dumps(data, separators=(",", ":")).encode("utf-8"))
    os.replace(tmp, path)


def load_sweep(path: str) -> dict:
    """One recorded sweep (the format above), from a ``.json.gz`` or a plain ``.json`` file."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a format-{FORMAT} sweep file (run bench/record_curves.py "
                         "--convert-legacy for the old plain JSON files)")
    return data


def record_sweep(name: str, overrides: dict, model: str, seeds: int, steps: int, jobs: int, folder: str) -> str:
    """Record one sweep into ``folder`` (``steps``: for a sweep that does not set total_steps)."""
    target = os.path.join(folder, f"{name}.json.gz")
    if os.path.exists(target):
        return f"{name}: exists, skipped"
    config = {**BASE, "total_steps": steps, **overrides}
    steps = config["total_steps"]
    started = time.time()
    with tempfile.TemporaryDirectory(prefix=f"seedbed-{name}-") as workdir:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {seed: pool.submit(run_seed, model, config, seed, workdir) for seed in range(seeds)}
            try:
                runs = {f"seed-{seed}": future.result() for seed, future in futures.items()}
            except RuntimeError as exc:
                return f"{name}: FAILED, not written: {exc}"
    seconds = time.time() - started
    write_sweep(target, {"format": FORMAT, "sweep": name, "config": config, "steps": steps, "seeds": seeds,
                         "seconds": round(seconds, 1), "metrics": list(METRICS), "runs": runs})
    return f"{name}: {seeds} seeds x {steps} steps in {seconds:.0f} s"


def convert_legacy(source: str, folder: str) -> list[str]:
    """The first corpus's plain JSON files (``{"sweep", "config", "steps", "runs"}``) in this format."""
    os.makedirs(folder, exist_ok=True)
    written = []
    for path in sorted(glob.glob(os.path.join(source, "*.json"))):
        with open(path, encoding="utf-8") as fh:
            old = json.load(fh)
        if "runs" not in old:
            continue
        metrics = list(next(iter(old["runs"].values())))
        runs = {seed: {m: [round_sig(v) for v in series[m]] for m in metrics} for seed, series in old["runs"].items()}
        target = os.path.join(folder, f"{old['sweep']}.json.gz")
        write_sweep(target, {"format": FORMAT, "sweep": old["sweep"], "config": old["config"], "steps": old["steps"],
                             "seeds": len(runs), "seconds": None, "metrics": metrics, "runs": runs})
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=os.path.join(ROOT, "var", "models", "tiny"),
                        help="tiny model folder; built with `python -m training bootstrap-tiny` when missing")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=100, help="steps of a sweep that does not set total_steps")
    parser.add_argument("--jobs", type=int, default=2, help="training processes at once")
    parser.add_argument("--sweeps", default=",".join(SWEEPS), help="comma-separated sweep names")
    parser.add_argument("--out", default=CORPUS)
    parser.add_argument("--convert-legacy", action="store_true",
                        help="convert bench/curves/*.json (the first corpus) into --out (default bench/curves/real40)")
    args = parser.parse_args(argv)
    if args.convert_legacy:
        out = LEGACY_CORPUS if args.out == CORPUS else args.out
        for path in convert_legacy(os.path.join(ROOT, "bench", "curves"), out):
            print(path)
        return 0
    for flag, value, low, high in (("--seeds", args.seeds, 2, 64), ("--steps", args.steps, 1, 10_000),
                                   ("--jobs", args.jobs, 1, 16)):
        if not low <= value <= high:
            parser.error(f"{flag}: must be between {low} and {high}, got {value}")
    unknown = [name for name in args.sweeps.split(",") if name not in SWEEPS]
    if unknown:
        parser.error(f"--sweeps: unknown sweep(s) {', '.join(unknown)}; known: {', '.join(SWEEPS)}")
    if not os.path.isfile(os.path.join(args.model, "config.json")):
        subprocess.run([sys.executable, "-m", "training", "bootstrap-tiny", "--out", args.model], cwd=ROOT, check=True)
    os.makedirs(args.out, exist_ok=True)
    started = time.time()
    for name in args.sweeps.split(","):
        print(record_sweep(name, SWEEPS[name], args.model, args.seeds, args.steps, args.jobs, args.out), flush=True)
    print(f"all done in {time.time() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
