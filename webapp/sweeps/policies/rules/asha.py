"""``asha``: asynchronous successive halving (Li et al., MLSys 2020); its formula is ``stopping_rules.asha_stops``."""
from __future__ import annotations

from typing import Optional

from ..parameters import AshaParams
from ..policy import Policy, Rule
from ..stopping_rules import asha_stops, asha_waiting


class AshaPolicy(Policy):
    """Asynchronous successive halving: at each rung only the top 1/eta of the runs that reached it continue.

    A run's rung value is its smoothed metric at the rung step. A run is judged at a rung as soon as at least
    ``min_peers`` other runs have a value there (until then it keeps running and is judged later, at whatever
    step it has reached): it continues when it ranks within the top max(1, floor(n/eta)) of the n values
    recorded at that rung so far (runs stopped earlier at that rung included, and runs that ended: finished,
    killed, or stopped at a later rung), otherwise it is stopped.
    """

    compares_peers = True

    def __init__(self, params: AshaParams):
        super().__init__(params)
        self.rung_steps = params.rungs()

    def _describe_rule(self) -> str:
        p: AshaParams = self.params  # type: ignore[assignment]
        return (f"asha on {p.metric} ({p.mode}): rungs at steps {', '.join(map(str, self.rung_steps)) or 'none'}; "
                f"the top 1/{p.eta} at each rung continue (min {p.min_peers} peers)")

    def _next_step(self, after: int) -> Optional[int]:
        return next((rung for rung in self.rung_steps if rung >= after), None)


RULE = Rule("asha", AshaParams, asha_stops, AshaPolicy, asha_waiting, compares=True)
