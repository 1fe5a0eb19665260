"""Learn the ``bayes`` policy's risk map (webapp/sweeps/policies/risk_levels.py, read by risk_map.py) from the two
tuning corpora.

The model's loss P(every near-best seed is stopped) is not the realized one: on curves unlike the drift table's
(bench/other_sweeps.py) a sweep stopped at a model loss of 0.05 lost every near-best seed in about 10 % of sweeps.
So the policy stops while the model's loss stays under the level ``model_risk(risk)`` at which the realized loss
stayed within ``risk`` on the tuning sweeps, as conformal risk control and Learn-then-Test choose a threshold on
calibration data (Angelopoulos et al., "Conformal Risk Control", ICLR 2024; "Learn then Test", 2021):

    model_risk(risk) = max { l in GRID : L_c,h(l') <= risk for every l' <= l, every corpus c and prior h }

with L_c,h(l) the realized loss rate (the share of sweeps whose every near-best seed, judged on the noise-free
worth, was stopped) of bayes replayed at model risk l on the tuning sweeps of corpus c (bench/synthetic_sweeps.py
seed ``TUNE_SEED``; bench/other_sweeps.py seed ``HISTORY_SEED``, never the test seeds) with prior h (the built-in
drift table, or one learned from the corpus's other fold: cross-fitted). Below the smallest level the map scales
linearly to 0; above the largest target it keeps the last ratio.

    .venv/bin/python bench/calibrate_risk.py            # 600 sweeps a corpus, ~30 min on 2 cores; writes risk_levels.py
"""
from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

import bayes_calibration  # noqa: E402
import other_sweeps  # noqa: E402
import synthetic_sweeps  # noqa: E402

GRID = (0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.06, 0.08, 0.10, 0.13, 0.16, 0.20, 0.25, 0.30, 0.40)
TARGETS = (0.02, 0.03, 0.05, 0.075, 0.10, 0.15, 0.20, 0.30, 0.40, 0.50)
LEVELS_PATH = os.path.join(ROOT, "webapp", "sweeps", "policies", "risk_levels.py")
CORPORA = {"synthetic": lambda n: synthetic_sweeps.synthetic_sweeps(synthetic_sweeps.TUNE_SEED, n),
           "other": lambda n: other_sweeps.other_sweeps(other_sweeps.HISTORY_SEED, n)}
PRIORS = ("builtin", "cross-fit")

def loss_curve(sweeps: list, prior: str, grid=GRID) -> dict[float, float]:
    """Realized loss rate per model risk level: bayes replayed on every sweep at each level (the map left out)."""
    histories = bayes_calibration.cross_fit(sweeps) if prior == "cross-fit" else [None] * len(sweeps)
    nears = [bayes_calibration.near_best_worth(s) for s in sweeps]
    found = bayes_calibration.outcomes(sweeps, nears, histories, grid, exact=True)
    return {level: o.loss_rate for level, o in found.items()}


def choose(curves: list[dict[float, float]], targets=TARGETS) -> list[tuple[float, float]]:
    """(target risk, model risk) pairs: per target the largest level whose realized loss, and every smaller
    level's, is within the target on every curve (the smallest level when none is)."""
    levels = sorted(curves[0])
    envelope, worst = [], 0.0
    for level in levels:
        worst = max([worst] + [c[level] for c in curves])
        envelope.append((level, worst))
    out = []
    for target in targets:
        ok = [level for level, loss in envelope if loss <= target]
        out.append((target, max(ok) if ok else levels[0]))
    return out


def write(pairs: dict[str, list[tuple[float, float]]], n: int, table: list[str],
          curves: dict[str, dict[str, dict[float, float]]]) -> None:
    lines = ['"""The ``bayes`` policy\'s risk map: the model risk at which bayes\'s realized loss stayed within each',
             f"target risk on {n} tuning sweeps of each corpus (bench/synthetic_sweeps.py seed "
             f"{synthetic_sweeps.TUNE_SEED}, bench/other_sweeps.py seed {other_sweeps.HISTORY_SEED}),",
             "with the built-in drift table (BUILTIN) and with one learned from the corpus's other fold (LEARNED),",
             'learned by bench/calibrate_risk.py (see ``risk_map``). Generated: do not edit by hand.', "",
             "Realized loss rate per model risk level (corpus, prior):", ""]
    lines += [f"    {row}" for row in table]
    lines += ['"""', ""]
    for name, key in (("BUILTIN", "builtin"), ("LEARNED", "cross-fit")):
        lines.append(f"{name} = {tuple(pairs[key])!r}")
    lines.append("")
    lines.append("# realized loss rate per prior, corpus and model risk level (what the pairs were chosen from)")
    lines.append("CURVES = {")
    for prior in PRIORS:
        lines.append(f"    {prior!r}: {{")
        for corpus_name, curve in curves[prior].items():
            lines.append(f"        {corpus_name!r}: {{{', '.join(f'{k!r}: {round(v, 4)!r}' for k, v in curve.items())}}},")
        lines.append("    },")
    lines.append("}")
    with open(LEVELS_PATH, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweeps", type=int, default=600, help="tuning sweeps a corpus (50-5000)")
    args = parser.parse_args(argv)
    if not 50 <= args.sweeps <= 5000:
        parser.error(f"--sweeps: must be between 50 and 5000, got {args.sweeps}")
    started = time.perf_counter()
    curves: dict[str, dict[str, dict[float, float]]] = {p: {} for p in PRIORS}
    table = ["level  " + "  ".join(f"{c[:5]}/{p[:5]}" for p in PRIORS for c in CORPORA)]
    for prior in PRIORS:
        for name, make in CORPORA.items():
            curves[prior][name] = loss_curve(make(args.sweeps), prior)
            print(f"{prior} {name}: {time.perf_counter() - started:.0f} s", flush=True)
    for level in GRID:
        table.append(f"{level:5.3f}  " + "  ".join(f"{curves[p][c][level]:11.1%}" for p in PRIORS for c in CORPORA))
    pairs = {p: choose(list(curves[p].values())) for p in PRIORS}
    write(pairs, args.sweeps, table, curves)
    print("\n".join(table))
    print(f"wrote {LEVELS_PATH}: {pairs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
