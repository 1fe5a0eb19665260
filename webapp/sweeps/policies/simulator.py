"""One simulator: curves in; decisions, compute and the kept seeds out (docs/architecture.md, "Early stopping").

A ``Simulator`` feeds a policy a sweep's points and asks it to ``decide`` after each batch of points that arrive
together; every path that asks a policy what it decides goes through it:

- the live check (``webapp.sweeps.policy_check``) feeds the stored points in step order across runs and decides
  after each step (``feed_by_step``), going on from the curves the last check saved (``saved_state``);
- ``replay`` (the what-if replay ``webapp.sweeps.replays``, the launch-time feasibility check ``feasibility`` and
  ``bench/early_stopping.py``) runs the curves under the sweep's slots: at each tick every running run logs its next
  point, then the policy decides; its result holds the decisions, the compute run and the runs kept.

With every run logging the same steps at once the two orders are the same, so the same curves give the same
decisions through the live check, the replay and the bench (tests/sweeps/test_one_simulator.py).
"""
from __future__ import annotations

from typing import Callable, Hashable, Iterable, Optional

from .budget import BudgetUse
from .decision import Decision
from .rules import Policy

__all__ = ["Simulator", "feed_by_step"]


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


def feed_by_step(simulator: Simulator, points: Iterable[tuple[Hashable, int, float, Optional[str]]], *,
                 decide_from: int, on_reaching: Callable[[], None] = lambda: None) -> tuple[Optional[int], int]:
    """Feed ``points`` (run, step, value, metric), ordered by step then run, deciding once every point of a step
    >= ``decide_from`` is in, and once more at the end. ``on_reaching`` is called once, when every point before
    ``decide_from`` is in (before the first point at or after it, or at the end). Returns the last step fed (None
    for no point) and how many points were read."""
    current_step, count, reached = None, 0, False
    for run_id, step, value, metric in points:
        if step != current_step and current_step is not None and current_step >= decide_from:
            simulator.decide()  # every run's point at current_step is in
        if not reached and step >= decide_from:
            on_reaching()
            reached = True
        current_step = step
        count += 1
        simulator.feed(run_id, step, value, metric)
    if not reached:
        on_reaching()
    simulator.decide()
    return current_step, count
