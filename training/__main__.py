"""Command line: ``python -m training {run,eval,bootstrap-tiny}``.

    python -m training bootstrap-tiny --out var/models/tiny
    python -m training run CONFIG.yaml --out DIR      # writes config.json, metrics.jsonl, samples.jsonl, checkpoints/
    python -m training run CONFIG.yaml --seeds 0,1,2,3 --out DIR   # packed in one process: DIR/seed_<n>/ each
    python -m training eval --model DIR --data FILE --n 16 --k 1,2,4,8,16
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from training.config import TrainConfig
from training.fields import FieldErrors


def eta_text(seconds: float) -> str:
    """A remaining time as a person reads it.

    >>> eta_text(42.4), eta_text(125), eta_text(3 * 3600 + 65)
    ('42s', '2m05s', '3h01m')
    """
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class _Progress:
    """A one-line progress display with the time left (a bar on a terminal, a line per step when piped). The
    time left is the steps to go at the mean pace of the steps seen so far in this process."""

    def __init__(self, total: int, clock=time.monotonic, label: str = ""):
        self.total, self.tty, self.clock, self.label = total, sys.stderr.isatty(), clock, label
        self.first: tuple[int, float] | None = None  # (step, time) of the first step this process saw

    def eta(self, step: int) -> str:
        now = self.clock()
        if self.first is None:
            self.first = (step, now)
        done, started = step - self.first[0], self.first[1]
        return eta_text((now - started) / done * (self.total - step)) if done > 0 else "?"

    def __call__(self, step: int, metrics: dict) -> None:
        line = (f"{self.label}step {step}/{self.total}  reward {metrics.get('reward/mean', 0):.3f}  "
                f"acc {metrics.get('accuracy', 0):.3f}  {metrics.get('step_time_s', 0):.2f}s/step  "
                f"ETA {self.eta(step)}")
        if self.tty:
            bar = "#" * int(30 * step / self.total)
            sys.stderr.write(f"\r[{bar:<30}] {line}")
            if step == self.total:
                sys.stderr.write("\n")
        else:
            print(line, file=sys.stderr)


def cmd_run(args) -> int:
    import torch

    from training.engines import run_engine

    # as the worker does (workers.runner): one thread a run unless SEEDBED_TORCH_THREADS says otherwise. torch's
    # default (every core) made the same 20 steps 10-17x slower than on a worker on a shared 2-core machine
    torch.set_num_threads(int(os.environ.get("SEEDBED_TORCH_THREADS", "1")))
    # a run on a dataset file: its verifiers must reward the first row's reference answer (training.reward_dry_run)
    cfg = TrainConfig.from_file(args.config, dry_run=not args.set)
    if args.set:
        bad = [kv for kv in args.set if "=" not in kv]
        if bad:
            raise FieldErrors({"--set": f"expected KEY=VALUE; got {bad[0]!r}"})
        overrides = dict(kv.split("=", 1) for kv in args.set)
        cfg = TrainConfig.from_dict({**cfg.to_dict(), **overrides}, dry_run=True)
    if args.seeds is not None:
        if any(kv.split("=", 1)[0].strip() == "seed" for kv in args.set or []):
            raise FieldErrors({"--seeds": "give the seeds in --seeds alone: each seed's run replaces the config's "
                                          "seed (drop --set seed=...)"})
        return run_seeds(cfg, args.out, parse_seeds(args.seeds))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w", encoding="utf-8") as fh:
        fh.write(cfg.to_json())
    sink = cli_sink(cfg, args.out, _Progress(cfg.total_steps))
    # a guard that stops the run (reward_hacking_guard's action stop) stops it as a kill does: after the step
    result = run_engine(cfg, args.out, sink, should_stop=lambda: bool(sink.stopped_by))
    print(json.dumps(result_line(result, sink)))
    return 0


def parse_seeds(text: str) -> list[int]:
    """``--seeds 0,1,2,3`` as distinct seeds in the config's range, at most ``training.memory.MAX_PACK`` (the
    sweep form's ``pack`` too); FieldErrors naming the option otherwise.

    >>> parse_seeds("0, 1,2")
    [0, 1, 2]
    """
    from training.memory import MAX_PACK

    try:
        seeds = [int(s) for s in text.split(",")]
    except ValueError:
        raise FieldErrors({"--seeds": f"expected seeds as integers separated by commas, e.g. 0,1,2,3; got {text!r}"})
    if not 1 <= len(seeds) <= MAX_PACK:
        raise FieldErrors({"--seeds": f"between 1 and {MAX_PACK} seeds (one process packs at most {MAX_PACK}); "
                                      f"got {len(seeds)}"})
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:
        raise FieldErrors({"--seeds": f"each seed once; {', '.join(map(str, twice))} appear more than once"})
    outside = [s for s in seeds if not 0 <= s <= 2**32 - 1]
    if outside:
        raise FieldErrors({"--seeds": f"seeds lie in [0, 2^32 - 1]; got {outside[0]}"})
    return seeds


def run_seeds(cfg, out: str, seeds: list[int]) -> int:
    """The config's run once per seed, all packed in this process (``training.loop.train_group``), each seed's
    outputs under ``out/seed_<n>/`` as a solo run's; one result line per seed."""
    from training.loop import Seed, train_group
    from training.packing import solo_only

    reason = solo_only(cfg) if len(seeds) > 1 else None  # (one seed: a run of any engine, in its seed's folder)
    if reason:
        raise FieldErrors({"--seeds": f"these seeds cannot share a process: {reason}"})
    if len(seeds) > 1:
        print(f"{len(seeds)} seeds packed in one process; the progress line is seed {seeds[0]}'s, every seed's "
              f"metrics are in {os.path.join(out, 'seed_<n>', 'metrics.jsonl')}", file=sys.stderr)
    group = []
    for n in seeds:
        seed_cfg = TrainConfig.from_dict({**cfg.to_dict(), "seed": n}, check_paths=False)
        folder = os.path.join(out, f"seed_{n}")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as fh:
            fh.write(seed_cfg.to_json())
        sink = cli_sink(seed_cfg, folder, _Progress(cfg.total_steps, label=f"seed {n}: ") if n == seeds[0] else None)
        group.append(Seed(seed_cfg, folder, sink, should_stop=lambda sink=sink: bool(sink.stopped_by)))
    if len(group) == 1:
        from training.engines import run_engine

        seed = group[0]
        results = [run_engine(seed.cfg, seed.out_dir, seed.sink, should_stop=seed.should_stop)]
    else:
        results = train_group(group)
    for seed, result in zip(group, results):
        print(json.dumps({"seed": seed.cfg.seed, **result_line(result, seed.sink)}))
    return 0


def result_line(result, sink) -> dict:
    return {"status": result.status, "step": result.step, "out": result.out_dir,
            **({"stopped_by": sink.stopped_by} if sink.stopped_by else {})}


def cli_sink(cfg, out: str, progress):
    """The JSONL sink of a command-line run (metrics.jsonl, samples.jsonl), its progress line (None: silent) and
    its checkpoints pruned to ``keep_checkpoints``."""
    from training.checkpoint import prune_checkpoints
    from training.sink import JsonlSink

    class CliSink(JsonlSink):
        def on_metrics(self, step, metrics):
            super().on_metrics(step, metrics)
            if progress is not None:
                progress(step, metrics)

        def on_checkpoint(self, step, path):  # (rank 0's: it writes the model folder)
            super().on_checkpoint(step, path)
            prune_checkpoints(out, cfg.keep_checkpoints)

    return CliSink(out, echo=lambda s: print(s, file=sys.stderr), reward_hacking_guard=cfg.reward_hacking_guard,
                   eval_problems=cfg.eval_problems)


def generated_or_benchmark(data: str) -> bool:
    """``--data`` names a built-in generated task (``training.tasks``) or a benchmark: problems drawn, not read."""
    from training.benchmarks import BENCHMARKS
    from training.tasks import tasks

    return data in tasks() or data in BENCHMARKS


def check_eval_numbers(args, ks: list[int]) -> None:
    """The numbers of an evaluation, in the ranges the web's evaluation form takes, checked before the model is
    loaded (NaN fails every comparison, so it is refused too); raises FieldErrors naming the option."""
    from training.passk import MAX_N

    e = {}
    if not 1 <= args.n <= MAX_N:
        e["--n"] = f"must lie in [1, {MAX_N}]; got {args.n}"
    elif not ks or min(ks) < 1 or max(ks) > args.n:
        e["--k"] = f"every k must lie in [1, --n = {args.n}]; got {args.k!r}"
    if not (0 < args.temperature < float("inf")):
        e["--temperature"] = f"must be a finite number > 0; got {args.temperature}"
    if not 0 < args.top_p <= 1:
        e["--top-p"] = f"must lie in (0, 1]; got {args.top_p}"
    if not 1 <= args.max_new_tokens <= 8192:
        e["--max-new-tokens"] = f"must lie in [1, 8192]; got {args.max_new_tokens}"
    if generated_or_benchmark(args.data) and not 1 <= args.problems <= 10_000:
        e["--problems"] = f"must lie in [1, 10000]; got {args.problems}"
    if args.keep_completions < 0:
        e["--keep-completions"] = f"must be >= 0; got {args.keep_completions}"
    if not 0 <= args.seed <= 2**32 - 1:
        e["--seed"] = f"must lie in [0, {2**32 - 1}]; got {args.seed}"
    if e:
        raise FieldErrors(e)


def cmd_eval(args) -> int:
    from training.data import DatasetError, default_rewards, load_file_dataset, make_prompt_source, task_error
    from training.evaluate import evaluate_examples
    from training.loop import load_model

    try:
        ks = [int(k) for k in args.k.split(",")]
    except ValueError:
        raise FieldErrors({"--k": f"expected whole numbers separated by commas; got {args.k!r}"}) from None
    check_eval_numbers(args, ks)
    if not os.path.isfile(os.path.join(args.model, "config.json")):
        print(f"error: --model: not a model folder: {args.model}", file=sys.stderr)
        return 2
    try:
        if generated_or_benchmark(args.data) or args.data.startswith("reasoning_gym:"):
            if task_error(args.data):
                raise FieldErrors({"--data": task_error(args.data)})
            examples, task = make_prompt_source(args.data).eval_set(args.problems), args.data
        else:
            examples, task = load_file_dataset(args.data, args.prompt_field, args.answer_field), "file"
    except DatasetError as exc:
        print(f"error: --data: {str(exc).removeprefix('data_path: ')}", file=sys.stderr)
        return 2
    try:
        rewards = json.loads(args.rewards) if args.rewards else default_rewards(task)
    except json.JSONDecodeError as exc:
        raise FieldErrors({"--rewards": f"not valid JSON: {exc.msg}"}) from None
    from training.verifiers import check_reward_spec

    problem = check_reward_spec(rewards)
    if problem:
        raise FieldErrors({"--rewards": problem})
    model, tokenizer = load_model(args.model, "cpu")
    model.eval()
    try:
        res = evaluate_examples(model, tokenizer, examples, n=args.n, ks=ks, temperature=args.temperature,
                                top_p=args.top_p, max_new_tokens=args.max_new_tokens, rewards=rewards, seed=args.seed,
                                keep_completions=args.keep_completions)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = json.dumps(res, indent=None if args.compact else 2)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(out)
    print(out)
    return 0


def cmd_bootstrap(args) -> int:
    from training.tiny import bootstrap_tiny, ensure_tiny_model, tiny_cache_root

    log = lambda s: print(s, file=sys.stderr)  # noqa: E731
    if args.force:
        info = bootstrap_tiny(args.out, task=args.task, seed=args.seed, log=log)
    else:
        # a clean clone on a machine that built this recipe before copies that build (training/tiny.py)
        info = ensure_tiny_model(args.out, task=args.task, seed=args.seed, log=log, cache_root=tiny_cache_root())
        if info is None:
            print(f"tiny model already at {args.out} (use --force to rebuild)", file=sys.stderr)
            return 0
    print(json.dumps(info))
    return 0


def cmd_import_model(args) -> int:
    from training.models import describe_model, import_gguf

    log = lambda s: print(s, file=sys.stderr)  # noqa: E731
    import_gguf(args.gguf, args.out, log=log)
    description = describe_model(args.out)
    description.pop("chat_template", None)
    print(json.dumps(description))
    return 0


def main(argv=None) -> int:
    os.umask(0o077)  # run folders, checkpoints and models it writes are this account's alone, as the app's are
    ap = argparse.ArgumentParser(prog="python -m training", description="Seedbed's training core")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="train one run from a YAML/JSON config")
    r.add_argument("config")
    r.add_argument("--out", required=True)
    r.add_argument("--set", nargs="*", metavar="KEY=VALUE", help="override config keys")
    r.add_argument("--seeds", metavar="N,N,...", help="train the config once per seed, packed in one process "
                   "(each seed's outputs under OUT/seed_<n>/)")
    r.set_defaults(fn=cmd_run)
    e = sub.add_parser("eval", help="pass@k of a model folder on a dataset")
    e.add_argument("--model", required=True)
    e.add_argument("--data", required=True, help="JSONL/Parquet file, or a built-in task name")
    e.add_argument("--n", type=int, default=16)
    e.add_argument("--k", default="1,2,4,8,16")
    e.add_argument("--problems", type=int, default=100, help="held-out problems of a built-in task")
    e.add_argument("--temperature", type=float, default=1.0)
    e.add_argument("--top-p", type=float, default=1.0)
    e.add_argument("--max-new-tokens", type=int, default=8)
    e.add_argument("--rewards", default="", help="reward spec as JSON (default: the task's verifier)")
    e.add_argument("--prompt-field", default="prompt")
    e.add_argument("--answer-field", default="answer")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--keep-completions", type=int, default=0)
    e.add_argument("--out", default="")
    e.add_argument("--compact", action="store_true")
    e.set_defaults(fn=cmd_eval)
    b = sub.add_parser("bootstrap-tiny", help="build the built-in tiny model (offline, < 1 min)")
    b.add_argument("--out", required=True)
    b.add_argument("--task", default="arithmetic")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--force", action="store_true")
    b.set_defaults(fn=cmd_bootstrap)
    m = sub.add_parser("import-model", help="import a GGUF model into a safetensors folder (weights in float32)")
    m.add_argument("--gguf", required=True, help="the .gguf file")
    m.add_argument("--out", required=True, help="the folder to write (replaced whole when the import succeeds)")
    m.set_defaults(fn=cmd_import_model)
    args = ap.parse_args(argv)
    try:
        return args.fn(args)
    except FieldErrors as exc:  # every bad input: one line per field, exit code 2, no traceback
        for name, msg in exc.errors.items():
            print(f"error: {name}: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
