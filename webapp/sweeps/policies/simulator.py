"""One simulator: curves in; decisions, compute and the kept seeds out (docs/architecture.md, "Early stopping").

A ``Simulator`` feeds a policy a sweep's points and asks it to ``decide`` after each batch of points that arrive
together; every path that asks a policy what it decides goes through it:

- the live check (``webapp.sweeps.policy_check``) feeds every stored point in step order across runs and decides
  after each step (``feed_by_step``): a replay from scratch at every check, nothing saved between checks;
- ``replay`` (the what-if replay ``webapp.sweeps.what_if``, the launch-time feasibility check ``feasibility`` and
  ``bench/early_stopping.py``) runs the curves under the sweep's slots: at each tick every running run logs its next
  point, then the policy decides; its result holds the decisions, the compute run and the runs kept;
- the sweep dashboard's forecasts (``forecast_paths.sweep_forecasts``, ``webapp.sweeps.forecasts``) feed a
  ``bayes`` policy the chart tier's curves, tell it the stored stops, the runs that ended and each run's horizon,
  and read its calibrated numbers as they stand (``bayes_numbers``): the forecast finals and P(near-best) shown
  are those the policy fed the same curves decides on.

With every run logging the same steps at once the two orders are the same, so the same curves give the same
decisions through the live check, the replay and the bench (tests/sweeps/test_one_simulator.py).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Hashable, Iterable, Optional, Sequence

from .bayes import BayesPolicy, SweepNumbers, policy_numbers
from .budget import BudgetUse
from .decision import EXTEND, Decision
from .parameters import BayesParams
from .policy import Policy

__all__ = ["Simulator", "feed_by_step", "bayes_numbers"]


class Simulator:
    """A policy fed points, deciding after each batch. ``stops``: run -> the step of a stop decided before this
    feed (a stored stop): what the run logs after it, while it winds down, is not evidence and is not fed."""

    def __init__(self, policy: Policy, stops: Optional[dict[Hashable, int]] = None):
        self.policy = policy
        self.stops = stops or {}
        self.decisions: list[Decision] = []
        self.budget: Optional[BudgetUse] = None

    def feed(self, run_id: Hashable, step: int, value: float, metric: Optional[str] = None) -> None:
        """One logged point of ``metric`` (default: the policy's own)."""
        stop = self.stops.get(run_id)
        if stop is None or step <= stop:
            self.policy.observe(run_id, step, value, metric)

    def decide(self, budget: Optional[BudgetUse] = None) -> list[Decision]:
        """The policy's new decisions now (also appended to ``decisions``); ``budget``: the sweep's budget use now
        (default: ``self.budget``, the live check's, read once per check), for a sweep whose freed slots start new
        seeds (``Policy.decide``)."""
        new = self.policy.decide(budget if budget is not None else self.budget)
        self.decisions += new
        return new


def feed_by_step(simulator: Simulator, points: Iterable[tuple[Hashable, int, float, Optional[str]]],
                 *, decide_from: int = 0) -> tuple[Optional[int], int]:
    """Feed ``points`` (run, step, value, metric), ordered by step then run, deciding once every point of a step
    >= ``decide_from`` is in, and once more at the end. Returns the last step fed (None for no point) and how many
    points were read."""
    current_step, count = None, 0
    for run_id, step, value, metric in points:
        if step != current_step and current_step is not None and current_step >= decide_from:
            simulator.decide()  # every run's point at current_step is in
        current_step = step
        count += 1
        simulator.feed(run_id, step, value, metric)
    simulator.decide()
    return current_step, count


def bayes_numbers(params: BayesParams, curves: dict[Hashable, Sequence[tuple[float, float]]], *,
                  horizons: Optional[dict[Hashable, int]] = None, ended: Iterable[Hashable] = (),
                  stops: Optional[dict[Hashable, Decision]] = None, window: Optional[int] = None,
                  last_steps: Optional[dict[Hashable, int]] = None, history=None) -> SweepNumbers:
    """A ``bayes`` policy's calibrated numbers (each run's worth draws, P(near-best)) after a ``Simulator`` fed it
    ``curves[run] = [(step, value), ...]`` (raw values in step order), as the live check feeds one: told each
    run's horizon ``horizons[run]`` (default ``max_steps``; another is an applied extension), the stored bayes
    ``stops`` (run -> its decision: ``tell_stop``; what it logged after is not fed) and the runs that ``ended``
    otherwise before their horizon (``mark_stopped``). Nothing is decided.

    ``window``: the points of a run's level when a point is a bucket mean (the final window's steps / the bucket
    width; default the params' final window); ``last_steps[run]``: the step a run stands at when its last point
    is a bucket's mean (default: its last point's step). The policy takes integer steps: a bucket's point is fed
    at its step rounded down, the last one at ``last_steps[run]``; only the order of the points and the last step
    (the fraction of the run done) reach the numbers. ``history``: the finished sweeps the policy learns its prior
    from (``make_policy``)."""
    if window is not None and window != params.final_window():  # (``BayesParams.for_width``'s rounding, given)
        params = dataclasses.replace(params, final_points=window)
    policy = BayesPolicy(params)
    policy._learn(history or [])  # (the project's finished sweeps, as the live check's make_policy learns them)
    for run_id, horizon in (horizons or {}).items():
        if horizon != params.max_steps:
            policy.extended[run_id] = Decision(run_id=run_id, action=EXTEND, reason="its horizon", rule=policy.rule,
                                               step=0, value=0.0, threshold=0.0,
                                               extra_steps=horizon - params.max_steps)
    stops = stops or {}
    for decision in stops.values():
        policy.tell_stop(decision)
    for run_id in ended:
        policy.mark_stopped(run_id)
    simulator = Simulator(policy, stops={run_id: decision.step for run_id, decision in stops.items()})
    for run_id, points in curves.items():
        last = (last_steps or {}).get(run_id)
        for k, (step, value) in enumerate(points):
            at_end = k == len(points) - 1
            fed = math.ceil(last if last is not None else step) if at_end else math.floor(step)
            simulator.feed(run_id, int(fed), float(value))
    return policy_numbers(policy)
