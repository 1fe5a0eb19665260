"""How a recorded sweep's near-best seeds are judged in a risk fit (webapp/sweeps/policies/history_risk.py:
``final_level``), against the noise-free worth, on the tuning splits of both synthetic corpora.

    python bench/history_finals.py [--sweeps 400]

For each corpus and each one-shot cut of ``history_risk.CUT_AT`` x ``CUT_KEEP`` (bayes_calibration.one_shot_stops),
the share of sweeps that lost every near-best seed judged on the worth (``near_best_worth``) and judged on the
recorded curves by each way of reading a final: the plain mean of the last 10 % / 20 % of points, the robust mean
(points within 2.5 x 1.4826 MAD of their median) of the last 15 / 20 / 25 / 30 %. Printed: seeds near-best a sweep,
and over the cuts whose worth-judged loss is below 25 % (where a risk fit chooses), the error of each reading's loss
(mean, most liberal, most conservative). A fit judged by a conservative reading certifies too few cuts (it saves
less than it could); by a liberal one it breaks its promise.
"""
from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "bench")]

import other_sweeps  # noqa: E402
import synthetic_sweeps  # noqa: E402
from bayes_calibration import TOLERANCE, near_best_worth, one_shot_stops  # noqa: E402

READINGS = ("mean10", "mean20", "robust15", "robust20", "robust25", "robust30")


def reading(values: np.ndarray, how: str) -> float:
    """A curve's final by ``how``: "mean<P>" or "robust<P>" of the last P % of its points."""
    tail = values[-max(1, math.ceil(int(how.lstrip("meanrobust")) / 100 * len(values))):]
    if how.startswith("mean"):
        return float(tail.mean())
    middle = np.median(tail)
    spread = 2.5 * 1.4826 * np.median(np.abs(tail - middle))
    return float(tail[np.abs(tail - middle) <= spread].mean())


def near(sweep, how: str) -> set:
    finals = {r: reading(np.array([v for _, v in c]), how) for r, c in sweep.items()}
    top = max(finals.values())
    return {r for r, f in finals.items() if f >= top - TOLERANCE}


def main() -> None:
    from webapp.sweeps.policies.history_risk import CUT_AT, CUT_KEEP

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweeps", type=int, default=400)
    n = ap.parse_args().sweeps
    corpora = {"synthetic": synthetic_sweeps.synthetic_sweeps(synthetic_sweeps.TUNE_SEED, n),
               "other": other_sweeps.other_sweeps(other_sweeps.HISTORY_SEED, n)}
    for name, sweeps in corpora.items():
        worth = [near_best_worth(s) for s in sweeps]
        judged = {how: [near(s, how) for s in sweeps] for how in READINGS}
        print(f"{name} tuning split, {n} sweeps: seeds near-best a sweep: worth {np.mean([len(x) for x in worth]):.2f}, "
              + ", ".join(f"{how} {np.mean([len(x) for x in judged[how]]):.2f}" for how in READINGS))
        errors = {how: [] for how in READINGS}
        for at in CUT_AT:
            for keep in CUT_KEEP:
                stopped = [set(one_shot_stops(s, at, round(keep * 8))) for s in sweeps]
                truth = np.mean([w <= st for w, st in zip(worth, stopped)])
                if truth < 0.25:
                    for how in READINGS:
                        errors[how].append(np.mean([j <= st for j, st in zip(judged[how], stopped)]) - truth)
        print(f"  {len(errors[READINGS[0]])} cuts with a worth-judged loss below 25 %; each reading's loss minus it:")
        for how in READINGS:
            e = np.array(errors[how]) * 100
            print(f"  {how:9s} mean {e.mean():+5.1f}  most liberal {e.min():+5.1f}  most conservative {e.max():+5.1f} points")


if __name__ == "__main__":
    main()
