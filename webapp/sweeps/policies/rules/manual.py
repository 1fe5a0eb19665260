"""``manual``: no ranking; runs are stopped by hand from the dashboard (or by the policy's guards)."""
from __future__ import annotations

from typing import Optional

from ..parameters import ManualParams
from ..policy import Policy, Rule
from ..stopping_rules import no_stops, no_waiting


class ManualPolicy(Policy):
    """Never decides: runs are stopped by hand from the dashboard."""

    ranks = False

    def describe(self) -> str:
        if self.guards:
            return f"manual: no ranking; runs are stopped from the dashboard{self._describe_guards()}"
        return "manual: runs are stopped only from the dashboard"

    def _next_step(self, after: int) -> Optional[int]:
        return super()._next_step(after) if self.guards else None

    def metrics(self) -> list[str]:
        return sorted({g.watched() for g in self.guards})  # no ranking metric: only the guards read curves


RULE = Rule("manual", ManualParams, no_stops, ManualPolicy, no_waiting)
