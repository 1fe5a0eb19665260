"""The curves a policy keeps: each run's smoothed curve point by point (``RunCurve``, with what a check saves of it
between checks) and ``SweepCurves``, what a rule reads of the whole sweep at a decision (docs/architecture.md,
"Early stopping"). Pure Python: no Django."""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterable, Optional

from .decision import Decision
from .parameters import CommonParams


class HistoryMissing(LookupError):
    """A curve restored from a saved state was asked for its value at a step it keeps nothing of (the database
    layer then feeds a fresh policy every stored point instead)."""


@dataclass(frozen=True)
class Checkpoint:
    """A curve as it stood at some step: its smoothed value there (at its last point at or before that step) and,
    when ``full``, its smoother's state, from which the points after that step can be smoothed again."""

    value: float
    smoother: Any = None
    full: bool = False

    def to_json(self) -> list:
        return [self.value, self.smoother] if self.full else [self.value]

    @classmethod
    def from_json(cls, saved: list) -> "Checkpoint":
        return cls(float(saved[0]), saved[1], True) if len(saved) > 1 else cls(float(saved[0]))


class RunCurve:
    """One run's smoothed curve, point by point, with look-up of the value "at step s".

    A curve built point by point keeps every point. One restored from a saved state (``from_state``) keeps only
    what a later judgment can read: its last point, its first step, its smoother, and a checkpoint at each step of
    ``kept`` it had passed; it records a checkpoint at each kept step it passes from then on. Asked for another
    earlier step it raises HistoryMissing, unless ``refill`` put that step's checkpoint back from the stored points.
    """

    def __init__(self, new_smoother: Callable[[], Any], kept: Iterable[int] = ()):
        self.new_smoother = new_smoother
        self.smoother = new_smoother()
        self.steps: list[int] = []  # every point since the curve was built (or restored: from its last point on)
        self.smoothed: list[float] = []
        self.first_step: Optional[int] = None
        self.checkpoints: dict[int, Checkpoint] = {}
        self._ahead = sorted(kept, reverse=True)  # kept steps not reached yet, the nearest last

    @property
    def last_step(self) -> int:
        return self.steps[-1] if self.steps else -1

    @property
    def last_value(self) -> float:
        return self.smoothed[-1]

    def add(self, step: int, value: float) -> bool:
        if step <= self.last_step:
            return False
        while self._ahead and self._ahead[-1] < step:
            self._checkpoint(self._ahead.pop())  # the curve as it stands is the curve at that step
        self.steps.append(step)
        self.smoothed.append(self.smoother.update(value))
        if self.first_step is None:
            self.first_step = step
        if self._ahead and self._ahead[-1] == step:
            self._checkpoint(self._ahead.pop())
        return True

    def _checkpoint(self, step: int) -> None:
        if self.steps:  # (before the first point value_at needs nothing kept: see there)
            self.checkpoints[step] = Checkpoint(self.smoothed[-1], self.smoother.state(), full=True)

    def value_at(self, step: int) -> Optional[float]:
        """Smoothed value at the last logged step <= ``step``; None when the run has not reached ``step``."""
        if self.last_step < step:
            return None
        if step < self.first_step:
            # Before the run's first point the look-up has always given the last value (bisect's index -1 on the
            # whole curve); kept as it is, so that what a policy decides does not depend on how the curve is held.
            return self.smoothed[-1]
        if step >= self.steps[0]:
            return self.smoothed[bisect_right(self.steps, step) - 1]
        if step in self.checkpoints:
            return self.checkpoints[step].value
        raise HistoryMissing(step)

    def knows(self, step: int) -> bool:
        """Whether ``value_at(step)`` answers without raising HistoryMissing."""
        return (self.last_step < step or step < self.first_step or step >= self.steps[0]
                or step in self.checkpoints)

    def refill_from(self, step: int) -> int:
        """The step after which the stored points must be read again to know the value at ``step``: the nearest
        earlier full checkpoint, or -1 (from the first point)."""
        return max((s for s, c in self.checkpoints.items() if c.full and s <= step), default=-1)

    def refill(self, step: int, values: list[float]) -> None:
        """Put back the checkpoint at ``step`` from ``values``: the run's points after ``refill_from(step)`` up to
        ``step``, in step order, as they were fed (the smoother goes over them again from that checkpoint)."""
        start = self.refill_from(step)
        smoother, value = self.new_smoother(), None
        if start >= 0:
            smoother.load(self.checkpoints[start].smoother)
            value = self.checkpoints[start].value
        for x in values:
            value = smoother.update(float(x))
        if value is None:
            raise HistoryMissing(step)
        self.checkpoints[step] = Checkpoint(value, smoother.state(), full=True)

    def to_state(self, kept: Iterable[int]) -> dict:
        """The curve as JSON: first step, last point, smoother, and a checkpoint at each of the ``kept`` steps
        between the two (value_at answers the others by itself); one the curve still holds the point for, but
        did not record, is kept by its value."""
        checkpoints = {}
        for step in kept:
            if not self.first_step <= step < self.last_step:
                continue
            if step in self.checkpoints:
                checkpoints[str(step)] = self.checkpoints[step].to_json()
            elif step >= self.steps[0]:
                checkpoints[str(step)] = Checkpoint(self.value_at(step)).to_json()
        return {"first": self.first_step, "last": [self.last_step, self.last_value],
                "smoother": self.smoother.state(), "checkpoints": checkpoints}

    @classmethod
    def from_state(cls, new_smoother: Callable[[], Any], saved: dict, kept: Iterable[int]) -> "RunCurve":
        """The curve ``to_state`` saved, going on from its last point."""
        curve = cls(new_smoother)
        step, value = saved["last"]
        curve.steps, curve.smoothed, curve.first_step = [int(step)], [float(value)], int(saved["first"])
        curve.smoother.load(saved["smoother"])
        curve.checkpoints = {int(s): Checkpoint.from_json(c) for s, c in saved["checkpoints"].items()}
        curve._ahead = sorted((s for s in kept if s > curve.last_step), reverse=True)
        return curve


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
    extensions, and the params. The helpers below are the comparisons every rule shares."""

    def __init__(self, params: CommonParams, curves: dict[Hashable, RunCurve],
                 stopped: dict[Hashable, Optional[Decision]], extended: dict[Hashable, Decision]):
        self.params, self.curves, self.stopped, self.extended = params, curves, stopped, extended

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
