"""The dashboard's forecasts (policies.forecast_paths) are the bayes policy's own calibrated numbers (a policy fed
the curves through the one simulator, ``simulator.bayes_numbers``), and their drawn paths end on the run's trend forecast at its horizon with a band that
widens ahead."""
import math
import random

import pytest

from webapp.sweeps.policies import make_policy, parse_config, replay
from webapp.sweeps.policies.bayes import policy_numbers
from webapp.sweeps.policies.forecast_paths import path_steps, sweep_forecasts

CONFIG = {"name": "bayes", "metric": "m", "max_steps": 200, "min_peers": 2}


def noisy_curves(levels: dict, steps: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    return {run_id: [(t, level * (1 - 0.5 ** (t / 30)) + rng.gauss(0, 0.03)) for t in range(1, steps + 1)]
            for run_id, level in levels.items()}


def policy_fed(config: dict, curves: dict, ended: set = frozenset()):
    policy = make_policy(config)
    for run_id, points in curves.items():
        for step, value in points:
            policy.observe(run_id, step, value)
    for run_id in ended:
        policy.mark_stopped(run_id)
    return policy


@pytest.mark.parametrize("mode", ["max", "min"])
def test_forecasts_and_probabilities_are_the_policys_own(mode):
    config = {**CONFIG, "mode": mode}
    curves = noisy_curves({"a": 0.8, "b": 0.7, "c": 0.75, "d": 0.3}, 90)
    curves["e"] = noisy_curves({"e": 0.9}, 40, seed=1)["e"]  # killed at step 40: out of the race
    policy = policy_fed(config, curves, ended={"e"})
    numbers = policy_numbers(policy)
    assert set(numbers.p) == {"a", "b", "c", "d"}

    got = sweep_forecasts(curves, params=parse_config(config), horizons={}, out_of_race={"e"})
    sign = 1.0 if mode == "max" else -1.0
    for run_id, p in numbers.p.items():
        assert got[run_id].probability == p  # the same draws: exactly the same number
        assert (got[run_id].final.mean, *got[run_id].final.ci) == numbers.interval(run_id, sign)
    # the killed run: its own trend forecast and path, no final, no probability
    assert got["e"].final is None and got["e"].probability is None and len(got["e"].path) == 24
    # the same number as the decisions' (under the generator's prior, a seed this far below its peers at 45 % of
    # the run is a likely late bloomer: it need not be stopped yet)
    for d in policy.decide():
        assert d.details["probability"] == got[d.run_id].probability


def test_a_stopped_run_keeps_its_frozen_numbers_on_the_dashboard():
    curves = noisy_curves({"a": 0.8, "b": 0.78, "c": 0.76, "d": 0.3}, 200, seed=2)
    result = replay({**CONFIG, "grace_steps": 20}, curves)
    (stop,) = [d for d in result.decisions if d.run_id == "d"]
    seen = {r: pts[:result.steps_run[r]] for r, pts in curves.items()}
    got = sweep_forecasts({r: pts[:stop.step] if r == "d" else pts[:stop.step] for r, pts in seen.items()},
                          params=parse_config({**CONFIG, "grace_steps": 20}), horizons={}, out_of_race={"d"},
                          stops={"d": stop})
    assert got["d"].probability == stop.details["probability"]
    assert got["d"].final.mean == stop.details["forecast"]


def test_a_path_runs_from_the_last_point_to_the_horizon_and_ends_on_the_trend_forecast():
    curves = noisy_curves({"a": 0.8, "b": 0.6, "c": 0.7}, 60)
    got = sweep_forecasts(curves, params=parse_config(CONFIG), horizons={"b": 260}, out_of_race=set())
    a, b = got["a"], got["b"]
    assert a.path[0][0] == 60 and a.path[-1][0] == 200 and b.path[-1][0] == 260 and b.horizon == 260
    step, mean, low, high = a.path[-1]
    assert mean == pytest.approx(a.trend.mean) and high - mean == pytest.approx(1.959964 * a.trend.sd)
    assert low < mean < high
    widths = [hi - lo for _, _, lo, hi in a.path]
    assert widths[-1] > widths[0]  # the further ahead, the less is known


def test_bucket_means_forecast_like_the_raw_points():
    """A long run read from the chart tier: means of 8 steps fed as points, final window in points."""
    params = parse_config({**CONFIG, "max_steps": 2000})
    raw = noisy_curves({"a": 0.8, "b": 0.6, "c": 0.7}, 800)
    buckets = {r: [(sum(s for s, _ in pts[i:i + 8]) / 8, sum(v for _, v in pts[i:i + 8]) / 8)
                   for i in range(0, len(pts), 8)] for r, pts in raw.items()}
    exact = sweep_forecasts(raw, params=params, horizons={}, out_of_race=set())
    coarse = sweep_forecasts(buckets, params=params, horizons={}, out_of_race=set(),
                             final_points=params.final_window() / 8)
    for r in raw:
        assert coarse[r].final.mean == pytest.approx(exact[r].final.mean, abs=0.02)
        assert coarse[r].trend.mean == pytest.approx(exact[r].trend.mean, abs=0.01)


def test_too_few_points_give_no_forecast_and_a_finished_run_no_path():
    curves = {"short": [(1, 0.1)], "done": [(t, 0.5) for t in range(1, 201)]}
    got = sweep_forecasts(curves, params=parse_config(CONFIG), horizons={}, out_of_race=set())
    assert "short" not in got and got["done"].path == [] and math.isfinite(got["done"].final.mean)
    assert path_steps(5, 5) == [] and len(path_steps(0, 100)) == 24
