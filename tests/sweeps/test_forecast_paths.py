"""The dashboard's forecasts (policies.forecast_paths) are the bayes policy's own calibrated numbers (a policy fed
the curves through the one simulator, ``simulator.bayes_numbers``): one forecast, the one that decides. Each drawn
path ends on the run's forecast worth and its band on the interval the row shows, within the metric's range; a
stopped run's numbers are those of its stop, whatever comes after."""
import math
import random

import pytest

from webapp.sweeps.policies import make_policy, parse_config, replay
from webapp.sweeps.policies.bayes import policy_numbers
from webapp.sweeps.policies.forecast_paths import path_steps, sweep_forecasts
from webapp.sweeps.policies.metric_ranges import metric_range

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
    # the killed run: out of the race, no forecast at all (no other forecast is drawn for it)
    assert got["e"].final is None and got["e"].probability is None and got["e"].path == []
    # the same number as the decisions' (under the generator's prior, a seed this far below its peers at 45 % of
    # the run is a likely late bloomer: it need not be stopped yet)
    for d in policy.decide():
        assert d.details["probability"] == got[d.run_id].probability


def test_a_stopped_run_keeps_the_numbers_of_its_stop_as_later_points_arrive():
    config = {**CONFIG, "grace_steps": 20}
    curves = noisy_curves({"a": 0.8, "b": 0.78, "c": 0.76, "d": 0.3}, 200, seed=2)
    result = replay(config, curves)
    (stop,) = [d for d in result.decisions if d.run_id == "d"]
    params = parse_config(config)
    seen = []
    for now in (stop.step, stop.step + 30, 150):  # the others go on logging; d logged nothing since
        fed = {r: pts[:stop.step] if r == "d" else pts[:now] for r, pts in curves.items()}
        got = sweep_forecasts(fed, params=params, horizons={}, out_of_race={"d"}, stops={"d": stop})["d"]
        assert got.at_stop == stop.step and got.path[0][0] == stop.step
        seen.append((got.probability, got.final.mean, got.final.low, got.final.high, got.path[-1]))
    d = stop.details
    assert seen[0][:4] == (d["probability"], d["forecast"], d["ci_low"], d["ci_high"])
    assert seen[1] == seen[0] and seen[2] == seen[0]  # frozen: not moved by the sweep's later course
    assert seen[0][4] == (200.0, d["forecast"], d["ci_low"], d["ci_high"])


def test_a_path_ends_on_the_rows_forecast_worth_and_its_band_on_the_interval():
    curves = noisy_curves({"a": 0.8, "b": 0.6, "c": 0.7}, 60)
    got = sweep_forecasts(curves, params=parse_config(CONFIG), horizons={"b": 260}, out_of_race=set())
    a, b = got["a"], got["b"]
    assert a.path[0][0] == 60 and a.path[-1][0] == 200 and b.path[-1][0] == 260 and b.horizon == 260
    for run_id, f in got.items():
        assert f.path[-1][1:] == (f.final.mean, f.final.low, f.final.high)  # exactly the row's numbers
        step, start, low, high = f.path[0]
        assert low == start == high  # from the run's level (its last 10 %), where the calibrated model stands it
        assert step == 60 and start == pytest.approx(sum(v for _, v in curves[run_id][-20:]) / 20)
        assert all(lo <= mid <= hi for _, mid, lo, hi in f.path)
        widths = [hi - lo for _, _, lo, hi in f.path]
        assert widths == sorted(widths) and widths[-1] > 0  # the further ahead, the less is known


def test_forecasts_stay_within_a_bounded_metrics_range():
    """A reward in [0, 1] whose seeds stand near 1 with noise: unbounded, the intervals run past 1; bounded, the row's
    numbers and every point of the path and band lie in [0, 1], the path still ending on the row's numbers."""
    rng = random.Random(3)
    curves = {r: [(t, min(1.0, level + rng.gauss(0, 0.08))) for t in range(1, 41)]
              for r, level in {"a": 0.97, "b": 0.9, "c": 0.6, "d": 0.2}.items()}
    params = parse_config({**CONFIG, "metric": "reward/mean"})
    bounds = metric_range("reward/mean", {"rewards": []})
    assert bounds == (0.0, 1.0)
    free = sweep_forecasts(curves, params=params, horizons={}, out_of_race=set())
    assert max(f.final.high for f in free.values()) > 1.0 or min(f.final.low for f in free.values()) < 0.0
    got = sweep_forecasts(curves, params=params, horizons={}, out_of_race=set(), bounds=bounds)
    for run_id, f in got.items():
        assert 0.0 <= f.final.low <= f.final.mean <= f.final.high <= 1.0
        assert all(0.0 <= x <= 1.0 for point in f.path for x in point[1:])
        assert f.path[-1][1:] == (f.final.mean, f.final.low, f.final.high)
        assert f.probability == free[run_id].probability  # the policy's number, not moved by the display


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
        assert coarse[r].path[-1][1] == coarse[r].final.mean


def test_too_few_points_give_no_forecast_and_a_finished_run_no_path():
    curves = {"short": [(1, 0.1)], "done": [(t, 0.5) for t in range(1, 201)]}
    got = sweep_forecasts(curves, params=parse_config(CONFIG), horizons={}, out_of_race=set())
    assert got["short"].final is None and got["short"].path == []  # one point: no forecast
    assert got["done"].path == [] and math.isfinite(got["done"].final.mean)
    assert path_steps(5, 5) == [] and len(path_steps(0, 100)) == 24
