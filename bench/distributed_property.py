"""Distributed runs end whatever each rank holds: many drawn 2-rank cases (FSDP2 and DDP, gloo, the tiny model).

    python bench/distributed_property.py [--cases 24] [--first-seed 0] [--limit-s 180]

Each case is ``tests/training/test_distributed_property.py: random_case(seed)`` (strategy, preset, prompts, group
size, completion length, micro-batch size; a quarter with groups of 16 and up to 72 tokens), run through the CLI as ``run_case`` runs it, killed at
``--limit-s``. A case passes when it ends ``succeeded`` within its time with every step's metrics; one line per
case (its shape, wall time, steps, last reward and gradient norm), then how many passed. The suite runs three
fixed cases of the same test module.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.training.test_distributed_property import assert_case_ends, random_case, run_case  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=24)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--limit-s", type=float, default=180.0)
    args = ap.parse_args()
    passed = 0
    for seed in range(args.first_seed, args.first_seed + args.cases):
        cfg = random_case(seed)
        result = run_case(cfg, args.limit_s)
        try:
            assert_case_ends(cfg, result)
            verdict = "ok"
            passed += 1
        except AssertionError as exc:
            verdict = "FAILED: " + str(exc).partition("\n")[0][:200]
        last = result["steps"].get(max(result["steps"], default=0), {})
        print(f"seed {seed:3d} {cfg['strategy']:4s} {cfg['preset']:4s} {cfg['prompts_per_step']}x{cfg['group_size']} "
              f"tokens {cfg['max_new_tokens']:2d} micro {cfg['micro_batch_size']}: {result['wall_s']:6.1f} s, "
              f"steps {len(result['steps'])}/{cfg['total_steps']}, reward {last.get('reward/mean', float('nan')):.3f}, "
              f"grad_norm {last.get('grad_norm', float('nan')):.3g}, length/max {last.get('length/max', 0):.0f}: "
              f"{verdict}", flush=True)
    print(f"{passed}/{args.cases} cases ended succeeded within {args.limit_s:g} s with their metrics")
    return 0 if passed == args.cases else 1


if __name__ == "__main__":
    sys.exit(main())
