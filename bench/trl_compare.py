"""Seedbed's loop against TRL's GRPOTrainer on the same tiny model, task and hyper-parameters.

    python bench/trl_compare.py [--steps 30] [--rounds 2] [--threads 2]

Both train the built-in tiny model on the arithmetic task: 8 prompts x 8 completions, at most 8 completion
tokens, lr 1e-4, one iteration per batch (on-policy), DAPO token-mean loss with eps 0.2/0.28, beta 0, no
dynamic sampling or overlong shaping (TRL has neither). They run alternately, each in its own process, so a
load spike on the machine hits both. TRL gets its best CPU configuration: use_cpu=True,
gradient_checkpointing=False, bf16=False, and all of a step's 64 completions in one micro-batch.

Printed per engine: end-to-end completion tokens/s (completion tokens generated / wall time of the training
call: Seedbed's ``train`` loads its model and saves its last checkpoint inside it, TRL's trainer is built before
it and saves nothing), the same over the training steps alone (the loop's ``step_time_s``, TRL's
``step_time``), seconds per optimizer step, and pass@1 after training (200 held-out problems x 8 samples, same
evaluator for both); then Seedbed / TRL ratios, and where each engine's time goes, per phase and step
(bench/step_phases.py: generate, score, old log-probs, forward, backward, optimizer, logging, ...; the clock's
wrappers cost a few microseconds a call, alike for both). Requires the ``bench`` extra (trl).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

PROMPTS, GROUP, MAX_TOKENS, LR = 8, 8, 8, 1e-4


def held_out_pass1(model_dir: str) -> float:
    from training.data import default_rewards, make_prompt_source
    from training.evaluate import evaluate_examples
    from training.loop import load_model

    model, tok = load_model(model_dir, "cpu")
    model.eval()
    res = evaluate_examples(model, tok, make_prompt_source("arithmetic").eval_set(200), n=8, ks=[1],
                            rewards=default_rewards("arithmetic"), seed=12345)
    return res["pass@k"]["1"]


def run_seedbed(steps: int, seed: int, out: str) -> dict:
    from step_phases import PhaseClock, seedbed_phases
    from training.config import TrainConfig
    from training.sink import NullSink

    cfg = TrainConfig.from_dict({"preset": "dapo", "dynamic_sampling": False, "overlong_buffer_len": 0,
                                 "total_steps": steps, "prompts_per_step": PROMPTS, "group_size": GROUP,
                                 "max_new_tokens": MAX_TOKENS, "lr": LR, "seed": seed, "samples_per_step": 0})
    tokens, step_s = [], []

    class CountingSink(NullSink):
        def on_metrics(self, step, m):
            tokens.append(m["length/mean"] * PROMPTS * GROUP)
            step_s.append(m["step_time_s"])

    with PhaseClock(seedbed_phases()) as clock:
        import training.loop as loop  # the clock's wrappers are on the module: call train through it

        t0 = time.perf_counter()
        loop.train(cfg, out, clock.wrap_sink(CountingSink()))
        wall = time.perf_counter() - t0
    return {"wall_s": wall, "step_s": sum(step_s), "tokens": sum(tokens), "steps": steps,
            "phases": clock.as_dict(), "model_dir": os.path.join(out, "checkpoints", f"step_{steps:06d}")}


def run_trl(steps: int, seed: int, out: str) -> dict:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from step_phases import PhaseClock, trl_phases
    from training.config import default_tiny_model_dir
    from training.data import HELD_OUT_OFFSET
    from training.tasks.arithmetic import arithmetic_example

    tiny = default_tiny_model_dir()
    tok = AutoTokenizer.from_pretrained(tiny)
    model = AutoModelForCausalLM.from_pretrained(tiny)
    rows = [arithmetic_example(i) for i in range(0, HELD_OUT_OFFSET, HELD_OUT_OFFSET // 4096)][:4096]
    # the tiny model was trained with <bos> in front of every prompt; TRL does not add it itself
    data = Dataset.from_list([{"prompt": tok.bos_token + r["prompt"], "answer": r["answer"]} for r in rows])

    def exact(completions, answer, **kw):
        return [float(c.strip() == a) for c, a in zip(completions, answer)]

    args = GRPOConfig(output_dir=out, use_cpu=True, gradient_checkpointing=False, bf16=False, fp16=False,
                      per_device_train_batch_size=PROMPTS * GROUP, gradient_accumulation_steps=1,
                      num_generations=GROUP, max_completion_length=MAX_TOKENS, learning_rate=LR,
                      lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0, beta=0.0,
                      num_iterations=1, loss_type="dapo", epsilon=0.2, epsilon_high=0.28, temperature=1.0,
                      max_steps=steps, logging_steps=1, report_to=[], save_strategy="no", seed=seed,
                      dataloader_num_workers=0, disable_tqdm=True)
    trainer = GRPOTrainer(model=model, reward_funcs=exact, args=args, train_dataset=data, processing_class=tok)
    with PhaseClock(trl_phases()) as clock:
        t0 = time.perf_counter()
        trainer.train()
        wall = time.perf_counter() - t0
    logs = [h for h in trainer.state.log_history if "completions/mean_length" in h]
    trainer.save_model(out)
    tok.save_pretrained(out)
    step_s = sum(float(h["step_time"]) for h in logs) if all("step_time" in h for h in logs) else wall
    return {"wall_s": wall, "step_s": step_s, "tokens": sum(h["completions/mean_length"] for h in logs) * PROMPTS
            * GROUP, "steps": steps, "phases": clock.as_dict(), "model_dir": out}


def child(engine: str, steps: int, seed: int, threads: int) -> None:
    import torch
    torch.set_num_threads(threads)
    # warm transformers' lazy imports (several seconds) and the verifier registry's outside the timed region, for
    # both engines alike (TRL's own imports happen before its timed call too)
    from training.config import default_tiny_model_dir
    from training.data import default_rewards
    from training.loop import load_model
    from training.verifiers import build_reward
    load_model(default_tiny_model_dir(), "cpu")
    build_reward(default_rewards("arithmetic"))
    with tempfile.TemporaryDirectory() as out:
        res = (run_trl if engine == "trl" else run_seedbed)(steps, seed, out)
        res["pass@1"] = held_out_pass1(res.pop("model_dir"))
    print("RESULT " + json.dumps(res))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child", default="")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.steps, args.seed, args.threads)
        return
    results: dict[str, list[dict]] = {"trl": [], "seedbed": []}
    for r in range(args.rounds):
        for engine in ("trl", "seedbed"):
            proc = subprocess.run([sys.executable, __file__, "--child", engine, "--steps", str(args.steps),
                                   "--seed", str(args.seed + r), "--threads", str(args.threads)],
                                  capture_output=True, text=True, cwd=ROOT)
            line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            if proc.returncode or not line:
                sys.exit(f"{engine} failed:\n{proc.stderr[-3000:]}")
            res = json.loads(line[0][7:])
            results[engine].append(res)
            print(f"round {r + 1} {engine:<8} {res['tokens'] / res['wall_s']:8.0f} tok/s  "
                  f"{res['tokens'] / res['step_s']:8.0f} tok/s in steps  "
                  f"{res['wall_s'] / res['steps']:.3f} s/step  pass@1 {res['pass@1']:.3f}", flush=True)
    summary = {}
    for engine, rs in results.items():
        summary[engine] = {"tokens_per_s": sum(r["tokens"] for r in rs) / sum(r["wall_s"] for r in rs),
                           "step_tokens_per_s": sum(r["tokens"] for r in rs) / sum(r["step_s"] for r in rs),
                           "s_per_step": sum(r["wall_s"] for r in rs) / sum(r["steps"] for r in rs),
                           "pass@1": sum(r["pass@1"] for r in rs) / len(rs)}
    print(f"\n{'engine':<8} {'tokens/s':>9} {'in steps':>9} {'s/step':>8} {'pass@1':>7}   ({args.threads} threads)")
    for engine, s in summary.items():
        print(f"{engine:<8} {s['tokens_per_s']:9.0f} {s['step_tokens_per_s']:9.0f} {s['s_per_step']:8.3f} "
              f"{s['pass@1']:7.3f}")
    sb, trl = summary["seedbed"], summary["trl"]
    print(f"\nratio seedbed/trl: tokens/s x{sb['tokens_per_s'] / trl['tokens_per_s']:.2f} "
          f"(in steps x{sb['step_tokens_per_s'] / trl['step_tokens_per_s']:.2f}), "
          f"s/step x{sb['s_per_step'] / trl['s_per_step']:.2f}, pass@1 {sb['pass@1'] - trl['pass@1']:+.3f}")
    print(phase_report(results))


def phase_report(results: dict[str, list[dict]]) -> str:
    """Each engine's phases over its rounds, in ms per step."""
    from step_phases import PhaseClock

    blocks = []
    for engine, rs in results.items():
        clock = PhaseClock([])
        for r in rs:
            clock.add(r["phases"])
        steps = sum(r["steps"] for r in rs)
        blocks.append(clock.table(steps, title=f"\nwhere {engine}'s time goes ({steps} steps, the training call):"))
    return "\n".join(blocks)


if __name__ == "__main__":
    main()
