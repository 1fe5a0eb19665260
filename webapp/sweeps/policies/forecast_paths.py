"""Every run's forecast, as the ``bayes`` policy makes it, and its path to the horizon with a 95 % band: what the
sweep dashboard draws dashed after each curve and its runs table shows ("forecast worth (95 % interval)",
"P(near-best)"). One forecast: the calibrated one that decides. Pure Python on the policy's public functions; no
Django.

The numbers are the policy's own: a ``BayesPolicy`` fed the curves through the one simulator
(``simulator.bayes_numbers``: told the runs' horizons, its stored stops and the runs that ended, as the live check
tells it) gives each run's calibrated predictive distribution of its worth (``calibrated``: its level, noise and
fraction of the run, the drift table), the joint draws, P(near-best) per run. The forecast worth is the median of
the run's draws, its interval their 2.5 % and 97.5 % quantiles (``SweepNumbers.interval``), clipped to the metric's
range where it has one (``bounds``: ``metric_ranges``). Clipping is monotone, so the clipped
quantiles are exactly the quantiles of the clipped worth: the row shows the distribution of a worth that cannot
leave the range. P(near-best) is the policy's number, unclipped (what it decided on).

A run the policy stopped shows the numbers of its stop, frozen: the P(near-best), forecast and interval in its
decision's details (``probability``, ``forecast``, ``ci_low``, ``ci_high``), ``at_stop`` its step, whatever the
sweep's later points are. A run that ended otherwise before its horizon (killed by a user or a guard, failed) has
no forecast.

The drawn path (``forecast_path``) runs from the run's level (the mean of its last final-window points: where the
calibrated model stands it) at its last step to its horizon and ends exactly on the forecast worth, its band on
the interval; between, an interpolation, not a model of the curve's shape: the median moves linearly in the
fraction s of the steps left (s = (t - t0) / (T - t0)) and the band opens as sqrt(s), as a random walk's spread
grows (the drift the table learned is a walk of the level over the steps left).

Points may be bucket means (a long run read from the chart tier): ``final_points`` is the final window in points
(its steps / the bucket width); the calibrated numbers then read the buckets as points, a run's level the mean of
its last ``final_points`` (rounded) and its final's noise that of a mean of as many (exact when the width is 1).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Hashable, Optional, Sequence

from .metric_ranges import Range, clip

from .decision import Decision
from .parameters import BayesParams
from .simulator import bayes_numbers

__all__ = ["RunForecast", "WorthForecast", "sweep_forecasts", "path_steps", "forecast_path", "frozen_numbers"]

PATH_POINTS = 24  # points of a drawn forecast path (a smooth curve; the band's width changes slowly)
NO_BOUNDS: Range = (None, None)


@dataclass(frozen=True)
class WorthForecast:
    """A run's calibrated forecast worth: the median of its draws and their 95 % interval."""

    mean: float
    low: float
    high: float

    @property
    def ci(self) -> tuple[float, float]:
        return self.low, self.high

    def within(self, bounds: Range) -> "WorthForecast":
        """Each number clipped to ``bounds`` (the quantiles of the clipped worth)."""
        return WorthForecast(clip(self.mean, bounds), clip(self.low, bounds), clip(self.high, bounds))


@dataclass(frozen=True)
class RunForecast:
    """One run's forecast: ``final`` its calibrated forecast worth (None for a run out of the race: ended before
    its horizon, not by a bayes stop), ``probability`` P(near-best) (None out of the race or with fewer than
    ``min_peers`` peers), ``at_stop`` the step of the bayes stop whose numbers these are (None for a run in the
    race), and ``path``: (step, median, 95 % low, 95 % high) from its last step to its horizon (``forecast_path``;
    none without a forecast or at the horizon)."""

    final: Optional[WorthForecast]
    probability: Optional[float]
    path: list[tuple[float, float, float, float]]
    horizon: int
    last_step: float
    at_stop: Optional[int] = None


def path_steps(last_step: float, horizon: int, points: int = PATH_POINTS) -> list[float]:
    """``points`` steps evenly spaced from ``last_step`` to ``horizon``, both included (none when the run is at its
    horizon).

    >>> path_steps(10, 20, 3), path_steps(20, 20)
    ([10.0, 15.0, 20.0], [])
    """
    if last_step >= horizon:
        return []
    return [last_step + (horizon - last_step) * k / (points - 1) for k in range(points)]


def forecast_path(last_step: float, level: float, horizon: int, worth: WorthForecast, bounds: Range = NO_BOUNDS,
                  points: int = PATH_POINTS) -> list[tuple[float, float, float, float]]:
    """(step, median, low, high) at ``path_steps``: from ``level`` (band width 0) at ``last_step`` to exactly
    ``worth`` (its median, 2.5 % and 97.5 % quantiles) at ``horizon``, an interpolation. With s = (t - t0) /
    (T - t0):

        median(t) = (1 - s) * level + s * m,   low(t) = median(t) - sqrt(s) * (m - lo),
        high(t) = median(t) + sqrt(s) * (hi - m),

    each clipped to ``bounds``; the last point is ``worth`` itself.

    >>> path = forecast_path(0, 0.2, 4, WorthForecast(0.6, 0.4, 1.2), (0.0, 1.0), points=3)  # 1.2 clipped to 1
    >>> [tuple(round(x, 4) for x in point) for point in path]
    [(0.0, 0.2, 0.2, 0.2), (2.0, 0.4, 0.2586, 0.6828), (4.0, 0.6, 0.4, 1.0)]
    """
    steps = path_steps(last_step, horizon, points)
    if not steps:
        return []
    worth = worth.within(bounds)
    out = []
    for step in steps[:-1]:
        s = (step - last_step) / (horizon - last_step)
        mid = (1.0 - s) * level + s * worth.mean
        out.append((step, *(clip(x, bounds) for x in (mid, mid - math.sqrt(s) * (worth.mean - worth.low),
                                                      mid + math.sqrt(s) * (worth.high - worth.mean)))))
    out.append((float(horizon), worth.mean, worth.low, worth.high))
    return out


def frozen_numbers(decision: Decision, sign: float) -> Optional[tuple[WorthForecast, float, float]]:
    """A bayes stop's frozen (worth, P(near-best), level then, in the metric's sign) from its details; None for a
    stop of an older version that kept no forecast."""
    d = decision.details or {}
    if not all(k in d for k in ("forecast", "ci_low", "ci_high", "probability")):
        return None
    level = (d.get("prediction") or {}).get("level")
    mean = float(d["forecast"])
    return (WorthForecast(mean, float(d["ci_low"]), float(d["ci_high"])), float(d["probability"]),
            mean if level is None else sign * float(level))


def sweep_forecasts(curves: dict[Hashable, Sequence[tuple[float, float]]], *, params: BayesParams,
                    horizons: dict[Hashable, int], out_of_race: set, final_points: Optional[float] = None,
                    last_steps: Optional[dict[Hashable, int]] = None, path_points: int = PATH_POINTS,
                    stops: Optional[dict[Hashable, Decision]] = None,
                    bounds: Range = NO_BOUNDS, history=None) -> dict[Hashable, RunForecast]:
    """Each run's forecast (``RunForecast``) from its points ``curves[run] = [(step, value), ...]`` (raw values, in
    step order), at the run's horizon ``horizons[run]`` (default ``max_steps``), with ``params`` (a ``bayes``
    config). ``out_of_race``: runs that will have no final (stopped or failed before their horizon); of these, the
    ones in ``stops`` (run -> its stored bayes stop) show the numbers of their stop and stay the policy's peers at
    the prediction frozen there, as in the policy; the others have no forecast. ``final_points`` (default the
    params' final window) is the final window in points; ``last_steps[run]`` the step a run stands at when its last
    point is a bucket's mean (default: its last point's step); ``bounds`` the metric's range; ``history`` the
    project's finished sweeps the policy learns from. A run needs 2 points
    for the calibrated numbers; a run with none is left out.
    """
    final_points = final_points or params.final_window()
    sign = 1.0 if params.mode == "max" else -1.0
    stops = {run_id: d for run_id, d in (stops or {}).items() if curves.get(run_id)}
    horizon_of = {run_id: horizons.get(run_id, params.max_steps) for run_id, points in curves.items() if points}
    last_of = {run_id: (last_steps or {}).get(run_id, curves[run_id][-1][0]) for run_id in horizon_of}
    numbers = bayes_numbers(params, {run_id: curves[run_id] for run_id in horizon_of}, horizons=horizon_of,
                            ended=out_of_race & set(horizon_of), window=max(1, round(final_points)),
                            stops=stops, last_steps=last_steps, history=history)
    peers = len(numbers.order) - 1
    out = {}
    for run_id, horizon in horizon_of.items():
        final = probability = at_stop = None
        last, level = last_of[run_id], None
        frozen = frozen_numbers(stops[run_id], sign) if run_id in stops else None
        if frozen is not None:
            final, probability, level = frozen
            last = at_stop = int(stops[run_id].step)
        elif run_id in numbers.preds and run_id not in stops:
            final = WorthForecast(*numbers.interval(run_id, sign))
            probability = numbers.p[run_id] if peers >= params.min_peers else None
            level = sign * numbers.preds[run_id].level
        path = [] if final is None else forecast_path(last, level, horizon, final, bounds, path_points)
        out[run_id] = RunForecast(final=None if final is None else final.within(bounds), probability=probability,
                                  path=path, horizon=horizon, last_step=last, at_stop=at_stop)
    return out
