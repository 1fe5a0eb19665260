"""pass@k of the base model vs an RL checkpoint on the tiny arithmetic task.

    python bench/passk_eval.py [--checkpoint DIR] [--steps 80] [--n 256] [--problems 100]

Without --checkpoint it first trains one DAPO run (preset dapo, lr 1e-4) from the base model and uses its
final checkpoint. It then samples n completions per held-out problem from each model (the same engine and
verifier as the evaluation jobs: training.evaluate.evaluate_examples), and prints pass@1, pass@16, pass@n,
whether the two curves cross (Yue et al. 2025: RL sharpens, the base catches up at large k), how many
problems each model covers (c > 0), and the wall time of each evaluation.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from training.config import TrainConfig, default_tiny_model_dir  # noqa: E402
from training.data import default_rewards, make_prompt_source  # noqa: E402
from training.passk import coverage, crossing_k, doubling_ks, pass_at_k_curve  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ensure_base() -> str:
    path = default_tiny_model_dir()
    if not os.path.isfile(os.path.join(path, "config.json")):
        from training.tiny import bootstrap_tiny

        bootstrap_tiny(path, log=lambda s: print(s, file=sys.stderr))
    return path


def train_dapo(out: str, steps: int, seed: int) -> tuple[str, float]:
    """One DAPO run from the base model; returns (final checkpoint folder, wall seconds)."""
    from training.loop import train
    from training.sink import NullSink

    final = os.path.join(out, "checkpoints", f"step_{steps:06d}")
    if os.path.isfile(os.path.join(final, "config.json")):
        print(f"reusing the checkpoint already trained at {final}", file=sys.stderr)
        return final, 0.0
    cfg = TrainConfig.from_dict({"preset": "dapo", "total_steps": steps, "lr": 1e-4, "seed": seed, "device": "cpu"})
    t0 = time.time()
    result = train(cfg, out, NullSink())
    if result.status != "succeeded":
        raise SystemExit(f"the DAPO run ended {result.status} at step {result.step}")
    return final, time.time() - t0


def evaluate(model_dir: str, examples: list[dict], n: int, seed: int) -> tuple[list[tuple[int, int]], float]:
    """Per-problem (n, c) counts of one model, and the wall seconds the sampling and verifying took."""
    from training.evaluate import evaluate_examples
    from training.loop import load_model

    model, tokenizer = load_model(model_dir, "cpu")
    model.eval()
    t0 = time.time()
    res = evaluate_examples(model, tokenizer, examples, n=n, ks=[1], temperature=1.0, top_p=1.0,
                            max_new_tokens=8, rewards=default_rewards("arithmetic"), seed=seed, batch_size=512)
    return [(p["n"], p["c"]) for p in res["problems"]], time.time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default="", help="RL checkpoint folder (default: train a DAPO run first)")
    ap.add_argument("--steps", type=int, default=80, help="DAPO steps when training the checkpoint here")
    ap.add_argument("--out", default=os.path.join(REPO, "var", "bench", "passk_dapo"))
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--problems", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", default="", help="also write the results to this file")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    base = ensure_base()
    train_s = 0.0
    ckpt = args.checkpoint
    if not ckpt:
        ckpt, train_s = train_dapo(args.out, args.steps, args.seed)
    examples = make_prompt_source("arithmetic").eval_set(args.problems)
    ks = doubling_ks(args.n)
    results = {}
    for label, path in (("base", base), ("dapo", ckpt)):
        counts, wall = evaluate(path, examples, args.n, args.seed)
        curve = pass_at_k_curve(counts, ks)
        results[label] = {"path": path, "curve": curve, "eval_wall_s": round(wall, 1),
                          "solved": [c > 0 for _, c in counts]}
        print(f"{label}: " + "  ".join(f"pass@{k}={curve[k]:.3f}" for k in ks) + f"  ({wall:.1f} s)", file=sys.stderr)
    cross = crossing_k(results["dapo"]["curve"], results["base"]["curve"])
    cov = coverage(results["base"]["solved"], results["dapo"]["solved"])
    wanted = [k for k in (1, 16, args.n) if k in ks]
    summary = {
        "problems": args.problems, "n": args.n, "checkpoint": ckpt, "dapo_train_wall_s": round(train_s, 1),
        **{f"{label}_pass@{k}": round(results[label]["curve"][k], 4) for label in ("base", "dapo") for k in wanted},
        "curves_cross": cross is not None, "crossing_k": cross,
        "coverage": {"base_only": cov["a_only"], "dapo_only": cov["b_only"], "both": cov["both"],
                     "neither": cov["neither"]},
        "eval_wall_s": {label: results[label]["eval_wall_s"] for label in results},
        "samples_per_model": args.n * args.problems,
    }
    print(json.dumps(summary, indent=2))
    print(f"\n{'model':<6}" + "".join(f"{'pass@' + str(k):>11}" for k in wanted) + f"{'eval wall':>12}")
    for label in ("base", "dapo"):
        print(f"{label:<6}" + "".join(f"{results[label]['curve'][k]:>11.3f}" for k in wanted)
              + f"{results[label]['eval_wall_s']:>11.1f}s")
    print("curves cross" + (f" at k = {cross}" if cross else ": no (one stays above the other)"))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({**summary, "curves": {lb: results[lb]["curve"] for lb in results}}, fh, indent=2)


if __name__ == "__main__":
    main()
