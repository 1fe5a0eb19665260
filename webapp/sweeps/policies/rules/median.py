"""``median``: the median stopping rule (Golovin et al., "Google Vizier", KDD 2017); its formula is ``stopping_rules.median_stops``."""
from __future__ import annotations

from typing import Optional

from ..parameters import MedianParams
from ..policy import Policy, Rule
from ..stopping_rules import median_stops, median_waiting


class MedianStoppingPolicy(Policy):
    """Stop a run whose smoothed metric at step s is worse than the median of its peers' at step s.

    Peers are the other runs that reached step s (stopped and finished runs count with their value at s). In a
    sweep where every seed runs at once this keeps halving the field after the grace period until a run has
    fewer than ``min_peers`` peers left, i.e. about ``min_peers`` runs survive (Golovin et al. 2017 compare
    with completed trials; here there may be none, so the sweep's own runs at the same step are the peers).
    """

    compares_peers = True

    def _describe_rule(self) -> str:
        p: MedianParams = self.params  # type: ignore[assignment]
        every = f"every {p.eval_every} steps" if p.eval_every > 1 else "every step"
        return (f"median on {p.metric} ({p.mode}): {every} from step {p.grace()}, a run more than "
                f"{p.min_delta:g} worse than the median of at least {p.min_peers} peers stops")

    def _next_step(self, after: int) -> Optional[int]:
        p: MedianParams = self.params  # type: ignore[assignment]
        start = max(after, p.grace())
        return start + (-(start - p.grace())) % p.eval_every


RULE = Rule("median", MedianParams, median_stops, MedianStoppingPolicy, median_waiting, compares=True)
