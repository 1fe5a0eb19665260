"""Learn the ``bayes`` policy's drift table (webapp/sweeps/policies/drift_table.py) from the synthetic tuning corpus.

For every seed of every tuning sweep (bench/synthetic_sweeps.py, generator seed ``TUNE_SEED``, never the test
seed) and every step t from 10 % of its run on, it computes what the policy sees at t (``calibrated.SeedFold``'s
level and noise, ``calibrated.predictions``' scale and standing, all seeds at step t) and the seed's standardized
drift relative to its sweep's, z = ((worth - level) - median over the sweep's seeds of (worth - level)) / scale,
to its noise-free worth (the sweep's common course cancels between seeds at one step); the table holds the quantiles of z per cell of
(fraction of the run, standing). A cell with fewer than ``MIN_CELL`` samples takes its fraction's pooled quantiles.

    .venv/bin/python bench/calibrate_bayes.py            # 3,000 tuning sweeps; writes drift_table.py
"""
from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from synthetic_sweeps import TUNE_SEED, synthetic_sweeps  # noqa: E402
from webapp.sweeps.policies import calibrated  # noqa: E402

F_EDGES = (0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95, 1.0)
U_EDGES = (-2.0, -1.0, -0.4, 0.4, 1.0, 2.0)
PROBS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.975, 0.99, 0.995,
         0.999)
MIN_CELL = 300
TABLE_PATH = os.path.join(ROOT, "webapp", "sweeps", "policies", "drift_table.py")


def samples(sweeps) -> np.ndarray:
    """Rows (fraction, standing, z) of every seed at every step from 10 % of its run on."""
    rows = []
    for sweep in sweeps:
        runs = list(sweep)
        x = np.array([[v for _, v in sweep[r]] for r in runs])
        n, steps = x.shape
        window = calibrated.level_window(steps)
        worth = np.array([sweep.worth[r] for r in runs])
        csum = np.concatenate([np.zeros((n, 1)), np.cumsum(x, axis=1)], axis=1)
        d2 = np.concatenate([np.zeros((n, 1)), np.cumsum(np.diff(x, axis=1) ** 2, axis=1)], axis=1)
        for t in range(max(2, math.ceil(0.1 * steps)), steps + 1):
            lo = max(0, t - window)
            level = (csum[:, t] - csum[:, lo]) / (t - lo)
            noise = np.sqrt(d2[:, t - 1] / (2.0 * (t - 1)))
            spread, median = level.std(), np.median(level)
            scale = np.maximum(np.sqrt(noise ** 2 / window + spread ** 2), 1e-9)
            drift = worth - level
            rows.append(np.stack([np.full(n, t / steps), (level - median) / scale,
                                  (drift - np.median(drift)) / scale], axis=1))
    return np.concatenate(rows)


def table(rows: np.ndarray) -> list:
    f_cell = np.searchsorted(np.asarray(F_EDGES), rows[:, 0], side="right")
    u_cell = np.searchsorted(np.asarray(U_EDGES), rows[:, 1], side="right")
    out = []
    for i in range(len(F_EDGES) + 1):
        in_f = f_cell == i
        pooled = np.quantile(rows[in_f, 2], PROBS) if in_f.sum() else np.quantile(rows[:, 2], PROBS)
        line = []
        for j in range(len(U_EDGES) + 1):
            cell = in_f & (u_cell == j)
            q = np.quantile(rows[cell, 2], PROBS) if cell.sum() >= MIN_CELL else pooled
            line.append([round(float(v), 4) for v in q])
        out.append(line)
    return out


def write(tab: list, n_sweeps: int, n_rows: int) -> None:
    lines = ['"""The ``bayes`` policy\'s drift table: quantiles of z (the relative drift) per cell of (fraction of',
             "the run, standing), learned by bench/calibrate_bayes.py from "
             f"{n_sweeps} synthetic tuning sweeps (generator seed {TUNE_SEED},",
             f'{n_rows} samples; see ``calibrated``). Generated: do not edit by hand."""', "",
             f"F_EDGES = {F_EDGES!r}", f"U_EDGES = {U_EDGES!r}", f"PROBS = {PROBS!r}", "TABLE = ["]
    for line in tab:
        lines.append("    [")
        for cell in line:
            lines.append(f"        {cell!r},")
        lines.append("    ],")
    lines.append("]")
    with open(TABLE_PATH, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweeps", type=int, default=3000, help="tuning sweeps (100-20000)")
    args = parser.parse_args(argv)
    if not 100 <= args.sweeps <= 20000:
        parser.error(f"--sweeps: must be between 100 and 20000, got {args.sweeps}")
    rows = samples(synthetic_sweeps(TUNE_SEED, args.sweeps))
    write(table(rows), args.sweeps, len(rows))
    print(f"wrote {TABLE_PATH} from {len(rows)} samples")
    return 0


if __name__ == "__main__":
    sys.exit(main())
