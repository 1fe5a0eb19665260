"""A run's final value of a metric: the mean over its last 10 % of steps, not its noisiest single step (the value
bench/early_stopping.py scores policies by). Used by the sweep summary (webapp.sweeps.summary) and the compare
page (webapp.runs.compare)."""
from __future__ import annotations

import math

FINAL_SHARE = 0.1


def final_window(last_step: int) -> int:
    """How many of a run's last steps its final value averages.

    >>> final_window(40), final_window(5), final_window(0)
    (4, 1, 1)
    """
    return max(1, math.ceil(FINAL_SHARE * last_step))
