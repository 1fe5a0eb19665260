"""Packed seeds (docs/architecture.md#packed-seeds) against one run per process, side by side in one run.

    python bench/packed.py speed [--seeds 4,8] [--steps 300] [--rounds 2]
    python bench/packed.py smollm2 [--seeds 4] [--steps 3]
    python bench/packed.py learning [--seeds 8] [--steps 300] [--problems 200] [--n 8]

``speed``: a sweep of N seeds of the tiny model (dapo preset) as today's workers run it, one run per process on
each of the machine's two slots (``--slots``, one torch thread each), against the same seeds packed: one process
of all N (two threads), and one packed process per slot (N/2 seeds each, one thread). Every configuration is
``python -m training run`` processes, as a user or a worker starts them (start-up included); the rounds alternate
their order. Goals on 2 cores: packed wall time <= 0.5x of today's for 4 seeds, <= 0.35x for 8.

``smollm2``: SmolLM2-135M-Instruct, N seeds x 4 prompts x 8 completions x <= 64 tokens: completion tokens/s per
seed and peak resident memory per seed, packed (one process) against one seed alone.

``learning``: N seeds x ``--steps`` of the dapo preset, each trained solo and packed (the solo runs two at a
time, the packed seeds in two processes of N/2, one thread each: as two worker slots run them; a run's
completions depend on the rounding of its sums, so another thread count is another trajectory after ~100 steps,
packed or not); the held-out pass@1 gain of each (its final checkpoint against the base model on the same problems and
samples) and the 95 % t-interval of the paired difference, packed - solo, seed by seed.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import benchkit

REPO = benchkit.REPO


def cli(config: dict, out: str, *, seeds: list[int] | None = None, threads: int = 1) -> subprocess.Popen:
    """``python -m training run`` of ``config`` (packed when ``seeds``), its peak memory printed at exit."""
    path = out + ".json"
    with open(path, "w") as fh:
        json.dump(config, fh)
    args = [sys.executable, os.path.join(REPO, "bench", "packed.py"), "child", path, "--out", out]
    if seeds is not None:
        args += ["--seeds", ",".join(map(str, seeds))]
    env = {**os.environ, "SEEDBED_TORCH_THREADS": str(threads), "PYTHONPATH": REPO}
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def child(argv: list[str]) -> int:
    """The training CLI in this process, then its peak resident memory (MiB, VmHWM: ru_maxrss is kept across
    execve, so a child of a large process would report its parent's) on stdout."""
    from training.__main__ import main as training_main

    code = training_main(["run", *argv])
    peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    print(json.dumps({"peak_rss_mib": peak_kb / 1024}))
    return code


def wait_all(procs: list[subprocess.Popen]) -> list[str]:
    outs = []
    for p in procs:
        out, _ = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"a training process failed (exit {p.returncode}): {out[-2000:]}")
        outs.append(out)
    return outs


def one_per_process(config: dict, seeds: list[int], tmp: str, slots: int) -> float:
    """Today's execution: every seed its own process, ``slots`` at a time; wall seconds."""
    t0, queue, running = time.perf_counter(), list(seeds), []
    while queue or running:
        while queue and len(running) < slots:
            n = queue.pop(0)
            running.append(cli({**config, "seed": n}, os.path.join(tmp, f"solo_{n}")))
        running[0].wait()
        wait_all([running.pop(0)])
    return time.perf_counter() - t0


def packed(config: dict, seeds: list[int], tmp: str, groups: int, threads: int) -> float:
    """The seeds in ``groups`` packed processes side by side; wall seconds."""
    t0 = time.perf_counter()
    share = math.ceil(len(seeds) / groups)
    wait_all([cli(config, os.path.join(tmp, f"packed_{g}"), seeds=seeds[g * share:(g + 1) * share], threads=threads)
              for g in range(groups) if seeds[g * share:(g + 1) * share]])
    return time.perf_counter() - t0


def speed(args) -> None:
    config = {"preset": "dapo", "total_steps": args.steps, "checkpoint_every": 0, "keep_checkpoints": 1}
    print(f"tiny model, dapo preset, {args.steps} steps a seed, {args.slots} slots of one thread each "
          f"(today's execution) against packed processes")
    rows = []
    for n in [int(s) for s in args.seeds.split(",")]:
        seeds = list(range(n))
        runs = {"one run per process": [], "packed: 1 process, 2 threads": [],
                f"packed: {args.slots} processes, 1 thread": []}
        for r in range(args.rounds):
            order = list(runs) if r % 2 == 0 else list(reversed(runs))
            for name in order:
                with tempfile.TemporaryDirectory() as tmp:
                    if name.startswith("one run"):
                        runs[name].append(one_per_process(config, seeds, tmp, args.slots))
                    elif "1 process" in name:
                        runs[name].append(packed(config, seeds, tmp, 1, 2))
                    else:
                        runs[name].append(packed(config, seeds, tmp, args.slots, 1))
                print(f"  {n} seeds, round {r + 1}: {name}: {runs[name][-1]:.1f} s", flush=True)
        ref = sum(runs["one run per process"]) / args.rounds
        for name, walls in runs.items():
            mean = sum(walls) / len(walls)
            rows.append((n, name, mean, mean / ref))
    print(f"\n{'seeds':>5}  {'execution':<34} {'wall s':>8} {'x today':>8}")
    for n, name, wall, ratio in rows:
        print(f"{n:>5}  {name:<34} {wall:>8.1f} {ratio:>8.2f}")


def smollm2(args) -> None:
    from training.models import ensure_smollm2

    folder = ensure_smollm2()
    config = {"preset": "grpo", "model_path": folder, "task": "arithmetic", "prompts_per_step": 4, "group_size": 8,
              "max_new_tokens": 64, "total_steps": args.steps, "kl_coef": 0.0, "chat_template": "on",
              "checkpoint_every": 0, "keep_checkpoints": 1}
    seeds = [int(s) for s in range(args.seeds)]
    rows = {}
    for r in range(args.rounds):
        for name in (["solo", "packed"] if r % 2 == 0 else ["packed", "solo"]):
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, name)
                proc = cli(config, out, seeds=seeds if name == "packed" else None, threads=args.threads)
                peak = json.loads(wait_all([proc])[0].strip().splitlines()[-1])["peak_rss_mib"]
                folders = [os.path.join(out, f"seed_{n}") for n in seeds] if name == "packed" else [out]
                # steps after the first: the first carries the model's first-touch costs
                tps = [json.loads(line)["tokens_per_s"] for f in folders
                       for line in open(os.path.join(f, "metrics.jsonl")).read().splitlines()[1:]]
                rows.setdefault(name, []).append((sum(tps) / len(tps), peak / len(folders)))
            print(f"  round {r + 1}: {name}: {rows[name][-1][0]:.0f} tokens/s a seed, "
                  f"{rows[name][-1][1]:.0f} MiB a seed", flush=True)
    print(f"\nSmolLM2-135M-Instruct, {args.seeds} seeds x 4 prompts x 8 completions x <= 64 tokens, "
          f"{args.threads} thread(s)")
    print(f"{'execution':<10} {'tokens/s a seed':>16} {'peak MiB a seed':>16}")
    for name, vals in rows.items():
        print(f"{name:<10} {sum(v[0] for v in vals) / len(vals):>16.0f} {sum(v[1] for v in vals) / len(vals):>16.0f}")
    s, p = (sum(v[0] for v in rows[k]) / len(rows[k]) for k in ("solo", "packed"))
    print(f"packed / solo tokens/s a seed: {p / s:.2f}x; seeds' tokens/s together: {p * args.seeds / s:.2f}x")


def held_out_pass1(model_dir: str, problems: int, n: int) -> float:
    """Held-out pass@1 of a model folder on the built-in task (bench/learning.py's evaluation)."""
    from learning import pass1

    return pass1(model_dir, problems, n)


#: Student's t 0.975 quantile by degrees of freedom (1 to 30; past 30 the 30's, a slightly wider interval)
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def first_difference(a: str, b: str) -> int | None:
    """The first step whose logged completions differ between run folders ``a`` and ``b`` (None: none does)."""
    def by_step(folder):
        steps: dict[int, list] = {}
        for line in open(os.path.join(folder, "samples.jsonl")):
            row = json.loads(line)
            steps.setdefault(row["step"], []).append(row["completion"])
        return steps

    x, y = by_step(a), by_step(b)
    return next((step for step in sorted(x) if x[step] != y.get(step)), None)


def t_interval(diffs: list[float]) -> tuple[float, float]:
    """Mean and half-width of the 95 % t-interval of ``diffs`` (Student's t, n − 1 degrees of freedom).

    >>> t_interval([1.0, 3.0])
    (2.0, 12.706)
    """
    n = len(diffs)
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    return mean, round(T975[min(n - 1, len(T975)) - 1] * sd / math.sqrt(n), 6)


def learning(args) -> None:
    import torch

    from training.config import default_tiny_model_dir

    torch.set_num_threads(2)
    config = {"preset": "dapo", "total_steps": args.steps, "checkpoint_every": 0, "keep_checkpoints": 1}
    seeds = list(range(args.seeds))
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        one_per_process(config, seeds, tmp, 2)
        t1 = time.perf_counter()
        packed(config, seeds, tmp, 2, 1)  # as the workers run them: a packed process a slot, one thread each
        t2 = time.perf_counter()
        base = held_out_pass1(default_tiny_model_dir(), args.problems, args.n)
        final = f"checkpoints/step_{args.steps:06d}"
        rows = []
        for n in seeds:
            solo_dir = os.path.join(tmp, f"solo_{n}")
            pack_dir = os.path.join(tmp, f"packed_{n // math.ceil(len(seeds) / 2)}", f"seed_{n}")
            solo = held_out_pass1(os.path.join(solo_dir, final), args.problems, args.n) - base
            pack = held_out_pass1(os.path.join(pack_dir, final), args.problems, args.n) - base
            apart = first_difference(solo_dir, pack_dir)
            rows.append((n, 100 * solo, 100 * pack, apart))
            print(f"  seed {n}: gain solo {100 * solo:+.1f}, packed {100 * pack:+.1f} points; logged completions "
                  f"{'the same at every step' if apart is None else f'first differ at step {apart}'}", flush=True)
    mean, half = t_interval([p - s for _, s, p, _ in rows])
    print(f"\n{args.seeds} seeds x {args.steps} steps, dapo, held-out pass@1 on {args.problems} problems x {args.n} "
          f"samples (base {100 * base:.1f} %); solo two at a time {t1 - t0:.0f} s, packed {t2 - t1:.0f} s")
    print(f"{'seed':>4} {'solo gain':>10} {'packed gain':>12} {'packed - solo':>14} {'same completions to':>20}")
    for n, s, p, apart in rows:
        print(f"{n:>4} {s:>10.1f} {p:>12.1f} {p - s:>14.1f} {'the end' if apart is None else apart - 1:>20}")
    print(f"paired difference packed - solo: {mean:+.2f} points, 95 % interval [{mean - half:+.2f}, {mean + half:+.2f}] "
          f"(contains 0: {mean - half <= 0 <= mean + half}; half-width {half:.2f} <= 3: {half <= 3})")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        raise SystemExit(child(sys.argv[2:]))
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["speed", "smollm2", "learning"])
    ap.add_argument("--seeds", default=None)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--problems", type=int, default=200)
    ap.add_argument("--n", type=int, default=8)
    args = ap.parse_args()
    if args.what == "speed":
        args.seeds, args.steps = args.seeds or "4,8", args.steps or 300
        speed(args)
    elif args.what == "smollm2":
        args.seeds, args.steps = int(args.seeds or 4), args.steps or 3
        smollm2(args)
    else:
        args.seeds, args.steps = int(args.seeds or 8), args.steps or 300
        learning(args)


if __name__ == "__main__":
    main()
