"""The ``auto`` policy: the stopping rule a project's own finished sweeps say saves most within the promised risk
(docs/architecture.md, "Early stopping").

With a history of at least ``history_risk.MIN_SWEEPS`` complete finished sweeps, every candidate is replayed on
them (``history_risk.fit``): ``bayes`` at its learned level, and each one-shot cut "at fraction f keep the top
share q" of ``history_risk.CUT_AT`` x ``CUT_KEEP``. Of those whose conformal bound (lost + 1) / (n + 1) is within
``risk`` (lost: the calibration sweeps whose every near-best seed the replay stopped), ``auto`` runs the one that
saved most of their steps (``RiskFit.choose``) and says which, with what it did there. Without such a history it is
``bayes`` with its built-in calibration. A user who picked ``bayes`` or ``cut`` gets that rule; only ``auto`` chooses.

The choice is a selection among 43 candidates on the same sweeps that certify it, so its bound is not exact: on the
tuning corpora (bench/early_stopping.py --calibration --tune) the cuts' fraction grid was kept coarse (6 fractions)
because a finer one (15) let the choice's realized loss exceed the risk by 1.5 points.
"""
from __future__ import annotations

import dataclasses
from typing import Hashable, Iterable, Optional

from . import history_risk
from .bayes import BayesPolicy, bayes_stops, bayes_waiting
from .decision import Decision
from .parameters import AutoParams, CommonParams, CutParams
from .curves import SweepCurves
from .stopping_rules import cut_stops, cut_waiting

__all__ = ["AutoPolicy", "auto_stops", "auto_waiting", "cut_params"]


def cut_params(p: AutoParams, choice: history_risk.Choice) -> CutParams:
    """The cut ``choice`` names, with every common key of ``p`` (metric, smoothing, grace, guards...)."""
    common = {f.name: getattr(p, f.name) for f in dataclasses.fields(CommonParams)}
    return CutParams(**common, at=float(choice.at), keep=float(choice.keep))


class AutoPolicy(BayesPolicy):
    """Run the rule (bayes, or a one-shot cut) that saved most within ``risk`` on the project's finished sweeps.

    The candidates are replayed on the project's complete finished sweeps (``history_risk.fit``); of those whose
    realized loss bound is within ``risk`` the one that saved most runs (``history_risk.RiskFit.choose``). Without
    20 complete finished sweeps it is ``bayes`` with the built-in calibration.
    """

    def __init__(self, params: AutoParams):
        super().__init__(params)
        self.choice: Optional[history_risk.Choice] = None
        self.cut: Optional[CutParams] = None

    def _learn(self, history, config: Optional[dict] = None, risk_fit=None) -> None:
        super()._learn(history, config, risk_fit)
        fit = self._memo["fit"]
        self.choice = fit.choose(self.params.risk) if fit is not None else None  # type: ignore[attr-defined]
        self.cut = cut_params(self.params, self.choice) if self.choice and self.choice.rule == "cut" else None
        self._memo["cut"] = self.cut

    def _describe_rule(self) -> str:
        p: AutoParams = self.params  # type: ignore[assignment]
        if self.choice is None:
            return (f"auto on {p.metric} ({p.mode}): no choice learned from this project's complete finished "
                    f"sweeps (it needs {history_risk.MIN_SWEEPS}), so {super()._describe_rule()}")
        chosen = (f"cut: at step {self.cut.cut_step()} the top {self.cut.keep:.0%} of the seeds go on, the rest stop"
                  if self.cut else super()._describe_rule())
        return (f"auto on {p.metric} ({p.mode}) chose {self.choice.text}, the most saved within risk {p.risk:g} of "
                f"bayes and {len(history_risk.CUT_AT) * len(history_risk.CUT_KEEP)} one-shot cuts; {chosen}")

    def tell_stop(self, decision: Decision) -> None:
        """A stop of an earlier check: bayes's own, as bayes reads it; under a cut, out of the race."""
        if self.cut is None:
            super().tell_stop(decision)
        elif decision.run_id not in self.stopped:
            self.stopped[decision.run_id] = decision if decision.rule == "cut" else None

    def _next_step(self, after: int) -> Optional[int]:
        if self.cut is None:
            return super()._next_step(after)
        step = self.cut.cut_step()
        return step if step >= after else None

    def waiting(self, last_step: int, others: Iterable[tuple[int, bool]], *, queued: bool = False) -> Optional[str]:
        if self.cut is None or queued or last_step < self.cut.cut_step():
            return super().waiting(last_step, others, queued=queued)
        return cut_waiting(self.cut, last_step, list(others))

    def _find_stops(self) -> list[Decision]:
        return auto_stops(self._view(), self.params, self._memo)


def auto_stops(sweep: SweepCurves, p: AutoParams, memo: dict) -> list[Decision]:
    """``auto``: the chosen rule's stops: ``cut_stops`` with the chosen cut (``memo["cut"]``, the params
    ``cut_params`` made) over the same curves, else ``bayes_stops``."""
    cut = memo.get("cut")
    if cut is None:
        return bayes_stops(sweep, p, memo)
    return cut_stops(SweepCurves(cut, sweep.curves, sweep.stopped, sweep.extended, sweep.bounds), cut, memo)


def auto_waiting(p: AutoParams, last_step: int, others: list[tuple[int, bool]]) -> Optional[str]:
    """waiting as the chosen rule waits (bayes: for peers in the race; a cut: for peers at its step)"""
    return bayes_waiting(p, last_step, others)
