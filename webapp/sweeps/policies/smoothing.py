"""Smoothing a run's curve before any comparison: debiased EMA, running mean, or none (one point at a time, as
the policies observe them, or a whole curve at once)."""
from __future__ import annotations

from typing import Iterable

__all__ = ["debiased_ema", "running_mean", "smooth", "make_smoother", "SMOOTHING_KINDS"]

SMOOTHING_KINDS = ("ema", "mean", "none")


def debiased_ema(values: Iterable[float], weight: float) -> list[float]:
    """Exponential moving average with Adam's bias correction (TensorBoard's smoothing slider).

    m_t = w * m_{t-1} + (1 - w) * x_t with m_0 = 0, and s_t = m_t / (1 - w**t) for t = 1, 2, ...
    Dividing by 1 - w**t removes the pull toward 0 of the first points, so s_1 = x_1 and a constant curve
    stays constant.

    >>> debiased_ema([1.0, 1.0, 1.0], 0.9)
    [1.0, 1.0, 1.0]
    >>> [round(v, 4) for v in debiased_ema([0.0, 1.0], 0.5)]
    [0.0, 0.6667]
    """
    smoother = _EmaSmoother(weight)
    return [smoother.update(x) for x in values]


def running_mean(values: Iterable[float], window: int) -> list[float]:
    """Mean of the last ``window`` values (fewer at the start): s_t = mean(x_{max(1, t-window+1)} .. x_t).

    >>> running_mean([1.0, 2.0, 3.0, 4.0], 2)
    [1.0, 1.5, 2.5, 3.5]
    """
    smoother = _WindowSmoother(window)
    return [smoother.update(x) for x in values]


def smooth(values: Iterable[float], kind: str = "ema", weight: float = 0.6, window: int = 5) -> list[float]:
    """Smooth a whole curve as a policy does point by point (``kind``: ema, mean or none)."""
    smoother = make_smoother(kind, weight, window)
    return [smoother.update(x) for x in values]


class _EmaSmoother:
    def __init__(self, weight: float):
        self.weight = weight
        self.biased = 0.0
        self.count = 0

    def update(self, x: float) -> float:
        self.count += 1
        self.biased = self.weight * self.biased + (1.0 - self.weight) * x
        if self.weight == 0.0:
            return self.biased
        return self.biased / (1.0 - self.weight ** self.count)


class _WindowSmoother:
    def __init__(self, window: int):
        self.window = window
        self.recent: list[float] = []

    def update(self, x: float) -> float:
        self.recent.append(x)
        if len(self.recent) > self.window:
            self.recent.pop(0)
        return sum(self.recent) / len(self.recent)


class _IdentitySmoother:
    def update(self, x: float) -> float:
        return x


def make_smoother(kind: str, weight: float, window: int):
    if kind == "ema":
        return _EmaSmoother(weight)
    if kind == "mean":
        return _WindowSmoother(window)
    return _IdentitySmoother()
