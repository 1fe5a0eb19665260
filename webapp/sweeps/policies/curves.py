"""The curves a policy keeps: each run's smoothed curve point by point (``RunCurve``) and ``SweepCurves``, what a
rule reads of the whole sweep at a decision (docs/architecture.md, "Early stopping"). Pure Python: no Django."""
from __future__ import annotations

from bisect import bisect_right
from typing import Any, Callable, Hashable, Optional

from .decision import Decision
from .metric_ranges import Range
from .parameters import CommonParams


class RunCurve:
    """One run's smoothed curve, point by point, with look-up of the value "at step s"."""

    def __init__(self, new_smoother: Callable[[], Any]):
        self.smoother = new_smoother()
        self.steps: list[int] = []
        self.smoothed: list[float] = []
        self.first_step: Optional[int] = None

    @property
    def last_step(self) -> int:
        return self.steps[-1] if self.steps else -1

    @property
    def last_value(self) -> float:
        return self.smoothed[-1]

    def add(self, step: int, value: float) -> bool:
        if step <= self.last_step:
            return False
        self.steps.append(step)
        self.smoothed.append(self.smoother.update(value))
        if self.first_step is None:
            self.first_step = step
        return True

    def value_at(self, step: int) -> Optional[float]:
        """Smoothed value at the last logged step <= ``step``; None when the run has not reached ``step``. Before
        the run's first point the look-up gives the last value (bisect's index -1 on the whole curve)."""
        if self.last_step < step:
            return None
        return self.smoothed[bisect_right(self.steps, step) - 1]


def too_few_peers(step: int, others: list[tuple[int, bool]], min_peers: int, what: str = "peers") -> Optional[str]:
    """"waiting for peers at step 40: 2 of 3" when fewer than ``min_peers`` of ``others`` (reached step, ended
    early) reached ``step``; else None.

    >>> too_few_peers(40, [(40, False), (55, True), (12, True)], 3)
    'waiting for peers at step 40: 2 of 3'
    >>> too_few_peers(40, [(40, False), (55, True), (41, False)], 3) is None
    True
    """
    n = sum(1 for reached, _ in others if reached >= step)
    return f"waiting for {what} at step {step}: {n} of {min_peers}" if n < min_peers else None


class SweepCurves:
    """What a rule reads at a decision: every run's smoothed curve (in the order the feed created them), the runs out
    of the race (``stopped``: run -> the policy's stop, or None for a run that ended otherwise), the applied
    extensions, the params and ``bounds``, the metric's range where known (``metric_ranges``: what a reason's
    forecasts are written within). The helpers below are the comparisons every rule shares."""

    def __init__(self, params: CommonParams, curves: dict[Hashable, RunCurve],
                 stopped: dict[Hashable, Optional[Decision]], extended: dict[Hashable, Decision],
                 bounds: Range = (None, None)):
        self.params, self.curves, self.stopped, self.extended = params, curves, stopped, extended
        self.bounds = bounds

    def horizon(self, run_id: Hashable) -> int:
        """The run's final step: ``max_steps``, plus the steps an applied extension granted."""
        extension = self.extended.get(run_id)
        return self.params.max_steps + (extension.extra_steps if extension else 0)

    def judgeable(self) -> list[tuple[Hashable, RunCurve]]:
        """Live runs past the grace period and before their final step (only these can be stopped)."""
        grace = self.params.grace()
        return [(run_id, curve) for run_id, curve in self.curves.items()
                if run_id not in self.stopped and curve.steps
                and grace <= curve.last_step < self.horizon(run_id)]

    def peer_count(self, run_id: Hashable, step: int) -> int:
        """How many other runs reached ``step`` (``len(peer_values(...))`` without reading their values)."""
        return sum(1 for other_id, other in self.curves.items() if other_id != run_id and other.last_step >= step)

    def peer_values(self, run_id: Hashable, step: int) -> list[float]:
        """Smoothed values at ``step`` of every other run that reached it (stopped ones included)."""
        values = []
        for other_id, other in self.curves.items():
            if other_id == run_id:
                continue
            value = other.value_at(step)
            if value is not None:
                values.append(value)
        return values

    def worse(self, value: float, reference: float, margin: float = 0.0) -> bool:
        """True when ``value`` is worse than ``reference`` by more than ``margin`` (per ``mode``)."""
        if self.params.mode == "max":
            return value < reference - margin
        return value > reference + margin

    def sort_key(self, value: float) -> float:
        """Sort key putting the best values first."""
        return -value if self.params.mode == "max" else value

    def format_value(self, value: float) -> str:
        return f"{self.params.metric} {value:.4g}"
