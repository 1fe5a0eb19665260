"""The ``bayes`` policy's calibration: promised risk against realized loss, on synthetic sweeps scored on each seed's
noise-free worth (bench/synthetic_sweeps.py, test generator seed) and on the recorded corpus (bench/curves/real).

Per risk (0.05, 0.10, 0.20) it prints the realized loss rate (the share of sweeps whose every near-best seed was
stopped) with its one-sided 95 % Wilson upper bound, the compute saved and the mean regret (best worth - best kept
worth); then the one-shot rule frontier: "at fraction f of the run keep the top share q of the seeds by their
level (the mean of their last 10 % of points)", f and q on a grid, and per risk the best such rule (most saved)
whose realized loss is within risk + 3 points.

On the recorded corpus no worth is known: a seed is near-best when its final (mean of its last 10 % of points) is
within the tolerance of the best final or not distinguishable from it (the difference within two standard errors,
sqrt(se_i**2 + se_best**2), each se = the sd of the run's last 10 % of points / sqrt(their number)).
"""
from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import statistics
import sys
import time
from typing import Callable, Hashable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from webapp.sweeps.policies import history_risk, replay, risk_map  # noqa: E402
from webapp.sweeps.policies.calibrated import level_window  # noqa: E402

RISKS = (0.05, 0.10, 0.20)
SLACK = 0.03  # the bound: realized loss's upper bound <= risk + 3 points
SAVING_SLACK = 0.02  # bayes saves >= best one-shot rule's saving - 2 points
ONE_SHOT_F = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
ONE_SHOT_KEEP = (1, 2, 3, 4, 5, 6, 7)  # seeds kept of 8 (share q = k / 8)
TOLERANCE = 0.02


def wilson_upper(k: int, n: int, z: float = 1.6448536) -> float:
    """One-sided 95 % Wilson upper bound of a binomial proportion k / n (Wilson, JASA 1927):
    (p + z^2/2n + z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)."""
    if n == 0:
        return 1.0
    p = k / n
    return (p + z * z / (2 * n) + z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))) / (1 + z * z / n)


def near_best_worth(sweep) -> set:
    """Synthetic: seeds whose noise-free worth is within the tolerance of the best worth."""
    best = max(sweep.worth.values())
    return {r for r, w in sweep.worth.items() if w >= best - TOLERANCE}


def near_best_recorded(sweep) -> set:
    """Recorded: final within the tolerance of the best final, or within two standard errors of it."""
    tail = {}
    for r, curve in sweep.items():
        values = [v for _, v in curve[-level_window(len(curve)):]]
        se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
        tail[r] = (statistics.fmean(values), se)
    best = max(tail, key=lambda r: tail[r][0])
    top, top_se = tail[best]
    return {r for r, (m, se) in tail.items() if m >= top - TOLERANCE or top - m <= 2 * math.sqrt(se * se + top_se ** 2)}


def worth_of(sweep, r) -> float:
    if hasattr(sweep, "worth"):
        return sweep.worth[r]
    curve = sweep[r]
    return statistics.fmean(v for _, v in curve[-level_window(len(curve)):])


class Outcome:
    """A method's results over sweeps: losses, steps saved / total, regrets."""

    def __init__(self):
        self.losses = self.n = 0
        self.saved = self.total = 0.0
        self.regrets: list[float] = []

    def add(self, sweep, stopped: dict[Hashable, int], near: set) -> None:
        total = sum(len(c) for c in sweep.values())
        run = sum(stopped.get(r, len(c)) for r, c in sweep.items())
        self.saved += total - run
        self.total += total
        self.n += 1
        self.losses += near <= set(stopped)
        best = max(worth_of(sweep, r) for r in sweep)
        kept = [worth_of(sweep, r) for r in sweep if r not in stopped]
        self.regrets.append(best - (max(kept) if kept else min(worth_of(sweep, r) for r in sweep)))

    @property
    def loss_rate(self) -> float:
        return self.losses / self.n

    @property
    def upper(self) -> float:
        return wilson_upper(self.losses, self.n)

    @property
    def compute_saved(self) -> float:
        return self.saved / self.total

    @property
    def regret(self) -> float:
        return statistics.fmean(self.regrets)


def bayes_stops(sweep, risk: float, history=None, model_risk: float | None = None,
                name: str = "bayes") -> dict[Hashable, int]:
    """The stops of bayes (or ``name``: auto) at ``risk`` replayed on ``sweep``; with ``model_risk``, at that model
    loss level instead (the risk map left out: bench/calibrate_risk.py)."""
    steps = max(len(c) for c in sweep.values())
    config = {"name": name, "metric": "reward/mean", "mode": "max", "max_steps": steps,
              "risk": risk if model_risk is None else model_risk}
    with (risk_map.uncalibrated() if model_risk is not None else contextlib.nullcontext()):
        result = replay(config, sweep, history=history)
    return {r: result.steps_run[r] for r in result.stopped_at}


_JOB: dict = {}


def _replay_one(args):
    i, risk, exact = args
    return i, risk, bayes_stops(_JOB["sweeps"][i], risk, _JOB["histories"][i], model_risk=risk if exact else None,
                                name=_JOB["name"])


def outcomes(sweeps: list, nears: list, histories: list, risks, exact: bool = False,
             processes: int = 2, name: str = "bayes") -> dict:
    """risk -> Outcome of bayes (or ``name``: auto) replayed on every sweep at each risk (``exact``: at that model
    loss level, the risk map left out), in ``processes`` forked processes that share the sweeps and histories."""
    _JOB.update(sweeps=sweeps, histories=histories, name=name)
    result = {risk: Outcome() for risk in risks}
    if not exact:
        _fit_histories(histories, max(risks), processes)
    jobs = [(i, risk, exact) for risk in risks for i in range(len(sweeps))]
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        for i, risk, stops in sorted(pool.imap_unordered(_replay_one, jobs, chunksize=8),
                                     key=lambda x: (x[1], x[0])):
            result[risk].add(sweeps[i], stops, nears[i])
    return result


def _fit_one(k: int):
    return k, history_risk.fit(_JOB["distinct"][k], _config(_JOB["distinct"][k][0], _JOB["risk"]), replay)


def _config(sweep, risk: float) -> dict:
    return {"name": "bayes", "metric": "reward/mean", "mode": "max", "max_steps": max(len(c) for c in sweep.values()),
            "risk": risk}


def _fit_histories(histories: list, risk: float, processes: int) -> None:
    """Each distinct history's risk fit (``history_risk``: bayes replayed on its complete sweeps, level after
    level, up to the largest ``risk``) computed once, in parallel, and kept for the replays (the forked workers
    inherit it)."""
    distinct = [h for h in {id(h): h for h in histories if h}.values()
                if not history_risk.remembered(h, _config(h[0], risk))]
    if not distinct:
        return
    _JOB.update(distinct=distinct, risk=risk)
    with multiprocessing.get_context("fork").Pool(min(processes, len(distinct))) as pool:
        for k, found in pool.imap_unordered(_fit_one, range(len(distinct))):
            history_risk.remember(distinct[k], _config(distinct[k][0], risk), found)


def one_shot_stops(sweep, fraction: float, keep: int) -> dict[Hashable, int]:
    """Keep the ``keep`` seeds (of 8; scaled to the sweep's size) with the highest level at ``fraction``."""
    steps = max(len(c) for c in sweep.values())
    at = math.ceil(fraction * steps)
    window = level_window(steps)
    levels = {r: statistics.fmean(v for _, v in c[max(0, at - window):at]) for r, c in sweep.items()}
    kept = sorted(sweep, key=lambda r: -levels[r])[:max(1, round(keep * len(sweep) / 8))]
    return {r: at for r in sweep if r not in kept}


def cross_fit(sweeps: list, folds: int = 2) -> list[list]:
    """Each sweep's history for a cross-fitted replay: the sweeps of the other folds (sweep i is in fold i % folds),
    so no sweep is judged by a prior that learned from it. One list per fold (the learned table is cached)."""
    by_fold = [[s for j, s in enumerate(sweeps) if j % folds != k] for k in range(folds)]
    return [by_fold[i % folds] for i in range(len(sweeps))]


def calibration(sweeps: list, near_of: Callable, out: Callable[[str], None], title: str,
                gate: bool = True, histories: list | None = None, efficiency: bool = True) -> dict:
    """Print the calibration table and the one-shot frontier; returns {risk: (bayes Outcome, best one-shot name,
    its Outcome or None)} and whether every gate held. ``histories[i]``: the finished sweeps bayes learns its
    prior from when it replays ``sweeps[i]`` (None: the built-in prior). ``efficiency``: the gate asks the saving
    too (saved >= the best one-shot rule's less 2 points), else the loss bound alone."""
    started = time.perf_counter()
    nears = [near_of(s) for s in sweeps]
    histories = histories or [None] * len(sweeps)
    bayes = outcomes(sweeps, nears, histories, RISKS)
    shots = {}
    for f in ONE_SHOT_F:
        for k in ONE_SHOT_KEEP:
            o = Outcome()
            for s, near in zip(sweeps, nears):
                o.add(s, one_shot_stops(s, f, k), near)
            shots[(f, k)] = o
    out(f"\n== {title}: bayes calibration ({len(sweeps)} sweeps; loss = every near-best seed stopped) ==")
    out("   the best one-shot rule: the most saved of the frontier's rules whose own realized loss passes the same "
        "bound (95 % upper <= risk + 3 points; in brackets, the rule whose point loss alone is within it)")
    out(f"{'':6s} {'risk':>5s} {'realized loss':>14s} {'95 % upper':>11s} {'saved':>7s} {'regret':>8s}   "
        f"{'best one-shot rule within the bound':36s} {'its loss':>9s} {'saved':>7s}  gate")
    held = True
    result = {}
    policies = {"bayes": bayes}
    if histories[0] is not None:
        policies["auto"] = outcomes(sweeps, nears, histories, RISKS, name="auto")
    for risk in RISKS:
        ok_shots = [(key, s) for key, s in shots.items() if s.upper <= risk + SLACK]
        key, shot = max(ok_shots, key=lambda ks: ks[1].compute_saved, default=(None, None))
        loose = max(((k, s) for k, s in shots.items() if s.loss_rate <= risk + SLACK),
                    key=lambda ks: ks[1].compute_saved, default=(None, None))
        name = f"at {key[0]:.0%} keep top {key[1]}/8" if key else "none"
        for policy, found in policies.items():
            o = found[risk]
            saves = shot is None or o.compute_saved >= shot.compute_saved - SAVING_SLACK
            # gated: the loss bound of both; the saving of the product's best policy (auto with a history)
            gated_saving = efficiency and (policy == "auto" or len(policies) == 1)
            passes = o.upper <= risk + SLACK and (not gated_saving or saves)
            held &= passes
            verdict = ("pass" if passes else "FAIL") if gate else "(not gated)"
            if gate and not gated_saving:
                verdict += " (loss" + ("; saving " + ("within" if saves else "below") + " the rule's)"
                                       if efficiency else ")")
            out(f"{policy:6s} {risk:5.2f} {o.loss_rate:14.1%} {o.upper:11.1%} {o.compute_saved:7.1%} {o.regret:8.4f}"
                f"   {name:36s} {(shot.loss_rate if shot else float('nan')):9.1%} "
                f"{(shot.compute_saved if shot else float('nan')):7.1%}  {verdict}")
            result[(policy, risk)] = (o, name, shot)
        if loose[0] is not None and loose[0] != key:
            out(f"{'':12s} [point loss within risk + 3 points: at {loose[0][0]:.0%} keep top {loose[0][1]}/8, loss "
                f"{loose[1].loss_rate:.1%} (95 % upper {loose[1].upper:.1%}), saved {loose[1].compute_saved:.1%}]")
    if "auto" in policies:
        out_choices(sweeps, histories, out)
    out(f"\n   one-shot frontier (realized loss / saved), keep top k of 8 at fraction f:")
    out("   " + f"{'f':>5s} " + " ".join(f"{'k=' + str(k):>14s}" for k in ONE_SHOT_KEEP))
    for f in ONE_SHOT_F:
        out("   " + f"{f:5.0%} " + " ".join(f"{shots[(f, k)].loss_rate:6.1%}/{shots[(f, k)].compute_saved:6.1%} "
                                            for k in ONE_SHOT_KEEP))
    if histories[0] is not None:
        out_of_sample_one_shot(sweeps, nears, out)
    out(f"   ({time.perf_counter() - started:.0f} s)")
    return {"held": held, "rows": result}


FINE_F = tuple(x / 100 for x in range(20, 95, 5))


def out_choices(sweeps: list, histories: list, out: Callable[[str], None]) -> None:
    """What auto chose per distinct history (a fold's), per risk."""
    distinct = list({id(h): h for h in histories if h}.values())
    for risk in RISKS:
        picks = []
        for history in distinct:
            fit = history_risk.learn(history, _config(history[0], max(RISKS)), replay)
            choice = fit.choose(risk) if fit else None
            picks.append("bayes, built-in calibration (no fit)" if choice is None else choice.text.split(" (")[0])
        out(f"   auto at {risk:.2f} chose: {'; '.join(picks)}")


def out_of_sample_one_shot(sweeps: list, nears: list, out: Callable[[str], None], folds: int = 2) -> None:
    """The one-shot rule chosen as bayes's level is, out of sample: per fold, of the rules "at f keep top k/8" (f
    from 20 % to 90 % by 5 points, k 1-7) the one that saved most on the other folds' sweeps with (lost + 1) /
    (n + 1) <= risk (conformal risk control), judged on this fold. The frontier's best rule is chosen on the test
    sweeps themselves with its realized loss alone within risk + 3 points; this one is certified as bayes is."""
    shots = {(f, k): [one_shot_stops(s, f, k) for s in sweeps] for f in FINE_F for k in ONE_SHOT_KEEP}
    out("   one-shot rule chosen on the other fold (certified out of sample, as bayes's level is):")
    for risk in RISKS:
        o, picks = Outcome(), []
        for fold in range(folds):
            history = [i for i in range(len(sweeps)) if i % folds != fold]

            def saved_on(key):
                lost = sum(nears[i] <= set(shots[key][i]) for i in history)
                if (lost + 1) / (len(history) + 1) > risk:
                    return -1.0
                return sum(sum(len(c) for c in sweeps[i].values()) - sum(shots[key][i].get(r, len(c)) for r, c in
                                                                         sweeps[i].items()) for i in history)
            key = max(shots, key=saved_on)
            if saved_on(key) < 0:  # none certified on so few sweeps: every seed runs to its end
                key = None
            picks.append(f"at {key[0]:.0%} keep top {key[1]}/8" if key else "none certified: keep all")
            for i in range(fold, len(sweeps), folds):
                o.add(sweeps[i], shots[key][i] if key else {}, nears[i])
        out(f"   {risk:6.2f} realized loss {o.loss_rate:6.1%} (95 % upper {o.upper:5.1%}), saved {o.compute_saved:6.1%}"
            f"  ({'; '.join(picks)})")


CORPORA = ("synthetic", "other", "recorded")
HISTORIES = ("builtin", "cross-fit")


def corpus(name: str, n: int, recorded: Callable[[], list], tune: bool = False) -> tuple[list, Callable, str]:
    """The test sweeps of a corpus, how their near-best seeds are judged, and its title: ``synthetic``
    (bench/synthetic_sweeps.py's test seed), ``other`` (bench/other_sweeps.py's test seed: other shapes, lengths,
    seed counts and noise) or ``recorded`` (bench/curves/real: no worth, near-best by the finals). ``tune``: the
    generators' tuning seeds instead (what a change is chosen on before the test split judges it)."""
    if name == "synthetic":
        import synthetic_sweeps as generator
        seed = generator.TUNE_SEED if tune else generator.TEST_SEED
        return (generator.synthetic_sweeps(seed, n), near_best_worth,
                f"synthetic {'tune' if tune else 'test'} split (seed {seed}, {n} sweeps), noise-free worth")
    if name == "other":
        import other_sweeps as generator
        seed = generator.HISTORY_SEED if tune else generator.TEST_SEED
        return (generator.other_sweeps(seed, n), near_best_worth,
                f"other corpus{' tune split' if tune else ''} (bench/other_sweeps.py seed {seed}, {n} sweeps), "
                "noise-free worth")
    sweeps = recorded()
    return sweeps, near_best_recorded, (f"recorded corpus ({len(sweeps)} sweeps), final within tolerance or two "
                                        "standard errors of the best")


def run_corpora(tests: list[str], histories: list[str], n: int, recorded: Callable[[], list],
                out: Callable[[str], None], tune: bool = False) -> bool:
    """The calibration table of every ``--test`` corpus under every ``--history``: ``builtin`` (the built-in drift
    table alone) or ``cross-fit`` (each sweep replayed with a prior learned from the corpus's other fold, two
    folds). Gated: the synthetic corpora (cross-fitted: the loss bound and the saving; built-in: the loss bound,
    the promise without history); the recorded one is reported, not gated."""
    held = True
    for name in tests:
        sweeps, near_of, title = corpus(name, n, recorded, tune)
        if not sweeps:
            out(f"\n{name}: no sweeps")
            continue
        for history in histories:
            fitted = cross_fit(sweeps) if history == "cross-fit" else None
            label = "prior learned from the other fold (cross-fitted)" if fitted else "built-in prior"
            held &= calibration(sweeps, near_of, out, f"{title}; {label}", gate=name != "recorded",
                                histories=fitted, efficiency=fitted is not None)["held"]
    return held
