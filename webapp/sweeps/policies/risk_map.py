"""The ``bayes`` policy's risk map: the model loss at which it stops seeds for the risk a user asked for
(docs/architecture.md, "Early stopping").

``calibrated`` gives the model's loss, P(every near-best seed is stopped) under its predictive draws. Its
realized loss ran past it on curves unlike the drift table's (a model loss of 0.05 lost every near-best seed of
about 10 % of bench/other_sweeps.py's sweeps, seeds being drawn independently and the table's tails thin there).
So a risk r is promised by stopping while the model's loss stays at most

    model_risk(r) = interpolation of the pairs (r_i, l_i) of ``risk_levels`` at r, through (0, 0),
                    l_last * r / r_last beyond the last pair

where l_i is the largest model loss level whose realized loss (and every smaller level's) stayed within r_i on
the tuning sweeps of both synthetic corpora, with the built-in drift table and with learned ones (cross-fitted):
a threshold chosen on calibration data, as in conformal risk control (Angelopoulos et al., "Conformal Risk
Control", ICLR 2024) and Learn-then-Test (Angelopoulos et al., 2021). bench/calibrate_risk.py learns the pairs;
bench/early_stopping.py --calibration judges them on the test sweeps. A policy with a learned prior uses the
smaller of the two maps' levels (a short history leaves its table near the built-in one).
"""
from __future__ import annotations

import contextlib
from typing import Iterator, Sequence

from . import risk_levels

__all__ = ["model_risk", "uncalibrated", "is_uncalibrated"]

_OFF = [False]


def _interpolate(pairs: Sequence[tuple[float, float]], risk: float) -> float:
    """Piecewise-linear through (0, 0) and ``pairs`` (increasing targets), proportional beyond the last.

    >>> round(_interpolate(((0.1, 0.05), (0.2, 0.12)), 0.15), 6)
    0.085
    >>> round(_interpolate(((0.1, 0.05), (0.2, 0.12)), 0.4), 6)
    0.24
    """
    lo_r, lo_l = 0.0, 0.0
    for r, level in pairs:
        if risk <= r:
            return lo_l + (level - lo_l) * (risk - lo_r) / (r - lo_r)
        lo_r, lo_l = r, level
    return lo_l * risk / lo_r


def model_risk(risk: float, learned: bool = False) -> float:
    """The model loss bayes may reach for a promised ``risk`` (the module's formula); ``learned``: its drift table
    came from the project's history (then the smaller of the built-in and learned maps' levels)."""
    if _OFF[0]:
        return risk
    level = _interpolate(risk_levels.BUILTIN, risk)
    if learned:
        level = min(level, _interpolate(risk_levels.LEARNED, risk))
    return level


def is_uncalibrated() -> bool:
    """Whether within ``uncalibrated`` (a replay at the model's own level learns no risk fit either)."""
    return _OFF[0]


@contextlib.contextmanager
def uncalibrated() -> Iterator[None]:
    """Within it ``model_risk(r) = r``: bench/calibrate_risk.py measures the realized loss of the model's own levels."""
    _OFF[0] = True
    try:
        yield
    finally:
        _OFF[0] = False
