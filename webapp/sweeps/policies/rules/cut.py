"""``cut``: the one-shot rule of thumb (seed documents 004 §4.3); its formula is ``stopping_rules.cut_stops``."""
from __future__ import annotations

from typing import Optional

from ..parameters import CutParams
from ..policy import Policy, Rule
from ..stopping_rules import cut_stops, cut_waiting


class CutPolicy(Policy):
    """One-shot cut: at one fraction of the run keep the top share of the seeds, stop the rest.

    The rule of thumb of a seed sweep ("at 30 % of the run keep the best 3 of 8", seed documents 004 §4.3): one
    rung at step ceil(at * max_steps); a run is judged there once at least ``min_peers`` other runs have a value
    there, against every value recorded there (runs stopped or ended included), as ``asha`` judges a rung.
    """

    compares_peers = True

    def _describe_rule(self) -> str:
        p: CutParams = self.params  # type: ignore[assignment]
        return (f"cut on {p.metric} ({p.mode}): at step {p.cut_step()} ({p.at:.0%} of the run) the top {p.keep:.0%} "
                f"of the seeds go on, the rest stop (min {p.min_peers} peers)")

    def _next_step(self, after: int) -> Optional[int]:
        step = self.params.cut_step()  # type: ignore[attr-defined]
        return step if step >= after else None


RULE = Rule("cut", CutParams, cut_stops, CutPolicy, cut_waiting, compares=True)
