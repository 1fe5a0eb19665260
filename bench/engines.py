"""The same run config on both engines: Seedbed's loop against TRL's GRPOTrainer as Seedbed runs it,
and Seedbed's overhead on a TRL run against the same TRL run launched by hand.

    python bench/engines.py [--quick] [--save] [--steps 30] [--repeats 3] [--threads 1]
                            [--real-steps 6] [--no-real] [--no-x2]

What: every run goes through ``training.engines.run_engine(cfg, out_dir, sink)`` with a sink that only collects
(no database), each in a fresh process of its own, the configs differing only in ``engine``:

- tiny: the built-in tiny model on the arithmetic task, the default grpo preset (lr 1e-4, KL 0.04 to the
  starting model, temperature 1), 8 prompts x 8 completions, at most 8 new tokens, ``--steps`` steps, seed = the
  repeat's number. Per repeat: ``seedbed``, ``trl`` (Seedbed-managed: the supervisor, torchrun, the events file,
  Seedbed's callback), ``trl by hand`` and, unless ``--no-x2``, ``trl x2`` (2 processes, ``--threads`` split
  over them, at least 1 each: with the default 1 thread it has twice the cores of the others), the order
  reversed every other repeat so a drift in the machine's load hits each alike;
- real (unless ``--no-real``, or when var/models/smollm2-135m-instruct is missing): SmolLM2-135M-Instruct on
  reasoning-gym's easy ``basic_arithmetic`` through its chat template (bench/real_model.py's task), 4 prompts x
  4 completions, at most 24 new tokens, temperature 0.7, lr 5e-6, no KL, ``--real-steps`` steps; one repeat of
  ``seedbed``, ``trl`` and ``trl by hand``.

"TRL launched by hand" is a plain script this benchmark writes to a temporary folder and starts with
``torchrun --standalone`` itself: the same ``GRPOConfig(**trl_args(cfg, out))``, the same reward functions
(``RewardTerms``, with no events writer) and dataset (``dataset_rows``) as ``training.engines.entry.trl``, so the
same work, but no supervisor, no events file and no Seedbed callback; a TrainerCallback of its own notes the time
of each step's log (measurement only). Both TRL runs get the same threads (OMP_NUM_THREADS).

Threads: ``--threads 1`` by default, the worker's own default (SEEDBED_TORCH_THREADS). On a 2-core machine
shared with other work, 2 threads a run made steps swing tenfold (tiny model: 0.08 s to 2.4 s a step, OpenMP
threads waiting on each other), which drowns the differences measured here.

Figures per engine (medians over repeats):
- ``s/step``: median time between consecutive steps' metrics, steps 2..N (step 1 is warm-up), measured where the
  metrics are made: for seedbed when its sink receives them (in the same process: the whole step, sink and
  checkpoint included), for TRL the interval between TRL's per-step ``on_log`` calls (Seedbed's callback
  reports it as ``step_time_s``; the hand-launched script notes the same calls). The supervisor's view of TRL
  steps lags by up to its 0.25 s poll, so per-step arrival times there are not used;
- ``tokens/s``: completion tokens generated in steps 2..N (mean length x completions) over those steps' time;
- ``to step 1``: from starting the run's process to step 1's metrics (imports, model load, torchrun, step 1;
  for the Seedbed-managed TRL run as its supervisor hands them to the sink, up to 0.25 s late);
- ``wall/step``: from starting the run's process to its last checkpoint, over N: what a user waits per step;
- ``pass@1``: the final checkpoint (the path the sink's ``on_checkpoint`` received; the hand run's last TRL
  checkpoint) evaluated by ``training.evaluate.evaluate_examples`` on the task's fixed held-out problems, n
  samples each at the run's temperature, seed 12345, the same for every model; the base model is the reference.
Then the ratios: seedbed / trl, and the overhead trl (Seedbed) / trl by hand per repeat, against the issue's
target of <= 5 % on s/step. ``--save`` writes everything printed to bench/curves/engines_<date>.txt
(engines_quick_<date>.txt with ``--quick``). Needs the ``bench`` extra (trl).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

REAL_MODEL = os.path.join(ROOT, "var", "models", "smollm2-135m-instruct")
TARGET_OVERHEAD = 0.05
EVAL_SEED = 12345


def tiny_config(steps: int) -> dict:
    return {"task": "arithmetic", "total_steps": steps, "prompts_per_step": 8, "group_size": 8, "max_new_tokens": 8,
            "device": "cpu"}


def real_config(steps: int) -> dict:
    return {"model_path": REAL_MODEL, "task": "reasoning_gym:basic_arithmetic",
            "task_params": {"min_terms": 2, "max_terms": 2, "max_digits": 1, "allow_parentheses": False,
                            "allow_negation": False, "operators": ["+", "-"]},
            "rewards": [{"name": "reasoning_gym", "weight": 1.0, "params": {"extract": "last_number"}}],
            "chat_template": "on", "answer_instruction": "Reply with the number only.", "temperature": 0.7,
            "total_steps": steps, "prompts_per_step": 4, "group_size": 4, "max_new_tokens": 24, "lr": 5e-6,
            "kl_coef": 0.0, "device": "cpu"}


# --- TRL launched by hand: written to a temporary file at bench time, started with torchrun ------------------

HAND_SCRIPT = '''
import json, os, sys, time

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from training.config import TrainConfig
from training.engines.trl import trl_args, updates_per_step
from training.engines.entry.trl import RewardTerms, dataset_rows

out = sys.argv[1]
with open(os.path.join(out, "bench_config.json")) as fh:
    cfg = TrainConfig.from_dict(json.load(fh), check_paths=False)
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
path = cfg.resolved_model_path()
tokenizer = AutoTokenizer.from_pretrained(path)
if tokenizer.pad_token is None:
    tokenizer.pad_token = tokenizer.eos_token
model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
rows, _ = dataset_rows(cfg, tokenizer)
rewards = RewardTerms(cfg, None, updates_per_step(cfg))
steps = []


class Clock(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "reward" in logs:
            steps.append({"t": time.monotonic(), "length": logs.get("completions/mean_length", 0.0),
                          "reward": logs["reward"]})

    def on_train_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            with open(os.path.join(out, "bench_steps.json"), "w") as fh:
                json.dump(steps, fh)


args = GRPOConfig(**trl_args(cfg, out), reward_weights=rewards.weights)
trainer = GRPOTrainer(model=model, reward_funcs=rewards.funcs, args=args, train_dataset=Dataset.from_list(rows),
                      processing_class=tokenizer, callbacks=[Clock()])
trainer.train()
'''


def run_by_hand(cfg, out: str, nproc: int) -> dict:
    from training.engines.trl import latest_trl_checkpoint

    with open(os.path.join(out, "bench_config.json"), "w") as fh:
        json.dump(cfg.to_dict(), fh)
    script = os.path.join(out, "grpo_by_hand.py")
    with open(script, "w") as fh:
        fh.write(HAND_SCRIPT)
    env = {**os.environ, "PYTHONPATH": ROOT}
    with open(os.path.join(out, "torchrun.log"), "wb") as log:
        proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                               str(nproc), script, out], cwd=out, env=env, stdout=log, stderr=subprocess.STDOUT)
    t_end = time.monotonic()
    if proc.returncode:
        with open(os.path.join(out, "torchrun.log"), errors="replace") as fh:
            sys.exit(f"trl by hand failed:\n{fh.read()[-3000:]}")
    with open(os.path.join(out, "bench_steps.json")) as fh:
        steps = json.load(fh)
    return {"t_end": t_end, "checkpoint": latest_trl_checkpoint(out)[1],
            "steps": [{"t": s["t"], "length": s["length"], "reward": s["reward"]} for s in steps]}


# --- Seedbed's run_engine, either engine ---------------------------------------------------------------------

def run_managed(cfg, out: str) -> dict:
    from training.engines import run_engine
    from training.sink import NullSink

    steps, checkpoints = [], []

    class CollectingSink(NullSink):
        def on_metrics(self, step, m):
            steps.append({"t": time.monotonic(), "step": step, "length": m["length/mean"], "reward": m["reward/mean"],
                          "step_time_s": m["step_time_s"]})

        def on_checkpoint(self, step, path):
            checkpoints.append(path)

    result = run_engine(cfg, out, CollectingSink())
    t_end = time.monotonic()
    if result.status != "succeeded":
        sys.exit(f"{cfg.engine} ended {result.status} at step {result.step}")
    return {"t_end": t_end, "checkpoint": checkpoints[-1], "steps": steps}


def held_out_pass1(cfg, model_dir: str, problems: int, samples: int) -> float:
    from training.data import default_rewards, make_prompt_source
    from training.evaluate import evaluate_examples
    from training.loop import load_model

    source = make_prompt_source(cfg.task, task_size=cfg.task_size, task_params=cfg.task_params)
    model, tok = load_model(model_dir, "cpu")
    model.eval()
    res = evaluate_examples(model, tok, source.eval_set(problems), n=samples, ks=[1], temperature=cfg.temperature,
                            top_p=cfg.top_p, max_new_tokens=cfg.max_new_tokens,
                            rewards=cfg.rewards or default_rewards(cfg.task), seed=EVAL_SEED,
                            template=cfg.prompt_template())
    return res["pass@k"]["1"]


def child(spec: dict) -> None:
    import torch

    from training.config import TrainConfig

    torch.set_num_threads(spec["threads"])
    cfg = TrainConfig.from_dict(spec["cfg"])
    with tempfile.TemporaryDirectory(prefix="seedbed-bench-engines-") as out:
        if spec["kind"] == "base":
            res, model_dir = {}, cfg.resolved_model_path()
        else:
            res = run_by_hand(cfg, out, cfg.nproc_per_node) if spec["kind"] == "hand" else run_managed(cfg, out)
            model_dir = res.pop("checkpoint")
        res["pass@1"] = held_out_pass1(cfg, model_dir, spec["problems"], spec["samples"])
    print("RESULT " + json.dumps(res))


# --- the parent: alternating runs, one table ---------------------------------------------------------------

def spawn(kind: str, cfg: dict, *, threads: int, problems: int, samples: int) -> dict:
    """One run in a fresh process; its figures measured from the moment the process is started."""
    procs = cfg.get("nproc_per_node", 1)
    env = {**os.environ, "OMP_NUM_THREADS": str(max(1, threads // procs)),
           "SEEDBED_TORCH_THREADS": str(max(1, threads // procs))}
    spec = {"kind": kind, "cfg": cfg, "threads": threads, "problems": problems, "samples": samples}
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)],
                          capture_output=True, text=True, cwd=ROOT, env=env)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not line:
        sys.exit(f"{kind} {cfg.get('engine')} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    res = json.loads(line[0][7:])
    res["load"] = load
    if kind == "base":
        return res
    steps = res["steps"]
    n = len(steps)
    if kind == "trl":  # Seedbed's callback: TRL's on_log interval (the supervisor's arrivals lag by its poll)
        gaps = [s["step_time_s"] for s in steps[1:]]
    else:  # seedbed: the sink's arrivals, in process; by hand: the same on_log calls, noted by its own callback
        gaps = [b["t"] - a["t"] for a, b in zip(steps, steps[1:])]
    tokens = sum(s["length"] for s in steps[1:]) * cfg["prompts_per_step"] * cfg["group_size"]
    res.update(s_step=statistics.median(gaps), tokens_s=tokens / sum(gaps), to_step1=steps[0]["t"] - t0,
               wall_step=(res["t_end"] - t0) / len(steps), rewards=[s["reward"] for s in steps])
    return res


class Report:
    """Prints and keeps every line (``--save`` writes them out)."""

    def __init__(self):
        self.lines: list[str] = []

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        self.lines.append(line)


def row(label: str, runs: list[dict]) -> str:
    med = lambda key: statistics.median(r[key] for r in runs)  # noqa: E731
    return (f"{label:<12} {med('s_step'):8.3f} {med('tokens_s'):9.0f} {med('to_step1'):10.1f} {med('wall_step'):10.3f} "
            f"{med('pass@1'):7.3f}  {len(runs)}")


def header() -> str:
    return f"{'engine':<12} {'s/step':>8} {'tokens/s':>9} {'to step 1':>10} {'wall/step':>10} {'pass@1':>7}  runs"


def bench(report: Report, name: str, cfg: dict, kinds: list[tuple[str, str, dict]], *, repeats: int, threads: int,
          problems: int, samples: int) -> dict[str, list[dict]]:
    """``kinds``: (label, kind, config overrides). Runs them ``repeats`` times, alternating, and prints the table."""
    report(f"\n== {name}: {cfg} ==")
    base = spawn("base", {**cfg, "total_steps": 1}, threads=threads, problems=problems, samples=samples)
    report(f"base model: held-out pass@1 {base['pass@1']:.3f} ({problems} problems x {samples} samples)")
    results: dict[str, list[dict]] = {label: [] for label, _, _ in kinds}
    for r in range(repeats):
        order = kinds if r % 2 == 0 else kinds[::-1]
        for label, kind, extra in order:
            res = spawn(kind, {**cfg, **extra, "seed": r}, threads=threads, problems=problems, samples=samples)
            results[label].append(res)
            report(f"repeat {r + 1} {label:<12} {res['s_step']:.3f} s/step  {res['tokens_s']:6.0f} tok/s  "
                   f"to step 1 {res['to_step1']:5.1f} s  wall/step {res['wall_step']:.3f} s  "
                   f"reward {res['rewards'][0]:.2f} -> {res['rewards'][-1]:.2f}  pass@1 {res['pass@1']:.3f}  "
                   f"(load {res['load']:.2f})")
    report("")
    report(header())
    report(f"{'base model':<12} {'':>8} {'':>9} {'':>10} {'':>10} {base['pass@1']:7.3f}")
    for label, runs in results.items():
        report(row(label, runs))
    med = {label: {k: statistics.median(r[k] for r in runs) for k in ("s_step", "tokens_s", "wall_step", "pass@1")}
           for label, runs in results.items()}
    sb, trl = med["seedbed"], med["trl"]
    report(f"\nseedbed / trl: s/step x{sb['s_step'] / trl['s_step']:.2f}, "
           f"tokens/s x{sb['tokens_s'] / trl['tokens_s']:.2f}, wall/step x{sb['wall_step'] / trl['wall_step']:.2f}, "
           f"pass@1 {sb['pass@1'] - trl['pass@1']:+.3f}")
    if "trl by hand" in results:
        pairs = list(zip(results["trl"], results["trl by hand"]))
        ratios = [a["s_step"] / b["s_step"] - 1 for a, b in pairs]
        walls = [a["wall_step"] / b["wall_step"] - 1 for a, b in pairs]
        same = all(a["rewards"] == b["rewards"] for a, b in pairs)
        overhead = statistics.median(ratios)
        report(f"Seedbed's overhead on a TRL run (trl / trl by hand - 1), per repeat: s/step "
               f"{', '.join(f'{x:+.1%}' for x in ratios)}; wall/step {', '.join(f'{x:+.1%}' for x in walls)}")
        report(f"  median s/step overhead {overhead:+.1%} (target <= {TARGET_OVERHEAD:.0%}: "
               f"{'met' if overhead <= TARGET_OVERHEAD else 'NOT met'}); median wall/step overhead "
               f"{statistics.median(walls):+.1%}; per-step rewards of the two identical in every repeat: "
               f"{'yes' if same else 'no'}")
    if "trl x2" in results:
        x2 = med["trl x2"]
        report(f"trl x2 / trl: s/step x{x2['s_step'] / trl['s_step']:.2f}, "
               f"tokens/s x{x2['tokens_s'] / trl['tokens_s']:.2f}")
    return results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="10 tiny steps, 1 repeat, a 2-step real run, small evals")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads of a run (split over TRL's processes; "
                    "1 is the worker's default, SEEDBED_TORCH_THREADS)")
    ap.add_argument("--real-steps", type=int, default=6)
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--no-x2", action="store_true", help="skip the 2-process TRL run")
    ap.add_argument("--save", action="store_true")
    ap.add_argument("--child", default="")
    args = ap.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    if args.quick:
        args.steps, args.repeats, args.real_steps = 10, 1, 2
    report = Report()
    t_start = time.monotonic()
    report(f"bench/engines.py {' '.join(sys.argv[1:])}  ({datetime.datetime.now():%Y-%m-%d %H:%M}, "
           f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, {args.threads} torch threads a run)")
    from importlib.metadata import version

    report(f"torch {version('torch')}, transformers {version('transformers')}, trl {version('trl')}")
    # the first import of TRL reads ~100 MB of files: warm the page cache outside every run
    subprocess.run([sys.executable, "-c", "import trl, transformers, torch.distributed.run"], check=True)
    kinds = [("seedbed", "seedbed", {"engine": "seedbed"}), ("trl", "trl", {"engine": "trl"}),
             ("trl by hand", "hand", {"engine": "trl"})]
    tiny_kinds = kinds + ([] if args.no_x2 else [("trl x2", "trl", {"engine": "trl", "nproc_per_node": 2})])
    problems, samples = (100, 4) if args.quick else (200, 8)
    bench(report, f"tiny model, {args.steps} steps", tiny_config(args.steps), tiny_kinds, repeats=args.repeats,
          threads=args.threads, problems=problems, samples=samples)
    if args.no_real:
        pass
    elif not os.path.isfile(os.path.join(REAL_MODEL, "config.json")):
        report(f"\n(real model skipped: {REAL_MODEL} is missing; ./seedbed setup imports it)")
    else:
        problems, samples = (16, 2) if args.quick else (64, 4)
        bench(report, f"SmolLM2-135M-Instruct, {args.real_steps} steps", real_config(args.real_steps), kinds,
              repeats=1, threads=args.threads, problems=problems, samples=samples)
    report(f"\n{time.monotonic() - t_start:.0f} s in all; load average at the end {os.getloadavg()[0]:.2f}")
    if args.save:
        name = f"engines_{'quick_' if args.quick else ''}{datetime.date.today():%Y-%m-%d}.txt"
        path = os.path.join(ROOT, "bench", "curves", name)
        with open(path, "w") as fh:
            fh.write("\n".join(report.lines) + "\n")
        print(f"wrote {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    main()
