"""How a policy decision's numbers are written: one formatter for the reason a rule writes when it decides and for
the dashboard's decision columns (templates/sweeps/_decisions.html, through the ``sweeps`` template filters), so
both show the same digits of the same stored details. Pure Python; no Django."""
from __future__ import annotations

from typing import Optional

from .metric_ranges import Range, clip

__all__ = ["probability", "value", "bayes_reason"]


def probability(x: float) -> str:
    """A probability or a loss (P(near-best), the model's loss and its level): three decimals, Python's rounding
    (of the float as stored, not of its shortest decimal).

    >>> probability(0.1825), probability(0.04), probability(1)
    ('0.182', '0.040', '1.000')
    """
    return f"{float(x):.3f}"


def value(x: float) -> str:
    """A value of the metric (a forecast worth, an interval's end): four significant digits.

    >>> value(0.21068), value(0.0), value(-0.051681)
    ('0.2107', '0', '-0.05168')
    """
    return f"{float(x):.4g}"


def bayes_reason(details: dict, *, metric: str, step: int, best: float, peers: int,
                 bounds: Range = (None, None), tail: str = "") -> str:
    """A ``bayes`` stop's reason from its ``details`` (probability, loss, model_risk, risk, forecast, ci_low,
    ci_high): the forecast worth, its interval and the best seed's worth (``best``) within the metric's range
    (``bounds``, as the dashboard's columns show them). ``tail``: what the budget adds.

    >>> d = {"probability": 0.1825, "loss": 0.01, "model_risk": 0.03, "risk": 0.05, "forecast": 0.21068,
    ...      "ci_low": -0.051681, "ci_high": 0.272}
    >>> print(bayes_reason(d, metric="reward/mean", step=28, best=0.3, peers=4, bounds=(0.0, 1.0)))
    bayes: P(near-best) = 0.182; with it stopped P(every near-best seed is stopped) = 0.010 <= 0.030 (the model's level for risk 0.05); at step 28 its worth forecast reward/mean 0.2107 (95 % 0 to 0.272) vs the likeliest best seed's 0.3, of 4 peers
    """
    def shown(x: Optional[float]) -> str:
        return value(clip(float(x), bounds))

    return (f"bayes: P(near-best) = {probability(details['probability'])}; with it stopped P(every near-best seed "
            f"is stopped) = {probability(details['loss'])} <= {probability(details['model_risk'])} (the model's "
            f"level for risk {details['risk']:g}); at step {step} its worth forecast {metric} "
            f"{shown(details['forecast'])} (95 % {shown(details['ci_low'])} to {shown(details['ci_high'])}) vs the "
            f"likeliest best seed's {shown(best)}, of {peers} peers{tail}")
