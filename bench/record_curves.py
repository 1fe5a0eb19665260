"""Record real seed-sweep learning curves of the tiny task for bench/early_stopping.py.

Each sweep is one training config (a small variation of algorithm and learning rate) run with several seeds
through the training CLI (``python -m training run CONFIG.yaml --out DIR``), at most ``--jobs`` processes at
once. Each sweep's curves are stored as bench/curves/<sweep>.json:

    {"sweep": "grpo-lr1e-4", "config": {...}, "steps": 40,
     "runs": {"seed-0": {"reward/mean": [v1, v2, ...], "accuracy": [...], "entropy": [...]}, ...}}

where list item k holds the value logged at step k + 1. A sweep whose file exists is skipped, so the script
can be stopped and started again.

    .venv/bin/python bench/record_curves.py --model var/models/tiny --seeds 8 --steps 40 --jobs 2
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METRICS = ("reward/mean", "accuracy", "entropy")

# One sweep per config: GRPO, DAPO and Dr. GRPO at learning rates from comfortable to too high (a few seeds of
# the high-lr sweeps collapse), so the set holds both seed-sensitive and seed-insensitive sweeps.
SWEEPS: dict[str, dict] = {
    "grpo-lr1e-4": {"preset": "grpo", "lr": 1e-4},
    "grpo-lr2e-4": {"preset": "grpo", "lr": 2e-4},
    "grpo-lr4e-4": {"preset": "grpo", "lr": 4e-4},
    "grpo-nokl-lr2e-4": {"preset": "grpo", "lr": 2e-4, "kl_coef": 0.0},
    "dapo-lr1e-4": {"preset": "dapo", "lr": 1e-4},
    "dapo-lr2e-4": {"preset": "dapo", "lr": 2e-4},
    "drgrpo-lr1e-4": {"preset": "dr_grpo", "lr": 1e-4},
    "drgrpo-lr2e-4": {"preset": "dr_grpo", "lr": 2e-4},
    "grpo-t1.2-lr1e-4": {"preset": "grpo", "lr": 1e-4, "temperature": 1.2},
    "dapo-lr3e-4": {"preset": "dapo", "lr": 3e-4},
}


def run_seed(model: str, overrides: dict, seed: int, steps: int, workdir: str) -> dict[str, list[float]]:
    """Train one seed through the CLI and return its curves (one value per step for each metric)."""
    config = {"model_path": model, "task": "arithmetic", "total_steps": steps, "prompts_per_step": 8,
              "group_size": 8, "samples_per_step": 0, "seed": seed, **overrides}
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
    return {name: [round(float(by_step[s][name]), 4) for s in range(1, steps + 1)] for name in METRICS}


def record_sweep(name: str, overrides: dict, model: str, seeds: int, steps: int, jobs: int, folder: str) -> str:
    target = os.path.join(folder, f"{name}.json")
    if os.path.exists(target):
        return f"{name}: exists, skipped"
    started = time.time()
    with tempfile.TemporaryDirectory(prefix=f"seedbed-{name}-") as workdir:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {seed: pool.submit(run_seed, model, overrides, seed, steps, workdir) for seed in range(seeds)}
            runs = {f"seed-{seed}": future.result() for seed, future in futures.items()}
    data = {"sweep": name, "config": overrides, "steps": steps, "runs": runs}
    with open(target, "w", encoding="utf-8") as fh:
        json.dump(data, fh, separators=(",", ":"))
    return f"{name}: {seeds} seeds x {steps} steps in {time.time() - started:.0f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=os.path.join(ROOT, "var", "models", "tiny"),
                        help="tiny model folder; built with `python -m training bootstrap-tiny` when missing")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=2, help="training processes at once")
    parser.add_argument("--sweeps", default=",".join(SWEEPS), help="comma-separated sweep names")
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "curves"))
    args = parser.parse_args(argv)
    unknown = [name for name in args.sweeps.split(",") if name not in SWEEPS]
    if unknown:
        parser.error(f"--sweeps: unknown sweep(s) {', '.join(unknown)}; known: {', '.join(SWEEPS)}")
    if not os.path.isfile(os.path.join(args.model, "config.json")):
        subprocess.run([sys.executable, "-m", "training", "bootstrap-tiny", "--out", args.model], cwd=ROOT, check=True)
    os.makedirs(args.out, exist_ok=True)
    for name in args.sweeps.split(","):
        print(record_sweep(name, SWEEPS[name], args.model, args.seeds, args.steps, args.jobs, args.out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
