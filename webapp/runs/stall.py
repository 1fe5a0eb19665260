"""Stalled runs: a running run whose step has not advanced for far longer than its steps take
(docs/architecture.md#a-runs-life).

Heartbeats say that the worker slot supervising a run is alive, not that training moves: a hung collective, a
deadlock or a stopped (SIGSTOP) training process keep heartbeating. The step does not advance then, so the rule
reads two fields of the run, kept where its metrics are stored (``services.run_metrics_append``):

- ``Run.step_advanced_at``: when ``last_step`` last rose, or when the current attempt was claimed (a resumed run's
  clock starts again there, not at the step its previous attempt stored);
- ``Run.median_step_s``: the median of its recent ``step_time_s`` points (the loop's and TRL's own timing of a
  step), or, for an engine that does not time its steps, the mean over the run (seconds since its first step
  over steps: pauses count, so it errs late, never early).

A running run is **stalled** once ``now - step_advanced_at > max(floor, factor * median_step_s)``: the factor
(``SEEDBED_STALL_FACTOR``, default 10, 2 to 1,000) covers a step that is slow now and then (a checkpoint, an
evaluation, a longer batch); the floor (``SEEDBED_STALL_FLOOR_S``, default 120 s, 1 s to a day) covers a fast run's
flush cadence (the sink writes at most every second) and a step of a run too new to have a median. A run with no
timed step yet (loading its model, waiting for the built-in model's build) is never stalled. The flag clears as
soon as the step advances: it is computed on read from the two fields, never stored as a string.

>>> stall_threshold_s(0.3, factor=10, floor_s=120)
120.0
>>> stall_threshold_s(30.0, factor=10, floor_s=120)
300.0
"""
from __future__ import annotations

import os
import statistics
from datetime import datetime

FACTOR_BOUNDS = (2.0, 1000.0)
FLOOR_BOUNDS_S = (1.0, 86_400.0)
DEFAULT_FACTOR = 10.0
DEFAULT_FLOOR_S = 120.0
MEDIAN_WINDOW = 25  # recent step_time_s points the median is taken over (a run's pace drifts: lengths grow)


def bounded_setting(name: str, default: float, bounds: tuple[float, float], environ=os.environ) -> float:
    """The environment variable ``name`` as a number within ``bounds`` (``default`` when unset); anything else
    raises ValueError naming the variable (read once, when the settings load).

    >>> bounded_setting("SEEDBED_STALL_FACTOR", 10.0, (2.0, 1000.0), environ={"SEEDBED_STALL_FACTOR": "4"})
    4.0
    >>> bounded_setting("SEEDBED_STALL_FACTOR", 10.0, (2.0, 1000.0), environ={"SEEDBED_STALL_FACTOR": "1"})
    Traceback (most recent call last):
    ...
    ValueError: SEEDBED_STALL_FACTOR: 1 is out of bounds: a number from 2 to 1000
    """
    text = environ.get(name, "").strip()
    if not text:
        return float(default)
    low, high = bounds
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not low <= value <= high:  # (NaN fails both comparisons)
        raise ValueError(f"{name}: {text} is out of bounds: a number from {low:g} to {high:g}")
    return value


def stall_threshold_s(median_step_s: float, *, factor: float, floor_s: float) -> float:
    """Seconds without a step after which a run with this median step time is stalled: max(floor, factor x median)."""
    return max(float(floor_s), float(factor) * max(float(median_step_s), 0.0))


def stalled_for_s(*, status: str, step_advanced_at: datetime | None, median_step_s: float | None, now: datetime,
                  factor: float | None = None, floor_s: float | None = None) -> float | None:
    """Seconds since a stalled running run's step last advanced; None when it is not stalled (not running, no
    median yet, or within ``stall_threshold_s``). ``factor``/``floor_s``: the settings' by default."""
    if status != "running" or step_advanced_at is None or median_step_s is None:
        return None
    if factor is None or floor_s is None:
        from django.conf import settings

        factor = settings.SEEDBED_STALL_FACTOR if factor is None else factor
        floor_s = settings.SEEDBED_STALL_FLOOR_S if floor_s is None else floor_s
    idle = (now - step_advanced_at).total_seconds()
    return idle if idle > stall_threshold_s(median_step_s, factor=factor, floor_s=floor_s) else None


def median_step_s(step_times: list[float], *, seconds_since_first_step: float | None, last_step: int) -> float | None:
    """The run's median step time: the median of its recent ``step_time_s`` values when the engine reports them,
    else seconds since its first step over its steps (None before a first step).

    >>> median_step_s([0.2, 0.3, 9.0], seconds_since_first_step=None, last_step=3)
    0.3
    >>> median_step_s([], seconds_since_first_step=50.0, last_step=10)
    5.0
    """
    times = [t for t in step_times if t is not None and t >= 0]
    if times:
        return float(statistics.median(times))
    if seconds_since_first_step is None or last_step <= 0:
        return None
    return max(seconds_since_first_step, 0.0) / last_step


def describe(idle_s: float) -> str:
    """ "4 min 10 s" for a stall's age on the run page and in alerts.

    >>> describe(250.4), describe(12.0), describe(7300)
    ('4 min 10 s', '12 s', '2 h 1 min')
    """
    s = int(idle_s)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"
