"""The distributed step's overhead: one process with 2 threads against 2 ranks with 1 thread each (DDP
and FSDP2, gloo), the same global batch, on the tiny model and on SmolLM2-135M-Instruct.

    python bench/distributed.py [--steps 30] [--repeats 2] [--real-steps 4] [--no-real] [--save]

Every run is ``python -m training run`` (the CLI: ``run_engine``, so a multi-rank run is the real torchrun +
supervisor + events path) in a fresh process, the variants alternating in each repeat (order reversed every other
repeat) so a drift of the machine's load hits each alike:

- ``1 x 2``: one process, 2 torch threads (OMP_NUM_THREADS=2);
- ``ddp 2 x 1`` / ``fsdp 2 x 1``: 2 ranks (nproc_per_node 2), 1 thread each;
- ``ddp 2 x 1 timed``: the same DDP run with SEEDBED_COMM_TIMING=1, whose gradient all-reduce is a blocking,
  timed hook (training.distributed.timed_allreduce_hook) instead of DDP's overlapped one: it gives the
  communication share and is not used for the speed figures.

Figures per variant (medians over repeats):
- ``s/step``: the median of ``step_time_s`` (the loop's own timing of a step: sampling, scoring, update and the
  collectives), steps 2..N;
- ``tokens/s``: completion tokens of steps 2..N over those steps' time;
- ``wall``: from starting the CLI to its end (imports, torchrun, model load, checkpoint);
- ``peak MB/rank``: peak resident memory of the training process (one process) or of each rank (the largest,
  as the ranks report it: ``ru_maxrss``);
- ``comm``: seconds a step spends blocked in collectives (``dist/comm_s``: the step's gathers and agreements,
  the loss normaliser, the full-state gather of fsdp, and with timing on DDP's gradient all-reduce) over the
  step's time. For fsdp it is a lower bound: FSDP2's own all-gathers and reduce-scatters run inside the forward
  and backward and are not separated.

The overhead of the distributed step is ``s/step(2 x 1) / s/step(1 x 2) - 1`` (target <= 15 %). On 2 cores no
speed-up is expected: both variants use the same 2 cores.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMOLLM2 = os.path.join(REPO, "var", "models", "smollm2-135m-instruct")

# the child: the CLI's own run command, then this process's peak memory (one process) on the last line
CHILD = ("import resource, sys; from training.__main__ import main; code = main(sys.argv[1:]); "
         "print('PEAK_MB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, flush=True); sys.exit(code)")

VARIANTS = {
    "1 x 2": ({"nproc_per_node": 1, "strategy": "none"}, {"OMP_NUM_THREADS": "2"}),
    "ddp 2 x 1": ({"nproc_per_node": 2, "strategy": "ddp"}, {"OMP_NUM_THREADS": "1"}),
    "fsdp 2 x 1": ({"nproc_per_node": 2, "strategy": "fsdp"}, {"OMP_NUM_THREADS": "1"}),
    "ddp 2 x 1 timed": ({"nproc_per_node": 2, "strategy": "ddp"}, {"OMP_NUM_THREADS": "1", "SEEDBED_COMM_TIMING": "1"}),
}


def tiny(steps: int) -> dict:
    return {"task": "arithmetic", "total_steps": steps, "prompts_per_step": 8, "group_size": 8, "max_new_tokens": 8,
            "device": "cpu", "samples_per_step": 2}


def real(steps: int) -> dict:
    """bench/engines.py's real-model workload (SmolLM2-135M-Instruct on easy basic_arithmetic), one sample logged."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from engines import real_config

    return {**real_config(steps), "samples_per_step": 1}


def run_once(config: dict, env_extra: dict, seed: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="seedbed-bench-dist-") as tmp:
        path = os.path.join(tmp, "config.json")
        with open(path, "w") as fh:
            json.dump({**config, "seed": seed}, fh)
        out = os.path.join(tmp, "out")
        env = {**os.environ, **env_extra, "PYTHONPATH": REPO}
        env.pop("SEEDBED_TORCH_THREADS", None)
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", CHILD, "run", path, "--out", out], cwd=REPO, env=env,
                              capture_output=True, text=True)
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            raise SystemExit(f"run failed:\n{proc.stderr[-3000:]}")
        metrics = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
        peak = float(proc.stdout.rsplit("PEAK_MB", 1)[1].split()[0])
        events = os.path.join(out, "events.jsonl")
        if os.path.exists(events):  # several ranks: each reported its own peak
            ranks = [json.loads(line)["ranks"] for line in open(events) if '"ranks"' in line]
            peak = max(r["rss_mb"] for r in ranks[-1])
    later = [m for m in metrics if m["step"] >= 2]
    step_s = statistics.median(m["step_time_s"] for m in later)
    tokens = sum(m["length/mean"] * config["prompts_per_step"] * config["group_size"] for m in later)
    comm = [m["dist/comm_s"] / m["step_time_s"] for m in later if "dist/comm_s" in m]
    return {"s_step": step_s, "tok_s": tokens / sum(m["step_time_s"] for m in later), "wall": wall, "peak": peak,
            "comm": statistics.median(comm) if comm else None,
            "reward": [round(m["reward/mean"], 3) for m in metrics][:3]}


def bench(name: str, config: dict, repeats: int, out) -> dict:
    results: dict[str, list] = {v: [] for v in VARIANTS}
    names = list(VARIANTS)
    for r in range(repeats):
        for v in (names if r % 2 == 0 else names[::-1]):
            knobs, env = VARIANTS[v]
            res = run_once({**config, **knobs}, env, seed=r)
            results[v].append(res)
            comm = "" if res["comm"] is None else f"  comm {100 * res['comm']:.1f} %"
            out(f"repeat {r + 1} {v:<16} {res['s_step']:.3f} s/step  {res['tok_s']:7.0f} tok/s  wall {res['wall']:.1f} s"
                f"  peak {res['peak']:.0f} MB/rank{comm}  rewards {res['reward']}  (load {os.getloadavg()[0]:.2f})")
    med = {v: {k: statistics.median(x[k] for x in rs) if rs[0][k] is not None else None
               for k in ("s_step", "tok_s", "wall", "peak", "comm")} for v, rs in results.items()}
    out(f"\n{'variant':<17}{'s/step':>8}{'tokens/s':>10}{'wall s':>8}{'peak MB/rank':>14}{'comm':>8}")
    for v, m in med.items():
        comm = "" if m["comm"] is None else f"{100 * m['comm']:.1f} %"
        out(f"{v:<17}{m['s_step']:>8.3f}{m['tok_s']:>10.0f}{m['wall']:>8.1f}{m['peak']:>14.0f}{comm:>8}")
    base = med["1 x 2"]["s_step"]
    for v in ("ddp 2 x 1", "fsdp 2 x 1"):
        over = med[v]["s_step"] / base - 1
        out(f"{name}: {v} over 1 x 2: {100 * over:+.1f} % s/step (target <= +15 %: {'met' if over <= 0.15 else 'NOT met'})")
    same = all(results[v][i]["reward"] == results["1 x 2"][i]["reward"] for v in VARIANTS for i in range(repeats))
    out(f"{name}: the first steps' rewards are the same in every variant (same completions): {'yes' if same else 'no'}")
    return med


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--real-steps", type=int, default=4)
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--save", action="store_true", help="also write bench/curves/distributed_<date>.txt")
    args = ap.parse_args()
    lines: list[str] = []

    def out(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    import torch

    started = time.perf_counter()
    out(f"bench/distributed.py ({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, load "
        f"{os.getloadavg()[0]:.2f}), torch {torch.__version__}, gloo")
    out(f"\n== tiny model, {args.steps} steps: {tiny(args.steps)} ==")
    bench("tiny", tiny(args.steps), args.repeats, out)
    if not args.no_real and os.path.isfile(os.path.join(SMOLLM2, "config.json")):
        out(f"\n== SmolLM2-135M-Instruct, {args.real_steps} steps: {real(args.real_steps)} ==")
        bench("SmolLM2", real(args.real_steps), 1, out)
    out(f"\n{time.perf_counter() - started:.0f} s in all; load average at the end {os.getloadavg()[0]:.2f}")
    if args.save:
        path = os.path.join(REPO, "bench", "curves", f"distributed_{time.strftime('%Y-%m-%d')}.txt")
        with open(path, "w") as fh:
            fh.write("\n".join(lines) + "\n")
        print(f"saved {path}")


if __name__ == "__main__":
    main()
