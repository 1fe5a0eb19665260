"""A sweep's compute budget, in full runs: how much of it is spent, how much the runs already under way will
still use, and whether a freed slot may start a new seed. Pure (no Django): the live scheduler
(``webapp.sweeps.services``) and the what-if replay (``policies.replay``, which ``bench/budget_table.py`` drives)
both ask ``may_start_seed``, so the replay shows what the scheduler would do (docs/architecture.md#a-sweeps-decisions).

Units: steps. One *run* is ``run_steps`` steps (the sweep's ``total_steps``); a budget of B runs is
``B * run_steps`` steps.

- **used** by one run: the steps it has run, and at least ``MIN_STEPS_USED`` once it started (``steps_used``): a
  run that fails before its first step still took a slot and loaded a model, so it is never free, and a sweep
  whose seeds all fail at step 0 cannot start seeds without end on a budget of steps.
- **spent**: the steps every run of the sweep has used so far (stopped, failed and finished runs included).
- **committed**: the steps the runs still under way will run if nothing stops them: for each running or queued
  run not being stopped, ``max(total_steps - used, 0)`` (an extended survivor counts its extended total).
- **left** = budget - spent - committed.

A new seed starts only when it can finish within the budget: ``left >= run_steps`` (it commits a full run).
So the budget is never overrun by a run the scheduler started, whatever the policy stops later: a stop only
moves the stopped run's uncommitted rest back into ``left``.

How the peers count a budget, for comparison: Optuna's ``study.optimize(n_trials=...)`` and syne-tune's
``StoppingCriterion(max_num_trials_started=...)`` count trials started (a pruned trial costs a whole one), and
syne-tune's ``max_cost``/``max_wallclock_time`` stop the tuner once the resource is used, leaving trials cut
off mid-run. Counting steps committed instead lets freed compute start new seeds while promising that every
started seed can run to its end.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

EPS = 1e-9
MAX_BUDGET_RUNS = 4096  # a sweep's runs are at most 256 (services.MAX_RUNS) plus fresh seeds: a bound, not a target
MIN_STEPS_USED = 1  # what a started run costs at least, whatever step it reached


def steps_used(steps_run: int, *, started: bool) -> int:
    """What one run has used of the budget: ``max(steps_run, MIN_STEPS_USED)`` once it started, else
    ``max(steps_run, 0)`` (a seed killed in the queue cost nothing).

    >>> steps_used(0, started=True), steps_used(0, started=False), steps_used(7, started=True)
    (1, 0, 7)
    """
    return max(steps_run, MIN_STEPS_USED if started else 0)


@dataclass(frozen=True)
class BudgetUse:
    """A sweep's budget and what its runs have used of it, all in steps."""

    budget_runs: float
    """The budget in full runs (the sweep's ``budget``)."""
    run_steps: int
    """Steps of one full run (the sweep's ``total_steps``)."""
    spent: int
    """Steps used by every run so far (``steps_used``: at least one per started run)."""
    committed: int
    """Steps the running and queued runs will still run to their ends."""

    @property
    def left(self) -> int:
        """``budget_runs * run_steps - spent - committed`` (negative when old rows overran it)."""
        return round(self.budget_runs * self.run_steps) - self.spent - self.committed

    def runs(self, steps: int) -> float:
        """``steps / run_steps``: steps as a number of full runs."""
        return steps / self.run_steps if self.run_steps else 0.0

    @property
    def may_start_seed(self) -> bool:
        return may_start_seed(budget_runs=self.budget_runs, run_steps=self.run_steps, spent=self.spent,
                              committed=self.committed)

    def summary(self) -> str:
        """What the sweep page shows, e.g. ``budget 8 runs: 5.3 spent, 2.0 committed, 0.7 left``.

        >>> BudgetUse(8, 100, 530, 200).summary()
        'budget 8 runs: 5.3 spent, 2.0 committed, 0.7 left'
        """
        return (f"budget {self.budget_runs:g} runs: {self.runs(self.spent):.1f} spent, "
                f"{self.runs(self.committed):.1f} committed, {self.runs(self.left):.1f} left")


def committed_steps(runs: Iterable[tuple[int, int]]) -> int:
    """``sum(max(total - used, 0))`` over ``(steps used, total steps)`` of the runs still under way.

    >>> committed_steps([(40, 100), (0, 100), (120, 100)])
    160
    """
    return sum(max(total - done, 0) for done, total in runs)


def may_start_seed(*, budget_runs: float, run_steps: int, spent: int, committed: int) -> bool:
    """May a freed slot start a new seed now? Only if one more full run fits in what is left:
    ``spent + committed + run_steps <= budget_runs * run_steps``. Shared by the live scheduler and the replay.

    >>> may_start_seed(budget_runs=3, run_steps=10, spent=14, committed=6)   # 3 runs = 30 >= 14 + 6 + 10
    True
    >>> may_start_seed(budget_runs=3, run_steps=10, spent=15, committed=6)
    False
    """
    if run_steps <= 0 or budget_runs <= 0:
        return False
    return spent + committed + run_steps <= budget_runs * run_steps + EPS


def may_extend(use: BudgetUse, extra_steps: int) -> bool:
    """May a freed slot extend a survivor by ``extra_steps`` now? Only if what is left of the budget pays for
    them: ``left >= extra_steps`` (a stop has already moved the stopped run's rest into ``left``). Shared by the
    live scheduler and the replay.

    >>> may_extend(BudgetUse(8, 100, 500, 250), 50), may_extend(BudgetUse(8, 100, 500, 250), 51)
    (True, False)
    """
    return use.left >= extra_steps


def stops_fund_a_seed(use: BudgetUse, freed: int) -> bool:
    """With a budget, is a set of stops worth making? Only if the compute it frees starts a new seed: stopping runs
    whose rest would then go unused loses their chance of ending best and buys nothing, so a policy makes its
    ranking stops only when ``left + freed >= run_steps`` (``freed``: the steps the stopped runs had left to their
    ends; ``left`` already counts them as committed). Guards' stops (a broken run) are made whatever the budget.

    >>> stops_fund_a_seed(BudgetUse(8, 100, 500, 250), freed=60)   # left 50 + 60 freed: a new seed fits
    True
    >>> stops_fund_a_seed(BudgetUse(8, 100, 500, 250), freed=40)   # 90 < 100: the 40 steps would go unused
    False
    """
    return use.left + freed >= use.run_steps


def held_note(use: BudgetUse, freed: int) -> str:
    """Why a ranking stop was not made (``stops_fund_a_seed`` said no), for the kept run's row on the dashboard:
    ``freed`` the steps the withheld stops would have freed.

    >>> held_note(BudgetUse(8, 100, 500, 260), freed=30)
    'no new seed could use its steps: budget 8 runs: 5.0 spent, 2.6 committed; the 0.3 runs it frees and the 0.4 left are less than the 1 run a new seed needs'
    """
    return (f"no new seed could use its steps: budget {use.budget_runs:g} runs: {use.runs(use.spent):.1f} spent, "
            f"{use.runs(use.committed):.1f} committed; the {use.runs(freed):.1f} runs it frees and the "
            f"{use.runs(max(use.left, 0)):.1f} left are less than the 1 run a new seed needs")


def budget_error(budget_runs, *, initial_runs: int, new_seeds: bool, extends: bool = False) -> str:
    """Why ``budget_runs`` is not a valid budget ("" when it is), for a sweep of ``initial_runs`` runs whose
    freed slots start new seeds (``new_seeds``: then a budget is needed) or extend survivors (``extends``: then
    it is optional and bounds the extensions, ``may_extend``). A budget is only read in those two cases, and
    must pay for the sweep's own runs: ``initial_runs <= budget <= MAX_BUDGET_RUNS`` (a budget equal to the
    initial runs starts a new seed only once stops have freed a full run's worth).

    >>> budget_error(8, initial_runs=4, new_seeds=True)
    ''
    >>> budget_error(3, initial_runs=4, new_seeds=True)
    'must be at least the 4 runs the sweep starts with (seeds x grid points); got 3'
    """
    if budget_runs is None:
        return "give the budget in full runs (at least the runs the sweep starts with) when freed slots start " \
               "new seeds" if new_seeds else ""
    if not (new_seeds or extends):
        return "a budget is only used when freed slots start new seeds or extend survivors (free_slot_use: " \
               "new_seed or extend)"
    if budget_runs != budget_runs or not initial_runs <= budget_runs <= MAX_BUDGET_RUNS:
        if budget_runs == budget_runs and budget_runs < initial_runs:
            return (f"must be at least the {initial_runs} runs the sweep starts with (seeds x grid points); "
                    f"got {budget_runs:g}")
        return f"must lie in [{initial_runs}, {MAX_BUDGET_RUNS}] runs; got {budget_runs}"
    return ""
