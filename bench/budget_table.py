"""The budget table: with a budget of 8 full runs and 4 slots, does early stopping plus new seeds in the freed
slots find a better seed than simply running 8 seeds to their end? (docs/architecture.md#a-sweeps-decisions;
webapp/sweeps/policies/budget.py.)

Every method sees the same sweep: a pool of seeds of one config from ``bench/synthetic_sweeps.py`` (the
generator that knows each seed's noise-free *worth*), started in the pool's order. 4 start at once; a slot freed
by a stop or an end goes to the pool's next seed when ``policies.budget.may_start_seed`` says it can finish
within the 8 runs (spent = points every started seed ran, committed = the rest of the running seeds): the live
scheduler's rule, for Seedbed's policies through the what-if replay (``policies.replay``) and for the peers
through ``run_peer`` below, which ticks the same way (each running seed logs one point, then the stopper speaks).

Seedbed's policies are told the budget at each tick (``Policy.decide(budget)``, as the live check is): a ranking
rule (median, asha, bayes) stops only when what it frees starts a new seed, and bayes only when a fresh seed
adds at least twice as much to the best worth per step as the seed's rest (``calibrated.worth_continuing`` with
``bayes.FRESH_SEED_MARGIN``).

- **best seed found**: among the seeds that ran to their end, the one with the best observed final (mean of its
  last 10 % of points, ``early_stopping.final_value``); scored by its noise-free worth.
- **manual**: the pool's first 8 seeds to their end (the same rule, nothing stopped): the baseline.
- **gain** = worth(best found) - worth(manual's best found), per sweep; the table gives its mean with a 95 %
  interval (mean +- 1.96 sd / sqrt(n)), the share of sweeps it loses (gain < 0), the seeds started and the
  budget used.
- **the must-hold** (mean gain > 0 with its 95 % interval above 0, on each corpus) is gated on one row,
  ``GATED`` (Seedbed's budget policy: bayes at risk 0.20, freed compute extending survivors); the others are
  reported (``gate``).

Peers, run in the same process on the same pools: Optuna 5.0's pruners (median, successive halving,
Hyperband; one trial per seed, ``should_prune`` after every report) and syne-tune 0.16's schedulers (ASHA,
Hyperband = asynchronous successive halving with 3 brackets, BOHB), driven through their scheduler API
(``on_trial_add`` / ``on_trial_result`` -> STOP / CONTINUE / ``on_trial_complete``) with one dummy
hyperparameter: seeds have no hyperparameters, so BOHB's density model has nothing to learn and picks like
Hyperband.

    .venv/bin/python bench/early_stopping.py --budget [--sweeps 200] [--save]
"""
from __future__ import annotations

import math
import time
from datetime import datetime
from typing import Callable, Hashable, Optional, Sequence

from webapp.sweeps.policies import replay
from webapp.sweeps.policies.budget import may_start_seed

BUDGET_RUNS = 8
SLOTS = 4
POOL = 40  # seeds per sweep in the pool: more than any method here starts at 8 runs (the table says if one ran out)

Curve = Sequence[tuple[int, float]]


def final_value(curve: Curve) -> float:
    """Mean of the last 10 % of the curve's points (at least one): the observed final a user picks a seed by."""
    tail = max(1, math.ceil(0.1 * len(curve)))
    return sum(value for _, value in curve[-tail:]) / tail


LONGER = 3
"""Each seed's curve runs on to LONGER x T (``SyntheticSweep.beyond``): what an extended survivor trains on."""


def pools(seed: int, n_sweeps: int, size: int = POOL, corpus: str = "synthetic") -> list:
    """``n_sweeps`` sweeps of ``size`` seeds each from ``bench/synthetic_sweeps.py`` (``corpus`` "synthetic") or
    ``bench/other_sweeps.py`` ("other"): the generator with its seeds per sweep raised to ``size`` (the same
    sweep-level and seed-level draws, more seeds of each sweep), each seed's curve continued to ``LONGER`` x T."""
    import other_sweeps
    import synthetic_sweeps as generator

    kept = generator.N_SEEDS, other_sweeps.SEED_COUNTS, generator.CONTINUE
    generator.N_SEEDS, other_sweeps.SEED_COUNTS, generator.CONTINUE = size, (size,), LONGER
    try:
        return (other_sweeps.other_sweeps if corpus == "other" else generator.synthetic_sweeps)(seed, n_sweeps)
    finally:
        generator.N_SEEDS, other_sweeps.SEED_COUNTS, generator.CONTINUE = kept


# --- the methods: (sweep) -> (steps run per started seed, stopped seeds) -------------------------------------------

def seedbed(config: dict, extend: float = 0.0) -> Callable:
    """A Seedbed policy replayed with the budget (the what-if replay: the live scheduler's rule). ``extend`` > 0:
    freed slots extend survivors (``free_slot_use: extend``, by ``extend`` x T steps each, within the budget) on
    the pool's first ``BUDGET_RUNS`` seeds, all queued at the start; else they start the pool's new seeds."""
    def run(sweep) -> tuple[dict[Hashable, int], set]:
        steps = max(len(curve) for curve in sweep.values())
        policy = {"metric": "reward/mean", "mode": "max", "max_steps": steps, **config}
        if extend:
            seeds = {run_id: sweep[run_id] for run_id in list(sweep)[:BUDGET_RUNS]}
            result = replay({**policy, "extend_survivors_by": max(1, round(extend * steps))}, seeds,
                            concurrency=SLOTS, budget=BUDGET_RUNS, initial=len(seeds), beyond=sweep.beyond)
        else:
            result = replay(policy, sweep, concurrency=SLOTS, budget=BUDGET_RUNS, initial=SLOTS)
        return result.steps_run, set(result.stopped_at)
    return run


def run_peer(sweep, make_stopper: Callable[[int], object]) -> tuple[dict[Hashable, int], set]:
    """The replay's loop for a peer's stopper: ``stopper.start(run)``, ``stopper.report(run, step, value)`` ->
    True to stop it now, ``stopper.end(run, step, value)``; new seeds by ``may_start_seed`` as in the replay."""
    steps = max(len(curve) for curve in sweep.values())
    stopper = make_stopper(steps)
    pool, running, position, stopped, freed = list(sweep), [], {}, set(), False
    while True:
        while pool and len(running) < SLOTS and (len(position) < SLOTS or freed and may_start_seed(
                budget_runs=BUDGET_RUNS, run_steps=steps, spent=sum(position.values()),
                committed=sum(len(sweep[r]) - position[r] for r in running))):
            run_id = pool.pop(0)
            running.append(run_id)
            position[run_id] = 0
            stopper.start(run_id)
        if not running:
            break
        for run_id in list(running):
            step, value = sweep[run_id][position[run_id]]
            position[run_id] += 1
            if position[run_id] >= len(sweep[run_id]):
                stopper.end(run_id, step, value)
                running.remove(run_id)
                freed = True
            elif stopper.report(run_id, step, value):
                stopped.add(run_id)
                running.remove(run_id)
                freed = True
    return position, stopped


class OptunaStopper:
    """One Optuna trial per seed, asked when the seed starts; ``should_prune`` after each report."""

    def __init__(self, pruner):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.ERROR)
        # a fixed name: Hyperband assigns trials to brackets by a hash of it
        self.study = optuna.create_study(direction="maximize", pruner=pruner, study_name="budget",
                                         sampler=optuna.samplers.RandomSampler(seed=0))
        self.trials = {}

    def start(self, run_id):
        self.trials[run_id] = self.study.ask()

    def report(self, run_id, step, value) -> bool:
        from optuna.trial import TrialState

        trial = self.trials[run_id]
        trial.report(value, step)
        if trial.should_prune():
            self.study.tell(trial, state=TrialState.PRUNED)
            return True
        return False

    def end(self, run_id, step, value):
        self.trials[run_id].report(value, step)
        self.study.tell(self.trials[run_id], value)


class SyneTuneStopper:
    """A syne-tune scheduler driven through its API: a suggestion per seed, ``on_trial_result`` per point."""

    def __init__(self, make: Callable[[dict], object]):
        import numpy as np
        from syne_tune.config_space import uniform

        np.random.seed(0)  # ASHA puts a trial in a bracket by numpy's global generator
        self.scheduler = make({"x": uniform(0.0, 1.0)})
        self.trials = {}

    def start(self, run_id):
        from syne_tune.backend.trial_status import Trial

        suggestion = self.scheduler.suggest()
        trial = Trial(trial_id=len(self.trials), config=suggestion.config, creation_time=datetime.now())
        self.trials[run_id] = trial
        self.scheduler.on_trial_add(trial)

    def report(self, run_id, step, value) -> bool:
        from syne_tune.optimizer.scheduler import SchedulerDecision

        decision = self.scheduler.on_trial_result(self.trials[run_id], {"reward": value, "step": step})
        return decision == SchedulerDecision.STOP

    def end(self, run_id, step, value):
        self.scheduler.on_trial_complete(self.trials[run_id], {"reward": value, "step": step})


def methods() -> dict[str, Callable]:
    """Seedbed's policies (manual = 8 seeds to their end, the baseline) and the peers, resources matched to ours
    where they take one (first rung / warm-up at 25 % of the steps)."""
    import optuna.pruners as P
    from syne_tune.optimizer.baselines import ASHA, BOHB

    def grace(steps: int) -> int:
        return math.ceil(0.25 * steps)

    def optuna(make_pruner):
        return lambda sweep: run_peer(sweep, lambda steps: OptunaStopper(make_pruner(steps)))

    def syne(make):
        return lambda sweep: run_peer(sweep, lambda steps: SyneTuneStopper(lambda space: make(space, steps)))

    common = dict(metric="reward", time_attr="step", do_minimize=False, random_seed=0)
    return {
        "seedbed manual (8 seeds to the end)": seedbed({"name": "manual"}),
        "seedbed median": seedbed({"name": "median"}),
        "seedbed asha": seedbed({"name": "asha"}),
        "seedbed bayes (risk 0.05)": seedbed({"name": "bayes", "risk": 0.05}),
        "seedbed bayes (risk 0.20)": seedbed({"name": "bayes", "risk": 0.2}),
        "seedbed patience (patience=10)": seedbed({"name": "threshold", "patience": 10}),
        "seedbed median, extend 0.5 T": seedbed({"name": "median"}, extend=0.5),
        "seedbed asha, extend 0.5 T": seedbed({"name": "asha"}, extend=0.5),
        "seedbed bayes (risk 0.20), extend 0.5 T": seedbed({"name": "bayes", "risk": 0.2}, extend=0.5),
        "seedbed bayes (risk 0.20), extend 1 T": seedbed({"name": "bayes", "risk": 0.2}, extend=1.0),
        "optuna median (warmup=grace)": optuna(
            lambda steps: P.MedianPruner(n_startup_trials=1, n_warmup_steps=grace(steps))),
        "optuna SH (r=grace, eta=2)": optuna(
            lambda steps: P.SuccessiveHalvingPruner(min_resource=grace(steps), reduction_factor=2)),
        "optuna hyperband (max=T)": optuna(lambda steps: P.HyperbandPruner(max_resource=steps)),
        "syne-tune ASHA (r=grace, eta=3)": syne(
            lambda space, steps: ASHA(space, max_t=steps, grace_period=grace(steps), **common)),
        "syne-tune hyperband (3 brackets)": syne(
            lambda space, steps: ASHA(space, max_t=steps, grace_period=grace(steps), brackets=3, **common)),
        "syne-tune BOHB": syne(lambda space, steps: BOHB(space, max_t=steps, grace_period=grace(steps), **common)),
    }


# --- scoring ----------------------------------------------------------------------------------------------------

def best_found(sweep, steps_run: dict, stopped: set) -> float:
    """The noise-free worth of the seed a user would pick: the best observed final among the seeds that ran to
    their end, an extended one to its extended end (none did: among those that ran longest), at the steps it
    ran (``SyntheticSweep.worth_at``)."""
    done = [r for r, n in steps_run.items() if r not in stopped and n >= len(sweep[r])]
    if not done:
        longest = max(steps_run.values())
        done = [r for r, n in steps_run.items() if n == longest]

    def observed(r):
        return final_value([*sweep[r], *sweep.beyond.get(r, ())][:steps_run[r]])
    best = max(done, key=observed)
    return sweep.worth_at(best, steps_run[best])


GATED = "seedbed bayes (risk 0.20), extend 0.5 T"
"""The one row the must-hold gates: Seedbed's budget policy, ``bayes`` at risk 0.20 with freed compute extending
the best survivors by half a run each within the budget (``free_slot_use: extend``, ``extend_steps`` T / 2,
``budget`` 8), the setting the README recommends with a budget. Its must-hold is the lower end of the mean gain's
95 % interval above 0, on each corpus: the best seed found is better than 8 seeds run to their end, with
confidence. The other rows (new seeds in freed slots, other policies and settings, the peers) are reported
beside it, not gated."""


def gate(summary: dict, out: Callable[[str], None]) -> bool:
    """Print the must-hold's verdict on the ``GATED`` row (its mean gain and 95 % interval) and the other Seedbed
    rows, reported; True when its interval lies above 0 (a table without that row holds nothing: False)."""
    if GATED not in summary:
        out(f"  must hold: the gated row ({GATED}) was not run")
        return False
    mean, low, high = summary[GATED]
    out(f"  must hold (gated), mean gain > 0 with its 95 % interval above 0 for {GATED}: {mean:+.4f} "
        f"[95 % {low:+.4f}, {high:+.4f}]: {'holds' if low > 0 else 'FAILS'}")
    others = [f"{n[len('seedbed '):]} {v[0]:+.4f}" for n, v in summary.items()
              if n.startswith("seedbed") and n != GATED and "manual" not in n]
    out(f"  reported, not gated: {', '.join(others) or 'none'} (and the peers above)")
    return low > 0


def mean_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """Mean and its 95 % interval, mean +- 1.96 s / sqrt(n) (normal approximation; n >= 100 here)."""
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    half = 1.96 * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def budget_table(sweeps: list, out: Callable[[str], None] = print, only: Optional[list[str]] = None) -> dict:
    """Print the table; returns name -> (mean gain, low, high)."""
    all_methods = methods()
    names = [name for name in all_methods if not only or name in only or name.startswith("seedbed manual")]
    baseline_name = names[0]
    results = {}
    for name in names:
        started = time.perf_counter()
        results[name] = [(best_found(sweep, *ran), ran) for sweep, ran in
                         ((sweep, all_methods[name](sweep)) for sweep in sweeps)]
        results[name + " s"] = time.perf_counter() - started
    base = [worth for worth, _ in results[baseline_name]]
    out(f"\n== budget table: {BUDGET_RUNS} full runs, {SLOTS} slots, pools of {POOL} seeds, {len(sweeps)} "
        f"sweeps; gain = noise-free worth of the best seed found - that of {BUDGET_RUNS} seeds to their end ==")
    out(f"{'method':38s} {'mean gain':>10s} {'95 % interval':>20s} {'gain<0':>7s} {'seeds':>6s} {'used':>6s} "
        f"{'pool out':>8s} {'s':>5s}")
    summary = {}
    for name in names:
        gains = [worth - b for (worth, _), b in zip(results[name], base)]
        mean, low, high = mean_interval(gains)
        seeds = sum(len(ran[0]) for _, ran in results[name]) / len(sweeps)
        used = sum(sum(ran[0].values()) / max(len(c) for c in sweep.values())
                   for (_, ran), sweep in zip(results[name], sweeps)) / len(sweeps)
        out_of_pool = sum(len(ran[0]) == len(sweep) for (_, ran), sweep in zip(results[name], sweeps))
        loses = sum(g < -1e-12 for g in gains) / len(gains)
        out(f"{name:38s} {mean:+10.4f} [{low:+.4f}, {high:+.4f}] {loses:7.1%} {seeds:6.1f} {used:6.2f} "
            f"{out_of_pool:8d} {results[name + ' s']:5.0f}")
        summary[name] = (mean, low, high)
    ours = {n: v for n, v in summary.items() if n.startswith("seedbed") and "manual" not in n}
    peers = {n: v for n, v in summary.items() if not n.startswith("seedbed")}
    if ours and peers:
        best_ours = max(ours, key=lambda n: ours[n][0])
        better = [f"{n} ({v[0] - ours[best_ours][0]:+.4f})" for n, v in peers.items() if v[0] > ours[best_ours][0]]
        out(f"  best of Seedbed's: {best_ours}; peers with a higher mean gain: {', '.join(better) or 'none'}")
    return summary


def main(args, out: Callable[[str], None], lines: list[str], root: str) -> int:
    """``bench/early_stopping.py --budget``: the table on ``--sweeps`` test sweeps (default 1,000 here) of each
    corpus in ``--pools`` (synthetic: bench/synthetic_sweeps.py's test seed; other: bench/other_sweeps.py's; with
    ``--tune`` their tune seeds, 1 and 11, and the gated row only),
    saved to bench/curves/budget_<date>.txt with ``--save``. Exit 1 unless the gated row's mean gain has its 95 %
    interval above 0 on each (``GATED``: Seedbed's budget policy; the others are reported)."""
    import logging
    import os

    import other_sweeps
    import synthetic_sweeps as generator

    logging.getLogger("syne_tune").setLevel(logging.ERROR)
    n, holds = args.sweeps, True
    tune = getattr(args, "tune", False)  # --tune: the tune pools, the gated row only (a check, not the table)
    for corpus in [c.strip() for c in args.pools.split(",") if c.strip()]:
        module = other_sweeps if corpus == "other" else generator
        seed = (other_sweeps.HISTORY_SEED if corpus == "other" else generator.TUNE_SEED) if tune else module.TEST_SEED
        out(f"\n{corpus} pools: bench/{module.__name__}.py, {'tune' if tune else 'test'} generator seed {seed}, "
            f"{POOL} seeds a sweep, each curve continued to {LONGER} T, kinds {dict(zip(module.KINDS, module.RATES))}")
        summary = budget_table(pools(seed, n, corpus=corpus), out, only=[GATED] if tune else None)
        holds = gate(summary, out) and holds
    if args.save:
        path = os.path.join(root, "bench", "curves", f"budget_{time.strftime('%Y-%m-%d')}.txt")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
        print(f"saved {path}")
    return 0 if holds else 1
