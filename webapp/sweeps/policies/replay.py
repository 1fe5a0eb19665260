"""Offline replay: recorded curves fed to a fresh policy (through the ``simulator``) as a live sweep would produce
them, under its slots."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Optional, Sequence

from .budget import BudgetUse, may_extend, may_start_seed
from .metric_ranges import Range
from .decision import EXTEND, STOP, Decision
from .policy import Policy
from .simulator import Simulator


@dataclass
class ReplayResult:
    """What a replayed sweep did: every decision, where each stopped run stopped, how many points each ran (the
    runs that started: with a budget, the pool's curves that never started are absent)."""

    decisions: list[Decision]
    stopped_at: dict[Hashable, int]
    steps_run: dict[Hashable, int]
    total_steps: int

    @property
    def compute_saved(self) -> float:
        """1 - (points run) / (points every started run would have run to its end)."""
        return 1.0 - sum(self.steps_run.values()) / self.total_steps if self.total_steps else 0.0

    @property
    def survivors(self) -> list[Hashable]:
        return [run_id for run_id in self.steps_run if run_id not in self.stopped_at]


def replay_policy(policy: Policy, curves: dict[Hashable, Sequence[tuple[int, float]]], parallel: bool = True,
                  concurrency: Optional[int] = None,
                  other_metrics: Optional[dict[str, dict[Hashable, Sequence[tuple[int, float]]]]] = None,
                  budget: Optional[float] = None, initial: Optional[int] = None,
                  beyond: Optional[dict[Hashable, Sequence[tuple[int, float]]]] = None,
                  bounds: Optional[Range] = None) -> ReplayResult:
    """Feed recorded curves to a fresh ``policy`` as a sweep would produce them, calling ``decide`` after each tick
    (``registry.replay``: of a policy config).

    At every tick each running run logs its next point (in parallel: all runs at once, step by step); a run
    stopped by a decision logs nothing more and its slot goes to the next run in ``curves`` order.
    ``concurrency`` limits how many runs run at once (default: all when ``parallel``, one otherwise).
    An extension (``extend_survivors_by``) is applied as the live scheduler applies it (no queued seed waits for
    the slot; with a ``budget``, what is left of it pays for the extra steps: ``policies.budget.may_extend``) and
    reveals that many more of the run's points from ``beyond`` (run -> its points past its curve's end, the same
    seed trained longer; without them an extension has no points to run). ``other_metrics`` (metric -> run
    -> points) feeds the policy's guards: with each point of the policy's metric, a run logs its points of the
    other metrics up to that step.

    ``budget`` (in full runs, a full run being the longest curve's points) makes the replay a sweep whose freed
    slots start new seeds (or, with extensions, extend survivors as far as it pays for: ``Policy.decide``): the
    first ``initial`` curves are its seeds, the rest a pool of new seeds started in order. A slot freed by a run that stopped or ended goes to a queued seed first, else to the pool's next curve
    if ``policies.budget.may_start_seed`` says it can run to its end (the live scheduler's rule: spent = points
    every started run ran, committed = the rest of the running and queued runs). ``bounds``: the metric's range for the runs' config (``metric_ranges``; default: the
    metric's without one), what the decisions' reasons write their forecasts within.
    """
    if bounds is not None:
        policy.bounds = bounds
    simulator = Simulator(policy)
    others = {metric: by_run for metric, by_run in (other_metrics or {}).items() if metric in policy.metrics()}
    other_at = {(metric, run_id): 0 for metric, by_run in others.items() for run_id in by_run}
    limit = concurrency or (len(curves) if parallel else 1)
    if limit < 1:
        raise ValueError(f"concurrency: must be at least 1; got {concurrency}")
    order = list(curves)
    n_initial = len(order) if budget is None else (initial if initial is not None else min(limit, len(order)))
    if not 1 <= n_initial <= len(order):
        raise ValueError(f"initial: must lie in [1, {len(order)}]; got {initial}")
    queued, pool = order[:n_initial], order[n_initial:]
    run_points = max((len(points) for points in curves.values()), default=0)
    extends = policy.params.extend_survivors_by > 0
    points_of = {run_id: [*points, *(beyond or {}).get(run_id, ())] for run_id, points in curves.items()}
    horizon = {run_id: len(points) for run_id, points in curves.items()}
    freed = False  # new seeds go only into a slot a run left (as the live scheduler's sweep_fill_slots)
    position: dict[Hashable, int] = {}
    running: list[Hashable] = []
    stopped_at: dict[Hashable, int] = {}
    while True:
        while queued and len(running) < limit:
            run_id = queued.pop(0)
            running.append(run_id)
            position[run_id] = 0
        while pool and freed and not extends and len(running) < limit and may_start_seed(
                budget_runs=budget, run_steps=run_points, spent=sum(position.values()),
                committed=sum(horizon[r] - position[r] for r in running) + sum(horizon[r] for r in queued)):
            run_id = pool.pop(0)
            running.append(run_id)
            position[run_id] = 0
        if not running:
            break
        for run_id in list(running):
            step, value = points_of[run_id][position[run_id]]
            simulator.feed(run_id, int(step), float(value), policy.params.metric or None)
            for metric, by_run in others.items():
                points, k = by_run.get(run_id, ()), other_at.get((metric, run_id), 0)
                while k < len(points) and points[k][0] <= step:
                    simulator.feed(run_id, int(points[k][0]), float(points[k][1]), metric)
                    k += 1
                other_at[(metric, run_id)] = k
            position[run_id] += 1
        use = None if budget is None else BudgetUse(budget, run_points, spent=sum(position.values()), committed=sum(
            horizon[r] - position[r] for r in running) + sum(horizon[r] for r in queued))
        for decision in simulator.decide(use):
            if decision.action == STOP:
                stopped_at[decision.run_id] = decision.step
                if decision.run_id in running:
                    running.remove(decision.run_id)
                    freed = True
                    use = use and BudgetUse(budget, run_points, use.spent, use.committed - (
                        horizon[decision.run_id] - position[decision.run_id]))
            elif decision.action == EXTEND:
                use = _extend(policy, decision, horizon, points_of, use, applies=decision.run_id in running
                              and not queued)
        ended = [run_id for run_id in running if position[run_id] >= horizon[run_id]]
        freed = freed or bool(ended)
        running = [run_id for run_id in running if run_id not in ended]
    return ReplayResult(decisions=simulator.decisions, stopped_at=stopped_at, steps_run=dict(position),
                        total_steps=sum(len(curves[run_id]) for run_id in position))


def _extend(policy, decision: Decision, horizon: dict, points_of: dict, use: Optional[BudgetUse], *,
            applies: bool) -> Optional[BudgetUse]:
    """Apply a proposed extension as the live scheduler does (``services._apply_extension``): when it ``applies``
    (the run still runs, no queued seed takes the slot) and the budget, if any, pays for its extra steps, the run's
    horizon grows by them (as far as its points go); otherwise it is skipped and the policy forgets it. Returns the
    budget use after it."""
    run_id, extra = decision.run_id, decision.extra_steps
    if applies and (use is None or may_extend(use, extra)):
        grown = min(extra, len(points_of[run_id]) - horizon[run_id])
        horizon[run_id] += grown
        return use and BudgetUse(use.budget_runs, use.run_steps, use.spent, use.committed + grown)
    policy.extended.pop(run_id, None)
    return use
