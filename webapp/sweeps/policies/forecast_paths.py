"""Every run's forecast, as the ``bayes`` policy makes it, and its path to the horizon with a 95 % band: what the
sweep dashboard draws dashed after each curve and its runs table shows ("forecast final ± CI", "P(near-best)").
Pure Python on ``forecast``'s public functions; no Django.

The numbers are the policy's (``rules.BayesPolicy.forecasts`` and ``_find_stops``): per run a discounted
least-squares fit of each saturating shape to its raw points (``TrendStats``, ``shape_fits``), the shapes weighted
by how well they fit every run in the race together (``shape_weights``), mixed (``mix``, with the ``drift``
variance of the steps left), drawn toward the other runs' forecasts (``shrink``); P(near-best) =
``p_near_best`` against every other run in the race, for a run with at least ``min_peers`` of them.
tests/sweeps/test_forecasts.py checks them against the policy's own.

The path: at each step t between a run's last point and its horizon, the same shapes' fits evaluated at t
(``shape_fits(stats, t, final_points)``: the mean of ``final_points`` points around t) mixed with the drift of the
t - last steps after the last point, so that at the horizon it ends on the run's own trend forecast. The shrunk
forecast (the table's) is not a curve: it lies between that end and the peers' forecasts.

Points may be bucket means (a long run read from the chart tier): a bucket of w steps weighs as one point whose
noise is that of a mean of w, so ``final_points`` is given in points (the final window's steps / w) and the fit's
trend variance s2 / n stays that of the raw points (s2 / w over n / w points); exact when w = 1.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Optional, Sequence

from .forecast import Forecast, TrendStats, Z95, mix, p_near_best, shape_fits, shape_weights, shrink
from .parameters import BayesParams

__all__ = ["RunForecast", "sweep_forecasts", "path_steps"]

PATH_POINTS = 24  # points of a drawn forecast path (a smooth curve; the band's width changes slowly)


@dataclass(frozen=True)
class RunForecast:
    """One run's forecast: ``final`` the policy's forecast of its final (drawn toward its peers; None when the
    run is out of the race: stopped or failed before its horizon), ``trend`` its own trend's forecast, ``probability``
    P(final within tolerance of the best run's final) (None out of the race or with fewer than ``min_peers``
    peers), and ``path``: (step, mean, 95 % low, 95 % high) from its last point to its horizon."""

    final: Optional[Forecast]
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


def _drift_var(params: BayesParams, steps_left: float) -> float:
    """The policy's drift variance: drift**2 * (steps left) / max_steps (BayesParams.drift)."""
    return params.drift ** 2 * max(0.0, steps_left) / params.max_steps


def sweep_forecasts(curves: dict[Hashable, Sequence[tuple[float, float]]], *, params: BayesParams,
                    horizons: dict[Hashable, int], out_of_race: set, final_points: Optional[float] = None,
                    last_steps: Optional[dict[Hashable, int]] = None,
                    path_points: int = PATH_POINTS) -> dict[Hashable, RunForecast]:
    """Each run's forecast (``RunForecast``) from its points ``curves[run] = [(step, value), ...]`` (raw values, in
    step order), as ``params`` (a ``bayes`` config) forecasts them at the run's horizon ``horizons[run]`` (default
    ``max_steps``). ``out_of_race``: runs that will have no final (stopped or failed before their horizon): they get
    their own trend forecast and path but neither a final nor a probability, and do not count as peers.
    ``final_points`` (default the params' final window) is the final window in points; ``last_steps[run]`` the step
    a run stands at when its last point is a bucket's mean (default: its last point's step), where its path starts
    and from which the drift of the steps left counts. Runs whose points cannot fit a trend yet (fewer than 4) are
    left out.
    """
    final_points = final_points or params.final_window()
    sign = 1.0 if params.mode == "max" else -1.0  # P(near-best) for "min" is that of the negated values
    stats, fits, horizon_of, last_of = {}, {}, {}, {}
    for run_id, points in curves.items():
        if not points:
            continue
        trend = TrendStats(params.max_steps, params.half_life_steps())
        for step, value in points:
            trend.add(step, float(value))
        horizon = horizons.get(run_id, params.max_steps)
        f = shape_fits(trend, horizon, final_points)
        if f is not None:
            last = (last_steps or {}).get(run_id, points[-1][0])
            stats[run_id], fits[run_id], horizon_of[run_id], last_of[run_id] = trend, f, horizon, last
    if not fits:
        return {}
    in_race = [run_id for run_id in fits if run_id not in out_of_race]
    # the shapes are weighted by the runs in the race (the policy's forecasts); with none, by every run
    weighing = in_race or list(fits)
    n_shapes = len(next(iter(fits.values())))
    weights = shape_weights([sum(fits[r][k].log_likelihood for r in weighing if fits[r][k] is not None)
                             for k in range(n_shapes)])
    own = {run_id: mix(f, weights, _drift_var(params, horizon_of[run_id] - last_of[run_id]))
           for run_id, f in fits.items()}
    race = shrink({run_id: own[run_id] for run_id in in_race})
    out = {}
    for run_id in fits:
        mine = race.get(run_id)
        probability = None
        peers = [(sign * f.mean, f.sd) for peer_id, f in race.items() if peer_id != run_id]
        if mine is not None and len(peers) >= params.min_peers:
            probability = p_near_best(sign * mine.mean, mine.sd, peers, params.tolerance)
        path = []
        for step in path_steps(last_of[run_id], horizon_of[run_id], path_points):
            at = shape_fits(stats[run_id], step, final_points)
            if at is None:
                break
            f = mix(at, weights, _drift_var(params, step - last_of[run_id]))
            path.append((step, f.mean, f.mean - Z95 * f.sd, f.mean + Z95 * f.sd))
        out[run_id] = RunForecast(final=mine, trend=own[run_id], probability=probability, path=path,
                                  horizon=horizon_of[run_id], last_step=last_of[run_id])
    return out
