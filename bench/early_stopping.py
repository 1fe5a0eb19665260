"""Early-stopping benchmark: Seedbed's policies against Optuna's pruners on seed-sweep curves.

Every sweep is replayed as it really runs: all seeds in parallel, step by step; after each step each method
may stop seeds, which then log nothing more. For every method and curve set it prints

- compute saved: 1 - (steps run) / (steps if every seed ran to its end);
- near-best retention: share of sweeps whose surviving seeds include one whose final value (mean of the last
  10 % of its steps) is within 0.02 of the best seed's final;
- mean regret: mean over sweeps of (best final - best surviving final).

Curve sets: ``synthetic`` (noisy saturating curves with seeds that collapse, plateau low or bloom late; a
``tune`` split with another generator seed is what defaults were tuned on, ``--tune`` prints that grid),
``real`` (bench/curves/real: 30+ sweeps x 8 seeds x 100-200 steps recorded by bench/record_curves.py from the
tiny model on arithmetic, a reasoning-gym task and countdown, GRPO / DAPO / Dr. GRPO at several learning rates
and knobs; their entropy, clipped share and zero-std groups feed the health guards) and ``real40`` (the first
corpus: 10 arithmetic sweeps x 8 seeds x 40 steps, bench/curves/real40). Each set is first described: per
recorded sweep the seeds' spread of finals against the per-step noise and a final's own noise, the gap from the
best final to the second, and the share of seeds already near-best (a sweep where most seeds are near-best is
easy for any rule; one where the spread is below a final's noise is a lottery).

    .venv/bin/python bench/early_stopping.py                    # synthetic and real, every method
    .venv/bin/python bench/early_stopping.py --set real --policies bayes,asha --no-trade-off   # a quick look
    .venv/bin/python bench/early_stopping.py --save             # also bench/curves/early_stopping_<date>.txt
    .venv/bin/python bench/early_stopping.py --tune             # the grid the defaults were chosen from
    .venv/bin/python bench/early_stopping.py --calibration --save   # bayes: promised risk vs realized loss
    .venv/bin/python bench/early_stopping.py --calibration --quick  # the same on 300 synthetic sweeps

Optuna's pruners see raw intermediate values (they do not smooth). Its MedianPruner compares only with
COMPLETE trials, of which a parallel sweep has none until the end, so it cannot prune there; its
SuccessiveHalving and Hyperband pruners with ``min_resource="auto"`` / ``max_resource="auto"`` likewise wait
for a completed trial, so the rows below also give them explicit resources matched to ours.

Findings when the defaults were set (200 synthetic test sweeps; 10 real sweeps x 8 seeds x 40 steps):
asha saves 50 % and keeps a near-best seed in 69 % (synthetic) / 70 % (real) of sweeps; median saves 51 % / 34 %
with 66 % / 70 %. The 90 % retention target is not reached: on the real tiny-task sweeps the seeds' finals
spread about as much as one final's own noise (sd 0.02-0.07 vs 0.02-0.04), so which seed ends best is mostly
chance, and a random stop of 5 of 8 seeds at 20 % also keeps a near-best seed in 70 % of them.

With the recorded corpus (bench/curves/early_stopping_2026-11-26.txt; 95 % intervals over sweeps:
bootstrap for saved and regret, Wilson for retention). 32 real sweeps x 8 seeds x 100-200 steps: median over
sweeps, the seeds' finals spread 0.032 (sd) against a per-step noise of 0.067 and a final's own noise of 0.021,
and the best final leads the second by 0.013; 9 of 32 (every lr 8e-4 one, countdown, a truncating DAPO) have
every seed collapsed alike or learning nothing.

What the early curves tell ("what the early curves tell" section): on the 25 real sweeps whose seeds' finals
differ, the rank correlation between a seed's mean at 20 % / 30 % of the run and its final is +0.02 / +0.00
(median), and keeping the 3 best seeds at 20 % keeps a near-best one in 40 % of them, 3 at random in 56 %; only
at 50 % does the early rank say something (+0.29). Saving 50 % means stopping about 5 of 8 seeds by 20-30 % of
the run, so on these sweeps no rule that reads the curves can keep a near-best seed much more often than
chance: the >= 50 % saved at >= 90 % near-best target is out of reach there. Synthetic sweeps carry more early
signal (+0.14 / +0.19), still short of it: 15.5 % of them have only late bloomers near-best, flat until 30-60 %.

The ``bayes`` policy takes a promised ``risk`` (the earlier p_stop / criterion / drift are gone: its forecast was
4-10x too confident on curves that wander slowly or collapse late). ``--calibration`` measures the promise:
on 1,000 synthetic test sweeps (bench/synthetic_sweeps.py, generator seed 2; the drift table was learned on seed
1) scored on each seed's noise-free worth, risk 0.05 / 0.10 / 0.20 against the realized loss rate with its
one-sided 95 % upper bound, the compute saved, the mean regret and the one-shot rule frontier; then the same on
the recorded corpus (near-best: within the tolerance of the best final or within two standard errors of it).
Figures: bench/curves/early_stopping_2026-11-27.txt and the README's section "The bayes policy's promised risk".
"""
from __future__ import annotations

import argparse
import glob
import math
import os
import random
import re
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable, Hashable, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from record_curves import CORPUS as REAL_CORPUS, LEGACY_CORPUS, load_sweep  # noqa: E402
from webapp.sweeps.policies import replay  # noqa: E402

Curve = list[tuple[int, float]]
Sweep = dict[Hashable, Curve]
NEAR_BEST = 0.02


# --------------------------------------------------------------------------------------------------
# Curve sets
# --------------------------------------------------------------------------------------------------

def _saturating(t: float, start: float, level: float, tau: float) -> float:
    """start + (level - start) * (1 - exp(-t / tau))."""
    return start + (level - start) * (1.0 - math.exp(-t / tau))


def synthetic_seed_curve(rng: random.Random, steps: int, kind: str, batch: int = 64) -> Curve:
    """One seed's reward curve in [0, 1]: an expected curve of the given kind, observed through a batch of
    ``batch`` Bernoulli rewards per step (std ~ sqrt(p(1-p)/batch) ~ 0.06), with a 3 % chance per step of one
    bad batch that scores 30 % of its usual value (the "one noisy batch" a policy must survive).

    kinds: ``normal`` (saturates at 0.55-0.85), ``collapse`` (like normal, then decays to 0-0.2 from a step
    in 30-80 % of the run), ``plateau`` (saturates low, 0.2-0.45), ``late`` (flat until 30-60 % of the run,
    then rises to the same 0.55-0.85 as normal seeds).
    """
    start = rng.uniform(0.05, 0.2)
    tau = rng.uniform(0.1, 0.35) * steps
    level = rng.uniform(0.55, 0.85)
    collapse_at = rng.uniform(0.3, 0.8) * steps
    collapse_to = rng.uniform(0.0, 0.2)
    bloom_at = rng.uniform(0.3, 0.6) * steps
    if kind == "plateau":
        level = rng.uniform(0.2, 0.45)
    if kind == "late":
        level = rng.uniform(0.55, 0.85)
    points = []
    for t in range(1, steps + 1):
        if kind == "late":
            p = start if t < bloom_at else _saturating(t - bloom_at, start, level, 0.1 * steps)
        else:
            p = _saturating(t, start, level, tau)
        if kind == "collapse" and t >= collapse_at:
            p = collapse_to + (p - collapse_to) * math.exp(-(t - collapse_at) / 2.0)
        value = sum(rng.random() < p for _ in range(batch)) / batch
        if rng.random() < 0.03:
            value *= 0.3
        points.append((t, round(value, 4)))
    return points


def synthetic_sweeps(seed: int, n_sweeps: int = 60, n_seeds: int = 8, steps: int = 40) -> list[Sweep]:
    """Sweeps of ``n_seeds`` seeds; each seed is normal (55 %), collapse, plateau or late (15 % each)."""
    rng = random.Random(seed)
    sweeps = []
    for _ in range(n_sweeps):
        kinds = rng.choices(["normal", "collapse", "plateau", "late"], weights=[55, 15, 15, 15], k=n_seeds)
        sweeps.append({f"seed-{i}": synthetic_seed_curve(rng, steps, kind) for i, kind in enumerate(kinds)})
    return sweeps


class RecordedSweep(dict):
    """A recorded sweep: run -> curve of the replayed metric, plus its name, its config overrides and, in
    ``others``, its other recorded metrics (metric -> run -> curve) for the health guards."""

    def __init__(self, curves: dict, name: str = "", config: dict | None = None, others: dict | None = None):
        super().__init__(curves)
        self.name, self.config, self.others = name, config or {}, others or {}


def _points(values: Sequence[float | None]) -> Curve:
    """(step, value) for steps 1, 2, ... that logged the metric (a recorded null is a step without it)."""
    return [(step, value) for step, value in enumerate(values, start=1) if value is not None]


def real_sweeps(metric: str, folder: str = REAL_CORPUS) -> list[RecordedSweep]:
    """The sweeps recorded by bench/record_curves.py in ``folder`` (one ``<sweep>.json.gz`` each, read by its
    ``load_sweep``): ``runs[seed][metric]`` = the values of steps 1, 2, ... (the training loop counts completed
    steps from 1). Sweeps that did not record ``metric`` are left out."""
    sweeps = []
    for path in sorted(glob.glob(os.path.join(folder, "*.json.gz"))):
        data = load_sweep(path)
        if metric not in data["metrics"]:
            continue
        curves = {seed: _points(series[metric]) for seed, series in data["runs"].items()}
        others = {name: {seed: _points(series[name]) for seed, series in data["runs"].items()}
                  for name in data["metrics"] if name != metric}
        sweeps.append(RecordedSweep(curves, name=data["sweep"], config=data["config"], others=others))
    return sweeps


# --------------------------------------------------------------------------------------------------
# Methods: each maps a sweep to (stopped seed -> number of steps it ran)
# --------------------------------------------------------------------------------------------------

Method = Callable[[Sweep], dict[Hashable, int]]


def seedbed_method(config: dict) -> Method:
    """A Seedbed policy replayed on the sweep; a recorded sweep also feeds the guards its other metrics (a guard
    whose metric the sweep lacks sees no points and never stops a run)."""
    def run(sweep: Sweep) -> dict[Hashable, int]:
        steps = max(len(curve) for curve in sweep.values())
        result = replay({"metric": "reward/mean", "mode": "max", "max_steps": steps, **config}, sweep,
                        other_metrics=getattr(sweep, "others", None))
        return {run_id: result.steps_run[run_id] for run_id in result.stopped_at}
    return run


def optuna_method(make_pruner: Callable[[int], object]) -> Method:
    """Replay a sweep through an Optuna pruner: one trial per seed, all asked up front (they run in
    parallel), each reporting its raw value at every step and asking ``should_prune`` right after."""
    import optuna
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.ERROR)

    def run(sweep: Sweep) -> dict[Hashable, int]:
        steps = max(len(curve) for curve in sweep.values())
        # A fixed study name: Hyperband assigns trials to brackets by a hash of the study's name (a random one
        # by default), so without it two runs of the benchmark differ.
        study = optuna.create_study(direction="maximize", pruner=make_pruner(steps), study_name="bench",
                                    sampler=optuna.samplers.RandomSampler(seed=0))
        trials = {run_id: study.ask() for run_id in sweep}
        stopped: dict[Hashable, int] = {}
        for index in range(steps):
            for run_id, trial in trials.items():
                if run_id in stopped or index >= len(sweep[run_id]):
                    continue
                step, value = sweep[run_id][index]
                trial.report(value, step)
                if trial.should_prune():
                    study.tell(trial, state=TrialState.PRUNED)
                    stopped[run_id] = index + 1
        for run_id, trial in trials.items():
            if run_id not in stopped:
                study.tell(trial, sweep[run_id][-1][1])
        return stopped
    return run


def random_method(stop_share: float = 5 / 8, at_fraction: float = 0.2) -> Method:
    """Baseline: stop a random ``stop_share`` of the seeds at ``at_fraction`` of the run (saves ~50 %)."""
    def run(sweep: Sweep) -> dict[Hashable, int]:
        rng = random.Random(len(sweep) * 1000 + sum(int(v * 1e4) for c in sweep.values() for _, v in c[:3]))
        steps = max(len(curve) for curve in sweep.values())
        victims = rng.sample(sorted(sweep), round(stop_share * len(sweep)))
        return {run_id: math.ceil(at_fraction * steps) for run_id in victims}
    return run


# Every health guard with its defaults (webapp/sweeps/policies/guards.py). On the synthetic set, which has only
# the reward, just reward_drop can act; on the recorded sweeps each reads its own metric.
DEFAULT_GUARDS = [{"kind": "entropy_collapse"}, {"kind": "length_at_cap"}, {"kind": "zero_std"},
                  {"kind": "reward_drop"}]


def methods(grace_fraction: float = 0.25) -> dict[str, Method]:
    """Seedbed's policies with their defaults, a random baseline, then Optuna's pruners (their defaults, and
    resources matched to ours: first rung / warm-up at 25 % of the steps)."""
    import optuna.pruners as P

    def grace(steps: int) -> int:
        return math.ceil(grace_fraction * steps)

    return {
        "seedbed manual": seedbed_method({"name": "manual"}),
        "seedbed median": seedbed_method({"name": "median"}),
        "seedbed asha": seedbed_method({"name": "asha"}),
        "seedbed patience (patience=10)": seedbed_method({"name": "threshold", "patience": 10}),
        "seedbed bayes (defaults)": seedbed_method({"name": "bayes"}),
        "seedbed bayes (risk 0.20)": seedbed_method({"name": "bayes", "risk": 0.2}),
        "seedbed manual + guards (defaults)": seedbed_method({"name": "manual", "guards": DEFAULT_GUARDS}),
        "seedbed bayes + guards (defaults)": seedbed_method({"name": "bayes", "guards": DEFAULT_GUARDS}),
        **{f"seedbed manual + guard {g['kind']}": seedbed_method({"name": "manual", "guards": [g]})
           for g in DEFAULT_GUARDS},
        "random: stop 5 of 8 seeds at 20 %": random_method(),
        "optuna median (defaults)": optuna_method(lambda steps: P.MedianPruner()),
        "optuna median (warmup=grace)": optuna_method(
            lambda steps: P.MedianPruner(n_startup_trials=1, n_warmup_steps=grace(steps))),
        "optuna SH (defaults)": optuna_method(lambda steps: P.SuccessiveHalvingPruner()),
        "optuna SH (r=grace, eta=2)": optuna_method(
            lambda steps: P.SuccessiveHalvingPruner(min_resource=grace(steps), reduction_factor=2)),
        "optuna SH (r=grace, eta=4)": optuna_method(
            lambda steps: P.SuccessiveHalvingPruner(min_resource=grace(steps), reduction_factor=4)),
        "optuna SH (r=10 %, eta=2)": optuna_method(
            lambda steps: P.SuccessiveHalvingPruner(min_resource=math.ceil(0.1 * steps), reduction_factor=2)),
        "optuna SH (r=40 %, eta=2)": optuna_method(
            lambda steps: P.SuccessiveHalvingPruner(min_resource=math.ceil(0.4 * steps), reduction_factor=2)),
        "optuna SH (r=grace, eta=3)": optuna_method(
            lambda steps: P.SuccessiveHalvingPruner(min_resource=grace(steps), reduction_factor=3)),
        "optuna hyperband (max=T)": optuna_method(lambda steps: P.HyperbandPruner(max_resource=steps)),
        "optuna hyperband (r=grace, max=T, eta=2)": optuna_method(
            lambda steps: P.HyperbandPruner(min_resource=grace(steps), max_resource=steps, reduction_factor=2)),
    }


# --------------------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------------------

def final_value(curve: Sequence[tuple[int, float]]) -> float:
    """Mean of the last 10 % of the curve's points (at least one), over the whole recorded curve."""
    tail = max(1, math.ceil(0.1 * len(curve)))
    return sum(value for _, value in curve[-tail:]) / tail


def step_noise(curve: Curve) -> float:
    """Per-step noise of a curve: sd of its first differences over its second half / sqrt(2) (a difference of
    two independent points has twice a point's variance; the trend there is small next to the noise)."""
    values = [value for _, value in curve[len(curve) // 2:]]
    diffs = [b - a for a, b in zip(values, values[1:])]
    if len(diffs) < 2:
        return math.nan
    mean = sum(diffs) / len(diffs)
    return math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1) / 2)


def sweep_stats(sweep: Sweep) -> dict[str, float]:
    """What makes a sweep easy or hard for a stopping rule: the seeds' mean over their first 10 % of steps (what
    was learnt: ``best`` against ``start``), the spread of its seeds' finals (sd), the median
    per-step noise of its seeds, one final's own noise (per-step noise / sqrt(points in the final's window)),
    the best final, the gap from the best to the second best, and the share of seeds within NEAR_BEST of the
    best (with half or more near-best, stopping seeds at random rarely loses one)."""
    finals = sorted((final_value(curve) for curve in sweep.values()), reverse=True)
    starts = [final_value(curve[:max(1, math.ceil(0.1 * len(curve)))]) for curve in sweep.values()]
    mean = sum(finals) / len(finals)
    spread = math.sqrt(sum((f - mean) ** 2 for f in finals) / (len(finals) - 1)) if len(finals) > 1 else 0.0
    noises = sorted(step_noise(curve) for curve in sweep.values())
    noise = noises[len(noises) // 2]
    window = max(1, math.ceil(0.1 * max(len(curve) for curve in sweep.values())))
    return {"start": sum(starts) / len(starts), "best": finals[0], "spread": spread, "step_noise": noise,
            "final_noise": noise / math.sqrt(window),
            "gap": finals[0] - finals[1] if len(finals) > 1 else 0.0,
            "near_best_share": sum(finals[0] - f <= NEAR_BEST for f in finals) / len(finals)}


def describe_corpus(sweeps: list[Sweep], out: Callable[[str], None], folder: str = "") -> None:
    """The set's shape and, per sweep (recorded sets) or summed up (all), the statistics of sweep_stats."""
    seeds = sorted(len(s) for s in sweeps)
    steps = sorted(max(len(c) for c in s.values()) for s in sweeps)
    stats = [sweep_stats(s) for s in sweeps]
    line = f"{len(sweeps)} sweeps, {seeds[0]}-{seeds[-1]} seeds, {steps[0]}-{steps[-1]} steps"
    if folder:
        files = glob.glob(os.path.join(folder, "*.json.gz"))
        line += f", {len(files)} files, {sum(os.path.getsize(f) for f in files) / 1024:.0f} KiB on disk"
    out(line)
    tasks: dict[str, int] = {}
    for sweep in sweeps:
        config = getattr(sweep, "config", None)
        if config is not None:
            key = f"{config.get('task', 'arithmetic')} / {config.get('preset', 'grpo')}"
            tasks[key] = tasks.get(key, 0) + 1
    if tasks:
        out("task / preset: " + ", ".join(f"{k} x{n}" for k, n in sorted(tasks.items())))
        out(f"{'sweep':26s} {'task':30s} {'lr':>7s} {'seeds':>5s} {'steps':>5s} {'start':>6s} {'best':>6s} "
            f"{'spread':>7s} "
            f"{'noise/step':>10s} {'noise/final':>11s} {'gap 1-2':>7s} {'near-best':>9s}")
        for sweep, st in zip(sweeps, stats):
            config = sweep.config
            out(f"{sweep.name:26s} {config.get('task', 'arithmetic'):30s} {config.get('lr', 0):7.0e} {len(sweep):5d} "
                f"{max(len(c) for c in sweep.values()):5d} {st['start']:6.3f} {st['best']:6.3f} {st['spread']:7.3f} "
                f"{st['step_noise']:10.3f} {st['final_noise']:11.3f} {st['gap']:7.3f} {st['near_best_share']:9.0%}")

    def median(key: str) -> float:
        values = sorted(st[key] for st in stats)
        return values[len(values) // 2]

    out(f"medians over sweeps: seed spread of finals {median('spread'):.3f}, per-step noise "
        f"{median('step_noise'):.3f}, a final's own noise {median('final_noise'):.3f}, best-to-second gap "
        f"{median('gap'):.3f}, seeds near-best "
        f"{median('near_best_share'):.0%}; sweeps with half or more of their seeds near-best: "
        f"{sum(st['near_best_share'] >= 0.5 for st in stats)} of {len(stats)}")


@dataclass
class Score:
    compute_saved: float
    retention: float
    mean_regret: float
    n_sweeps: int
    saved_ci: tuple[float, float] = (math.nan, math.nan)
    retention_ci: tuple[float, float] = (math.nan, math.nan)
    regret_ci: tuple[float, float] = (math.nan, math.nan)
    all_stopped: int = 0  # sweeps where every seed was stopped (e.g. guards on a sweep where nothing learns)


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson's 95 % score interval for a proportion (Wilson, JASA 1927): centre (k + z**2/2) / (n + z**2),
    half-width z sqrt(k (n - k) / n + z**2 / 4) / (n + z**2); sound also at 0 % and 100 % and for small n."""
    if n == 0:
        return (math.nan, math.nan)
    centre = (successes + z * z / 2) / (n + z * z)
    half = z * math.sqrt(successes * (n - successes) / n + z * z / 4) / (n + z * z)
    return (max(0.0, centre - half), min(1.0, centre + half))


def bootstrap(per_sweep: list[tuple[float, float]], draws: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95 % percentile bootstrap interval over sweeps (Efron & Tibshirani 1993, ch. 13) of the ratio
    sum(a) / sum(b) of per-sweep pairs (a, b): compute saved is 1 - run steps / total steps."""
    rng = random.Random(seed)
    n = len(per_sweep)
    stats = []
    for _ in range(draws):
        sample = [per_sweep[rng.randrange(n)] for _ in range(n)]
        stats.append(sum(a for a, _ in sample) / sum(b for _, b in sample))
    stats.sort()
    return stats[int(0.025 * draws)], stats[int(0.975 * draws) - 1]


def score(method: Method, sweeps: list[Sweep]) -> Score:
    """Run a method on every sweep. A sweep where every seed was stopped counts as not retained, with regret
    best final - worst final. Intervals: bootstrap over sweeps for compute saved and regret, Wilson for
    retention."""
    retained = all_stopped = 0
    regrets, steps = [], []  # per sweep: regret; (steps saved, total steps)
    for sweep in sweeps:
        stopped = method(sweep)
        total = sum(len(curve) for curve in sweep.values())
        run = sum(stopped.get(run_id, len(curve)) for run_id, curve in sweep.items())
        steps.append((total - run, total))
        finals = {run_id: final_value(curve) for run_id, curve in sweep.items()}
        best = max(finals.values())
        survivors = [finals[run_id] for run_id in sweep if run_id not in stopped]
        best_survivor = max(survivors) if survivors else min(finals.values())
        retained += bool(survivors) and best - best_survivor <= NEAR_BEST
        all_stopped += not survivors
        regrets.append(best - best_survivor)
    return Score(compute_saved=sum(a for a, _ in steps) / sum(b for _, b in steps), retention=retained / len(sweeps),
                 mean_regret=sum(regrets) / len(regrets), n_sweeps=len(sweeps), saved_ci=bootstrap(steps),
                 retention_ci=wilson(retained, len(sweeps)), regret_ci=bootstrap([(r, 1.0) for r in regrets]),
                 all_stopped=all_stopped)


def print_table(title: str, scores: dict[str, Score], out: Callable[[str], None] = print) -> None:
    n = next(iter(scores.values())).n_sweeps
    out(f"\n== {title} ({n} sweeps; 95 % intervals over sweeps) ==")
    out(f"{'method':44s} {'saved':>7s} {'[95 % CI]':>15s} {'near-best':>10s} {'[95 % CI]':>15s} {'regret':>8s} "
          f"{'[95 % CI]':>17s} {'all stopped':>11s}")
    for name, s in scores.items():
        out(f"{name:44s} {s.compute_saved:7.1%} [{s.saved_ci[0]:5.1%}, {s.saved_ci[1]:5.1%}] {s.retention:10.1%} "
              f"[{s.retention_ci[0]:5.1%}, {s.retention_ci[1]:5.1%}] {s.mean_regret:8.4f} "
              f"[{s.regret_ci[0]:.4f}, {s.regret_ci[1]:.4f}] {s.all_stopped:11d}")


def dominating(scores: dict[str, Score], ours: str) -> list[str]:
    """Methods at least as good as ``ours`` on saved compute and retention, and strictly better on one."""
    mine = scores[ours]
    return [name for name, s in scores.items() if name.startswith("optuna") and s.compute_saved >= mine.compute_saved
            and s.retention >= mine.retention and (s.compute_saved > mine.compute_saved or s.retention > mine.retention)]


# --------------------------------------------------------------------------------------------------
# Tuning grid (synthetic tune split only)
# --------------------------------------------------------------------------------------------------

def tuning_grid(steps: int = 40) -> dict[str, dict]:
    """Candidate defaults, as fractions of a 40-step run (grace 10-30 %)."""
    grid = {}
    for weight in (0.6, 0.8, 0.9):
        for grace in (0.1, 0.15, 0.2, 0.25, 0.3):
            grace_steps = round(grace * steps)
            for min_delta in (0.0, 0.02, 0.05):
                grid[f"median w={weight} grace={grace} min_delta={min_delta}"] = {
                    "name": "median", "smoothing_weight": weight, "grace_steps": grace_steps, "min_delta": min_delta}
            for eta in (2, 3):
                grid[f"asha w={weight} grace={grace} eta={eta}"] = {
                    "name": "asha", "smoothing_weight": weight, "grace_steps": grace_steps, "eta": eta}
    return grid  # bayes has no knob to tune here: its drift table is learned by bench/calibrate_bayes.py


TRADE_OFF_RISK = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5)


def trade_off(sweeps: list[Sweep]) -> dict[str, Score]:
    """The bayes policy with its other defaults as ``risk`` varies: compute saved against near-best retention."""
    return {f"bayes risk={risk}": score(seedbed_method({"name": "bayes", "risk": risk}), sweeps)
            for risk in TRADE_OFF_RISK}


def pick(scores: dict[str, Score], prefix: str, min_saved: float = 0.5) -> str:
    """The tuning rule: highest retention among candidates saving >= ``min_saved``, then lowest regret."""
    eligible = [name for name, s in scores.items() if name.startswith(prefix) and s.compute_saved >= min_saved]
    return max(eligible, key=lambda name: (scores[name].retention, -scores[name].mean_regret), default="none")


def pick_keeping(scores: dict[str, Score], prefix: str, min_retention: float = 0.8) -> str:
    """The retention-first rule (bayes): the most compute saved among candidates that keep a near-best seed in at
    least ``min_retention`` of the sweeps, then the lowest regret."""
    eligible = [name for name, s in scores.items() if name.startswith(prefix) and s.retention >= min_retention]
    return max(eligible, key=lambda name: (scores[name].compute_saved, -scores[name].mean_regret), default="none")


def early_signal(sweeps: list[Sweep], out: Callable[[str], None], keep: int = 3) -> None:
    """How much a seed's early curve tells about its final, whatever the rule: per fraction f of the run, the
    median over sweeps (those whose seeds' finals differ, sd > 0.01) of the Spearman rank correlation between each
    seed's mean over the 10 % of steps before f and its final, and how often keeping the ``keep`` seeds best at f
    keeps a near-best one, against ``keep`` seeds kept at random (exact: the share of all such subsets). Stopping
    all but 3 of 8 seeds at 20-30 % is what saving 50 % takes; when the early ranks say nothing, no rule that reads
    the curves can keep the near-best seed much more often than chance."""
    live = [sweep for sweep in sweeps if sweep_stats(sweep)["spread"] > 0.01]
    if not live:
        return
    for fraction in (0.2, 0.3, 0.5):
        correlations, by_rank, by_chance = [], 0, 0.0
        for sweep in live:
            steps = max(len(curve) for curve in sweep.values())
            upto, width = math.ceil(fraction * steps), max(2, math.ceil(0.1 * steps))
            early = {run: statistics.fmean(v for _, v in curve[max(0, upto - width):upto]) for run, curve in sweep.items()}
            finals = {run: final_value(curve) for run, curve in sweep.items()}
            rho = spearman([early[r] for r in sweep], [finals[r] for r in sweep])
            if rho == rho:
                correlations.append(rho)
            best = max(finals.values())
            near = {run for run, value in finals.items() if value >= best - NEAR_BEST}
            by_rank += bool(near & set(sorted(sweep, key=lambda r: -early[r])[:keep]))
            others = len(sweep) - len(near)  # P(a random subset of `keep` misses every near-best seed)
            by_chance += 1.0 - (math.comb(others, keep) / math.comb(len(sweep), keep) if others >= keep else 0.0)
        out(f"  at {fraction:.0%} of the run ({len(live)} sweeps whose seeds' finals differ): median rank correlation "
            f"of the early mean with the final {statistics.median(correlations):+.2f}; keeping the {keep} best so far "
            f"keeps a near-best seed in {by_rank / len(live):.0%} of sweeps, {keep} kept at random in "
            f"{by_chance / len(live):.0%}")


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Spearman's rank correlation (ties ranked by position; nan when either side is constant)."""
    def ranks(values: Sequence[float]) -> list[int]:
        order = sorted(range(len(values)), key=lambda i: values[i])
        result = [0] * len(values)
        for rank, i in enumerate(order):
            result[i] = rank
        return result
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    var = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return cov / var if var and len(set(xs)) > 1 and len(set(ys)) > 1 else math.nan


def select(names: list[str], wanted: str) -> list[str]:
    """The names that contain one of the comma-separated, case-insensitive parts of ``wanted`` (all if empty);
    a comma inside parentheses belongs to its part, so a whole method name such as "optuna SH (r=grace, eta=2)"
    is one part."""
    parts = [part.strip().lower() for part in re.split(r",(?![^()]*\))", wanted) if part.strip()]
    return [name for name in names if not parts or any(part in name.lower() for part in parts)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", choices=("synthetic", "real", "real40", "all"), default="all",
                        help="synthetic test split, the recorded corpus (bench/curves/real), the first 40-step corpus "
                             "(bench/curves/real40), or synthetic + real (default)")
    parser.add_argument("--corpus", default="", help="folder of recorded sweeps to use as the real set")
    parser.add_argument("--metric", default="reward/mean", help="metric of the recorded curves to replay")
    parser.add_argument("--policies", default="",
                        help="only the methods whose name contains one of these comma-separated words (e.g. "
                             "'bayes,asha,optuna SH'); the risk trade-off runs when bayes is among them")
    parser.add_argument("--no-trade-off", action="store_true", help="skip the bayes risk trade-off tables")
    parser.add_argument("--sweeps", type=int, default=200, help="synthetic test sweeps (1-2000)")
    parser.add_argument("--tune", action="store_true", help="print the tuning grid on the synthetic tune split; with "
                        "--calibration or --budget: the corpora's tuning seeds instead of their test seeds")
    parser.add_argument("--budget", action="store_true", help="the budget table (bench/budget_table.py): 8 full runs, "
                        "4 slots, new seeds in freed slots or extended survivors, per policy and peer; --sweeps pools "
                        "(default 1000); exit 1 unless Seedbed's budget policy (bayes risk 0.20 extending survivors, "
                        "budget_table.GATED) has its mean gain's 95 %% interval above 0 on each corpus")
    parser.add_argument("--pools", default="synthetic,other",
                        help="with --budget: the corpora whose pools the budget table runs on (synthetic, other)")
    parser.add_argument("--save", action="store_true", help="also write bench/curves/early_stopping_<date>.txt")
    parser.add_argument("--calibration", action="store_true",
                        help="the bayes calibration: risk -> realized loss, saved, regret, the one-shot frontier, on "
                             "--sweeps synthetic test sweeps (default 1000) and the recorded corpus; exit 1 if a "
                             "synthetic gate fails")
    parser.add_argument("--quick", action="store_true", help="with --calibration: 300 synthetic sweeps, no corpus")
    parser.add_argument("--test", default="synthetic,other,recorded",
                        help="with --calibration: the corpora judged (comma-separated: synthetic, other, recorded)")
    parser.add_argument("--history", default="builtin,cross-fit",
                        help="with --calibration: the priors bayes uses (comma-separated: builtin, cross-fit: learned "
                             "from the corpus's other fold)")
    args = parser.parse_args(argv)
    if not 1 <= args.sweeps <= 2000:
        parser.error(f"--sweeps: must be between 1 and 2000, got {args.sweeps}")
    if args.corpus and not os.path.isdir(args.corpus):
        parser.error(f"--corpus: no such folder: {args.corpus}")
    lines: list[str] = []

    def out(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    started = time.perf_counter()
    out(f"bench/early_stopping.py {' '.join(argv if argv is not None else sys.argv[1:])} "
        f"({time.strftime('%Y-%m-%d %H:%M')}, load {os.getloadavg()[0]:.2f})")
    if args.calibration:
        import bayes_calibration
        import synthetic_sweeps as generator

        n = 300 if args.quick else (args.sweeps if "--sweeps" in (argv or sys.argv) else 1000)
        tests = [t for t in args.test.split(",") if t and not (args.quick and t == "recorded")]
        histories = [h for h in args.history.split(",") if h]
        for name, given, allowed in (("--test", tests, bayes_calibration.CORPORA),
                                     ("--history", histories, bayes_calibration.HISTORIES)):
            if not given or set(given) - set(allowed):
                parser.error(f"{name}: comma-separated names of {', '.join(allowed)}, got {','.join(given)!r}")
        out(f"synthetic corpus: bench/synthetic_sweeps.py, test generator seed {generator.TEST_SEED} (the built-in "
            f"drift table was learned on seed {generator.TUNE_SEED}), kinds {dict(zip(generator.KINDS, generator.RATES))}")
        held = bayes_calibration.run_corpora(tests, histories, n,
                                             lambda: real_sweeps(args.metric, args.corpus or REAL_CORPUS), out,
                                             tune=args.tune)
        out(f"\n{time.perf_counter() - started:.0f} s")
        if args.save:
            save_output(lines)
        return 0 if held else 1
    if args.budget:
        import budget_table

        if "--sweeps" not in (argv if argv is not None else sys.argv):
            args.sweeps = 1000  # the table's size (a few minutes); the gated mean's interval is +-0.002 there

        return budget_table.main(args, out, lines, ROOT)
    if args.tune:
        tune = synthetic_sweeps(seed=1, n_sweeps=200)
        scores = {name: score(seedbed_method(cfg), tune) for name, cfg in tuning_grid().items()}
        print_table("synthetic tune split, tuning grid", scores, out)
        for prefix in ("median", "asha"):
            out(f"  picked for {prefix}: {pick(scores, prefix)}")
        out(f"  picked for bayes (the most saved keeping a near-best seed in >= 80 %): {pick_keeping(scores, 'bayes')}")
    else:
        sets: list[tuple[str, list[Sweep], str]] = []
        if args.set in ("synthetic", "all"):
            sets.append(("synthetic (test split)", synthetic_sweeps(seed=2, n_sweeps=args.sweeps), ""))
        folders = {"real": args.corpus or REAL_CORPUS, "all": args.corpus or REAL_CORPUS, "real40": LEGACY_CORPUS}
        if args.set in folders:
            folder = folders[args.set]
            real = real_sweeps(args.metric, folder)
            if real:
                sets.append((f"real sweeps in {os.path.relpath(folder, ROOT)}, {args.metric}", real, folder))
            else:
                out(f"no recorded curves of {args.metric} in {folder}; run bench/record_curves.py first")
        all_methods = methods()
        chosen = select(list(all_methods), args.policies)
        if not chosen:
            parser.error(f"--policies: no method matches {args.policies!r}; methods: {', '.join(all_methods)}")
        for title, sweeps, folder in sets:
            out(f"\n== {title}: the set ==")
            describe_corpus(sweeps, out, folder)
            out(f"\n== {title}: what the early curves tell ==")
            early_signal(sweeps, out)
            scores = {name: score(all_methods[name], sweeps) for name in chosen}
            print_table(title, scores, out)
            for ours in ("seedbed median", "seedbed asha", "seedbed bayes (defaults)"):
                if ours in scores:
                    better = dominating(scores, ours)
                    out(f"  pruners better than {ours} on both saved compute and retention: "
                        f"{', '.join(better) or 'none'}")
            if not args.no_trade_off and any("bayes" in name for name in chosen):
                print_table(f"{title}: bayes trade-off as risk varies", trade_off(sweeps), out)
            # Sweeps where half the seeds or more end near-best (e.g. every seed collapsed alike) are kept by any
            # rule that stops fewer than half; the rest show whether a rule tells seeds apart.
            contested = [sweep for sweep in sweeps if sweep_stats(sweep)["near_best_share"] < 0.5]
            if folder and 0 < len(contested) < len(sweeps):
                print_table(f"{title}: only the sweeps where under half the seeds end near-best",
                            {name: score(all_methods[name], contested) for name in chosen}, out)
                if not args.no_trade_off and any("bayes" in name for name in chosen):
                    print_table(f"{title}, under half near-best: bayes trade-off as risk varies",
                                trade_off(contested), out)
    out(f"\n{time.perf_counter() - started:.0f} s")
    if args.save:
        save_output(lines)
    return 0


def save_output(lines: list[str]) -> None:
    """What the bench printed, kept as bench/curves/early_stopping_<date>.txt."""
    path = os.path.join(ROOT, "bench", "curves", f"early_stopping_{time.strftime('%Y-%m-%d')}.txt")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    print(f"saved {path}")


if __name__ == "__main__":
    sys.exit(main())
