"""The range a logged metric can take, where the project knows one: what the sweep dashboard's forecasts are
clipped to (``forecast_paths``), so a reward in [0, 1] is never forecast at -0.42. Pure Python; no Django.

Known by definition (the metrics every run logs, docs/architecture.md "The training core"): shares and
fractions lie in [0, 1] (``accuracy``, ``frac_zero_std_groups``, the clip and truncation fractions); entropy,
lengths, a standard deviation, a gradient norm, times and throughputs are >= 0. ``reward/mean`` is the batch mean
of the weighted sum of the verifiers' scores (``TrainConfig.rewards``; empty: the task's own verifier, weight 1),
and the built-in verifiers score in [0, 1] (training/verifiers/base.py), so it lies in
[sum of the negative weights, sum of the positive weights], less ``overlong_penalty_factor`` with overlong
shaping on; on an engine that runs its own trainer (verl, a command) the reward is that trainer's: no range.
Any other metric (a loss, the KL estimate, an eval) has none.
"""
from __future__ import annotations

from typing import Optional

__all__ = ["metric_range", "clip", "UNIT", "NONNEGATIVE"]

Range = tuple[Optional[float], Optional[float]]

UNIT = ("accuracy", "frac_zero_std_groups", "length/clipped_frac", "clip/low_frac", "clip/high_frac",
        "clip/dual_frac", "clip/frac")
"""Shares of a batch: in [0, 1]."""

NONNEGATIVE = ("entropy", "reward/std", "length/mean", "length/max", "grad_norm", "step_time_s", "tokens_per_s")
"""Never below 0."""

OWN_REWARD_ENGINES = ("seedbed", "trl")  # the engines that score with Seedbed's verifiers


def metric_range(metric: str, config: Optional[dict] = None) -> Range:
    """(low, high) of ``metric`` for runs of ``config`` (a TrainConfig as a dict), None where unbounded.

    >>> metric_range("accuracy"), metric_range("entropy"), metric_range("loss/policy")
    ((0.0, 1.0), (0.0, None), (None, None))
    >>> metric_range("reward/mean", {"rewards": []}), metric_range("reward/mean", {"engine": "verl"})
    ((0.0, 1.0), (None, None))
    >>> metric_range("reward/mean", {"rewards": [{"name": "a", "weight": 1}, {"name": "b", "weight": -0.5}]})
    (-0.5, 1.0)
    >>> metric_range("reward/mean", {"overlong_buffer_len": 64, "overlong_penalty_factor": 1.0})
    (-1.0, 1.0)
    """
    config = config or {}
    if metric in UNIT:
        return 0.0, 1.0
    if metric in NONNEGATIVE:
        return 0.0, None
    if metric != "reward/mean" or config.get("engine", "seedbed") not in OWN_REWARD_ENGINES:
        return None, None
    weights = []
    for item in config.get("rewards") or [{"weight": 1.0}]:
        weight = item.get("weight", 1.0) if isinstance(item, dict) else None
        if isinstance(weight, bool) or not isinstance(weight, (int, float)):
            return None, None  # not a spec the config accepts: nothing known
        weights.append(float(weight))
    low, high = sum(min(w, 0.0) for w in weights), sum(max(w, 0.0) for w in weights)
    if int(config.get("overlong_buffer_len") or 0) > 0:
        low -= float(config.get("overlong_penalty_factor", 1.0))
    return low, high


def clip(value: float, bounds: Range) -> float:
    """``value`` within ``bounds`` (a bound None is no bound).

    >>> clip(-0.42, (0.0, 1.0)), clip(1.3, (0.0, None)), clip(0.5, (None, None))
    (0.0, 1.3, 0.5)
    """
    low, high = bounds
    if low is not None and value < low:
        return low
    if high is not None and value > high:
        return high
    return value
