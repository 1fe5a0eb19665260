"""RL-health alerts for a sweep's runs. Pure Python, no Django: curves in, alerts out.

Three symptoms practitioners watch for in RLVR runs:

- **entropy collapse**: the policy's mean token entropy (``entropy``) falls below a bound: it has become almost
  deterministic and stops exploring (DAPO §3.1 motivates Clip-Higher with exactly this);
- **length at the cap**: the share of completions truncated at ``max_new_tokens`` (``length/clipped_frac``)
  rises above a bound: rewards then mostly measure truncation (DAPO's overlong shaping);
- **zero-variance groups climbing**: the share of groups whose G rewards are all equal
  (``frac_zero_std_groups``), which carry no GRPO gradient, is high or has climbed fast over a window.

Every check reads the curve smoothed with the debiased EMA of ``policies.debiased_ema`` so one batch does
not raise an alert.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Optional, Sequence

from webapp.sweeps.policies import debiased_ema

ENTROPY = "entropy"
CLIPPED = "length/clipped_frac"
ZERO_STD = "frac_zero_std_groups"
ALERT_METRICS = (ENTROPY, CLIPPED, ZERO_STD)


@dataclass(frozen=True)
class AlertBounds:
    """Where each alert fires; a sweep may override any field (``SweepPlan.alert_bounds``)."""

    entropy_min: float = 0.05
    """Entropy collapse: smoothed ``entropy`` (nats per token) below this."""
    clipped_frac_max: float = 0.5
    """Length at the cap: smoothed ``length/clipped_frac`` above this."""
    zero_std_max: float = 0.8
    """Zero-variance groups: smoothed ``frac_zero_std_groups`` above this ..."""
    zero_std_rise: float = 0.3
    """... or risen by more than this over the last ``window`` steps."""
    window: int = 10
    """Steps over which a climb is measured."""
    min_steps: int = 3
    """No alert before a run has logged this many points of the metric."""
    smoothing_weight: float = 0.6
    """Debiased-EMA weight applied to each curve before any check."""

    @classmethod
    def from_overrides(cls, overrides: Optional[dict]) -> "AlertBounds":
        """Defaults with ``overrides`` applied; raises ValueError naming an unknown or non-numeric key."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        kwargs = {}
        for key, value in (overrides or {}).items():
            if key not in fields:
                raise ValueError(f"{key}: unknown alert bound; allowed: {', '.join(fields)}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{key}: expected a finite number; got {value!r}")
            kwargs[key] = int(value) if fields[key].type == "int" else float(value)
        return cls(**kwargs)


@dataclass(frozen=True)
class AlertFinding:
    kind: str          # entropy_collapse | length_at_cap | zero_std_climbing | stalled (AlertKind values)
    metric: str
    step: int
    value: float       # the smoothed value that crossed
    bound: float
    message: str


def check_run(curves: dict[str, Sequence[tuple[int, float]]], bounds: AlertBounds = AlertBounds()
              ) -> list[AlertFinding]:
    """Alerts for one run from its curves ``{metric: [(step, value), ...]}`` (steps ascending, whole history).

    >>> [a.kind for a in check_run({"entropy": [(1, 0.5), (2, 0.01), (3, 0.0), (4, 0.0), (5, 0.0)]})]
    ['entropy_collapse']
    >>> check_run({"entropy": [(1, 0.5), (2, 0.4), (3, 0.45)]})
    []
    """
    findings = []
    for check in (_entropy_collapse, _length_at_cap, _zero_std_climbing):
        finding = check(curves, bounds)
        if finding is not None:
            findings.append(finding)
    return findings


def _smoothed(curves: dict, metric: str, bounds: AlertBounds) -> Optional[tuple[list[int], list[float]]]:
    points = curves.get(metric) or []
    if len(points) < bounds.min_steps:
        return None
    steps = [int(s) for s, _ in points]
    return steps, debiased_ema([float(v) for _, v in points], bounds.smoothing_weight)


def _entropy_collapse(curves: dict, bounds: AlertBounds) -> Optional[AlertFinding]:
    curve = _smoothed(curves, ENTROPY, bounds)
    if curve is None or curve[1][-1] >= bounds.entropy_min:
        return None
    step, value = curve[0][-1], curve[1][-1]
    return AlertFinding("entropy_collapse", ENTROPY, step, value, bounds.entropy_min,
                        f"entropy collapsed: smoothed {value:.4g} at step {step} is below {bounds.entropy_min:g}")


def _length_at_cap(curves: dict, bounds: AlertBounds) -> Optional[AlertFinding]:
    curve = _smoothed(curves, CLIPPED, bounds)
    if curve is None or curve[1][-1] <= bounds.clipped_frac_max:
        return None
    step, value = curve[0][-1], curve[1][-1]
    return AlertFinding("length_at_cap", CLIPPED, step, value, bounds.clipped_frac_max,
                        f"length at the cap: smoothed {value:.0%} of completions truncated at step {step} "
                        f"(above {bounds.clipped_frac_max:.0%})")


def _zero_std_climbing(curves: dict, bounds: AlertBounds) -> Optional[AlertFinding]:
    curve = _smoothed(curves, ZERO_STD, bounds)
    if curve is None:
        return None
    steps, values = curve
    step, value = steps[-1], values[-1]
    if value > bounds.zero_std_max:
        return AlertFinding("zero_std_climbing", ZERO_STD, step, value, bounds.zero_std_max,
                            f"zero-variance groups: smoothed {value:.0%} of groups at step {step} have equal "
                            f"rewards (above {bounds.zero_std_max:.0%}); they carry no gradient")
    # the smoothed value at the last step at least `window` steps back (or the first point)
    earlier = [v for s, v in zip(steps, values) if s <= step - bounds.window]
    start = earlier[-1] if earlier else values[0]
    if value - start > bounds.zero_std_rise:
        return AlertFinding("zero_std_climbing", ZERO_STD, step, value, start + bounds.zero_std_rise,
                            f"zero-variance groups climbing: smoothed share rose from {start:.0%} to {value:.0%} "
                            f"within {bounds.window} steps (step {step}; rise bound {bounds.zero_std_rise:.0%})")
    return None
