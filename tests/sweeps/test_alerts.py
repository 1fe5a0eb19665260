"""RL-health alert rules on hand-made curves (pure Python)."""
from __future__ import annotations

import pytest

from webapp.sweeps.alerts import AlertBounds, check_run


def curve(values, start=1):
    return [(start + i, v) for i, v in enumerate(values)]


def kinds(curves, **bounds):
    return [a.kind for a in check_run(curves, AlertBounds(**bounds))]


def test_entropy_collapse_fires_below_the_bound_after_smoothing():
    assert kinds({"entropy": curve([0.6, 0.5, 0.4, 0.01, 0.0, 0.0, 0.0, 0.0])}) == ["entropy_collapse"]
    # one near-zero batch in a healthy run is smoothed away
    assert kinds({"entropy": curve([0.6, 0.5, 0.55, 0.0, 0.6])}) == []
    # too early to tell
    assert kinds({"entropy": curve([0.0, 0.0])}) == []


def test_length_at_the_cap():
    [alert] = check_run({"length/clipped_frac": curve([0.2, 0.7, 0.9, 0.95, 1.0])})
    assert alert.kind == "length_at_cap" and alert.step == 5 and alert.bound == 0.5 and alert.value > 0.5
    assert kinds({"length/clipped_frac": curve([0.6, 0.7, 0.8])}, clipped_frac_max=0.9) == []


def test_zero_variance_groups_high_or_climbing():
    assert kinds({"frac_zero_std_groups": curve([0.9] * 5)}) == ["zero_std_climbing"]
    climbing = [0.1] * 10 + [0.1 + 0.06 * i for i in range(1, 11)]  # 0.1 -> 0.7 within 10 steps
    [alert] = check_run({"frac_zero_std_groups": curve(climbing)})
    assert "climbing" in alert.message and alert.step == 20
    assert kinds({"frac_zero_std_groups": curve([0.3] * 30)}) == []


def test_bounds_overrides_are_checked():
    assert AlertBounds.from_overrides({"entropy_min": 0.2, "window": 5}) == AlertBounds(entropy_min=0.2, window=5)
    with pytest.raises(ValueError, match="entropy_floor: unknown"):
        AlertBounds.from_overrides({"entropy_floor": 0.2})
    with pytest.raises(ValueError, match="window: expected a finite number"):
        AlertBounds.from_overrides({"window": "ten"})
