"""Learning benchmark: pass@1 before and after RL on the tiny arithmetic task, per preset, with wall time.

    python bench/learning.py [--steps 100] [--presets dapo,grpo] [--problems 200] [--n 8]

Target: +25 points of pass@1 in <= 10 minutes on 2 CPU cores.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from training.config import TrainConfig, default_tiny_model_dir  # noqa: E402
from training.data import default_rewards, make_prompt_source  # noqa: E402
from training.evaluate import evaluate_examples  # noqa: E402
from training.loop import load_model, train  # noqa: E402
from training.sink import NullSink  # noqa: E402


def pass1(model_dir: str, problems: int, n: int) -> float:
    model, tok = load_model(model_dir, "cpu")
    model.eval()
    res = evaluate_examples(model, tok, make_prompt_source("arithmetic").eval_set(problems), n=n, ks=[1],
                            rewards=default_rewards("arithmetic"), seed=12345)
    return res["pass@k"]["1"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--presets", default="dapo,grpo")
    ap.add_argument("--problems", type=int, default=200)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    base = default_tiny_model_dir()
    before = pass1(base, args.problems, args.n)
    print(f"base model pass@1 = {before:.3f} ({args.problems} held-out problems x {args.n} samples)")
    rows = []
    for preset in args.presets.split(","):
        knobs = {"preset": preset, "total_steps": args.steps, "seed": args.seed, "warmup_steps": 5}
        if args.lr:
            knobs["lr"] = args.lr
        cfg = TrainConfig.from_dict(knobs)
        with tempfile.TemporaryDirectory() as out:
            t0 = time.time()
            train(cfg, out, NullSink())
            wall = time.time() - t0
            after = pass1(os.path.join(out, "checkpoints", f"step_{args.steps:06d}"), args.problems, args.n)
        rows.append({"preset": preset, "steps": args.steps, "lr": cfg.lr, "pass@1_before": round(before, 3),
                     "pass@1_after": round(after, 3), "gain_points": round(100 * (after - before), 1),
                     "train_wall_s": round(wall, 1)})
        print(json.dumps(rows[-1]))
    print("\npreset   pass@1 before -> after   gain (points)   wall time")
    for r in rows:
        print(f"{r['preset']:<8} {r['pass@1_before']:.3f} -> {r['pass@1_after']:.3f}        "
              f"{r['gain_points']:+6.1f}        {r['train_wall_s']:.0f} s")


if __name__ == "__main__":
    main()
