"""``threshold``: a bound or a plateau; its formula is ``stopping_rules.threshold_stops``."""
from __future__ import annotations

from ..parameters import ThresholdParams
from ..policy import Policy, Rule
from ..stopping_rules import peers_waiting, threshold_stops


class ThresholdPolicy(Policy):
    """Stop a run whose smoothed metric crosses a bound, or has not improved for ``patience`` steps."""

    def _describe_rule(self) -> str:
        p: ThresholdParams = self.params  # type: ignore[assignment]
        parts = []
        if p.lower_bound is not None:
            parts.append(f"below {p.lower_bound:g}")
        if p.upper_bound is not None:
            parts.append(f"above {p.upper_bound:g}")
        if p.patience is not None:
            parts.append(f"no improvement for {p.patience} steps")
        return f"threshold on {p.metric}: every step from {p.grace()}, stop when {' or '.join(parts)}"


RULE = Rule("threshold", ThresholdParams, threshold_stops, ThresholdPolicy, peers_waiting)
