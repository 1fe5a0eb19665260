"""Every run's forecast, as the ``bayes`` policy makes it, and its path to the horizon with a 95 % band: what the
sweep dashboard draws dashed after each curve and its runs table shows ("forecast final ± CI", "P(near-best)").
Pure Python on the policy's public functions; no Django.

The numbers of the table are the policy's own: a ``BayesPolicy`` fed the curves through the one simulator
(``simulator.bayes_numbers``: told the runs' horizons, its stored stops and the runs that ended, as the live check
tells it) gives each run's calibrated predictive distribution of its worth (``calibrated``: its level, noise and
fraction of the run, the drift table), the joint draws, P(near-best) per run; a run the policy stopped is there at
the prediction frozen in its decision (``stops``). The forecast final is the median of the run's draws, its
interval their 2.5 % and 97.5 % quantiles. tests/sweeps/test_forecast_paths.py checks them against the policy's.

The drawn path is the run's own trend (``forecast``: discounted least-squares fits of saturating shapes, weighted by
how well they fit every run in the race together, ``shape_weights``, ``mix``) evaluated from its last point to its
horizon: a picture of where its curve heads, whose band is the trend fit's; it need not end on the calibrated
forecast, which also knows how far curves still move late (collapses, cliffs, late blooms).

Points may be bucket means (a long run read from the chart tier): a bucket of w steps weighs as one point whose
noise is that of a mean of w, so ``final_points`` is given in points (the final window's steps / w); the
calibrated numbers then read the buckets as points, a run's level the mean of its last ``final_points`` (rounded)
and its final's noise that of a mean of as many (exact when w = 1).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Optional, Sequence

from .decision import Decision
from .forecast import Forecast, TrendStats, Z95, mix, shape_fits, shape_weights
from .parameters import BayesParams
from .simulator import bayes_numbers

__all__ = ["RunForecast", "WorthForecast", "sweep_forecasts", "path_steps"]

PATH_POINTS = 24  # points of a drawn forecast path (a smooth curve; the band's width changes slowly)


@dataclass(frozen=True)
class WorthForecast:
    """A run's calibrated forecast worth: the median of its draws and their 95 % interval."""

    mean: float
    low: float
    high: float

    @property
    def ci(self) -> tuple[float, float]:
        return self.low, self.high


@dataclass(frozen=True)
class RunForecast:
    """One run's forecast: ``final`` its calibrated forecast worth (None when the run is out of the race: killed or
    failed before its horizon), ``trend`` its own trend's forecast, ``probability`` P(near-best) (None out of the
    race or with fewer than ``min_peers`` peers), and ``path``: (step, mean, 95 % low, 95 % high) of its trend
    from its last point to its horizon."""

    final: Optional[WorthForecast]
    trend: Forecast
    probability: Optional[float]
    path: list[tuple[float, float, float, float]]
    horizon: int
    last_step: float


def path_steps(last_step: float, horizon: int, points: int = PATH_POINTS) -> list[float]:
    """``points`` steps evenly spaced from ``last_step`` to ``horizon``, both included (none when the run is at its
    horizon).

    >>> path_steps(10, 20, 3), path_steps(20, 20)
    ([10.0, 15.0, 20.0], [])
    """
    if last_step >= horizon:
        return []
    return [last_step + (horizon - last_step) * k / (points - 1) for k in range(points)]


def sweep_forecasts(curves: dict[Hashable, Sequence[tuple[float, float]]], *, params: BayesParams,
                    horizons: dict[Hashable, int], out_of_race: set, final_points: Optional[float] = None,
                    last_steps: Optional[dict[Hashable, int]] = None, path_points: int = PATH_POINTS,
                    stops: Optional[dict[Hashable, Decision]] = None) -> dict[Hashable, RunForecast]:
    """Each run's forecast (``RunForecast``) from its points ``curves[run] = [(step, value), ...]`` (raw values, in
    step order), at the run's horizon ``horizons[run]`` (default ``max_steps``), with ``params`` (a ``bayes``
    config). ``out_of_race``: runs that will have no final (stopped or failed before their horizon); of these, the
    ones in ``stops`` (run -> its stored bayes stop, whose details keep the prediction and levels it had) stay in
    the race at that prediction, as in the policy; the others get their trend path only. ``final_points``
    (default the params' final window) is the final window in points; ``last_steps[run]`` the step a run stands at
    when its last point is a bucket's mean (default: its last point's step). A run needs 2 points for the
    calibrated numbers and 4 for a trend; runs with fewer are left out.
    """
    final_points = final_points or params.final_window()
    sign = 1.0 if params.mode == "max" else -1.0
    stats, fits, horizon_of, last_of = {}, {}, {}, {}
    for run_id, points in curves.items():
        if not points:
            continue
        horizon = horizons.get(run_id, params.max_steps)
        last = (last_steps or {}).get(run_id, points[-1][0])
        horizon_of[run_id], last_of[run_id] = horizon, last
        trend = TrendStats(params.max_steps, params.half_life_steps())
        for step, value in points:
            trend.add(step, float(value))
        f = shape_fits(trend, horizon, final_points)
        if f is not None:
            stats[run_id], fits[run_id] = trend, f
    numbers = bayes_numbers(params, {run_id: curves[run_id] for run_id in horizon_of}, horizons=horizon_of,
                            ended=out_of_race & set(horizon_of), window=max(1, round(final_points)),
                            stops={run_id: d for run_id, d in (stops or {}).items() if run_id in horizon_of},
                            last_steps=last_steps)
    weights = None
    if fits:
        in_race = [run_id for run_id in fits if run_id in numbers.preds] or list(fits)
        n_shapes = len(next(iter(fits.values())))
        weights = shape_weights([sum(fits[r][k].log_likelihood for r in in_race if fits[r][k] is not None)
                                 for k in range(n_shapes)])
    out = {}
    peers = len(numbers.order) - 1
    for run_id in horizon_of:
        if run_id not in fits and run_id not in numbers.preds:
            continue
        final = probability = None
        if run_id in numbers.preds:
            final = WorthForecast(*numbers.interval(run_id, sign))
            probability = numbers.p[run_id] if peers >= params.min_peers else None
        path, trend = [], None
        if run_id in fits:
            trend = mix(fits[run_id], weights)
            for step in path_steps(last_of[run_id], horizon_of[run_id], path_points):
                at = shape_fits(stats[run_id], step, final_points)
                if at is None:
                    break
                f = mix(at, weights)
                path.append((step, f.mean, f.mean - Z95 * f.sd, f.mean + Z95 * f.sd))
        else:
            trend = Forecast(mean=final.mean, sd=0.0, noise_sd=0.0)
        out[run_id] = RunForecast(final=final, trend=trend, probability=probability, path=path,
                                  horizon=horizon_of[run_id], last_step=last_of[run_id])
    return out
