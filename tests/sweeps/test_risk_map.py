"""The bayes policy's risk map: the model loss it stops at for a promised risk (webapp/sweeps/policies/risk_map.py)."""
import os
import sys

import numpy as np
import pytest

from webapp.sweeps.policies import replay, risk_levels, risk_map

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "bench"))

BAYES = {"name": "bayes", "metric": "m", "mode": "max", "max_steps": 40}


def noisy_curves(levels: dict, steps: int, noise: float, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {r: [(t, float(level * min(1.0, (t + 1) / 10) + noise * rng.standard_normal())) for t in range(steps)]
            for r, level in levels.items()}


def test_the_map_is_increasing_below_the_risk_and_the_learned_one_no_laxer():
    risks = np.linspace(0.001, 0.5, 200)
    builtin = [risk_map.model_risk(float(r)) for r in risks]
    learned = [risk_map.model_risk(float(r), learned=True) for r in risks]
    assert all(0 < b <= r for b, r in zip(builtin, risks))
    assert builtin == sorted(builtin) and learned == sorted(learned)
    assert all(lv <= b for lv, b in zip(learned, builtin))
    with risk_map.uncalibrated():
        assert risk_map.model_risk(0.05) == 0.05 and risk_map.model_risk(0.2, learned=True) == 0.2
    assert risk_map.model_risk(0.05) < 0.05  # back on after the block


def test_the_pairs_are_the_bench_choice_from_the_loss_curves_they_keep():
    """risk_levels.py's pairs are bench/calibrate_risk.py's choice from the realized loss curves it stores: per
    target, the largest level whose loss (and every smaller level's) was within it on both tuning corpora."""
    import calibrate_risk

    for name, prior in (("BUILTIN", "builtin"), ("LEARNED", "cross-fit")):
        curves = [{float(k): v for k, v in c.items()} for c in risk_levels.CURVES[prior].values()]
        assert len(curves) == 2
        assert tuple(calibrate_risk.choose(curves)) == getattr(risk_levels, name)
        for target, level in getattr(risk_levels, name):
            assert all(max(c[lv] for lv in c if lv <= level) <= target or level == min(c) for c in curves)


def test_bayes_stops_only_down_to_the_maps_level_and_the_model_alone_would_stop_more():
    """The stops keep the model's loss within model_risk(risk) < risk: on these curves the model's own level (the
    map left out, as the code before it did) stops more seeds than the promised risk allows."""
    curves = noisy_curves({f"s{i}": 0.5 + 0.03 * i for i in range(8)}, steps=40, noise=0.03, seed=2)
    mapped = replay({**BAYES, "risk": 0.2}, curves)
    with risk_map.uncalibrated():
        raw = replay({**BAYES, "risk": 0.2}, curves)
    assert mapped.decisions and all(d.details["loss"] <= d.details["model_risk"] == risk_map.model_risk(0.2)
                                    for d in mapped.decisions)
    assert len(raw.stopped_at) > len(mapped.stopped_at)
    assert raw.compute_saved > mapped.compute_saved
    assert any(d.details["loss"] > risk_map.model_risk(0.2) for d in raw.decisions)


@pytest.mark.parametrize("pairs, risk, expected", [
    (((0.1, 0.05),), 0.05, 0.025), (((0.1, 0.05), (0.2, 0.1)), 0.3, 0.15), (((0.05, 0.01), (0.1, 0.04)), 0.075, 0.025),
])
def test_interpolation_through_zero_and_proportional_beyond(pairs, risk, expected):
    assert risk_map._interpolate(pairs, risk) == pytest.approx(expected)
