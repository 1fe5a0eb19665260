"""The ``bayes`` policy: a promised risk. It stops the seeds least likely to end near-best while the chance that the
sweep has stopped every near-best seed stays at most ``risk`` (docs/architecture.md, "Early stopping").

The numbers come from ``calibrated``: each seed's predictive distribution of its worth from its prefix (a drift
table learned on synthetic sweeps), joint Monte Carlo draws with a fixed seed, P(near-best) per seed and the loss
P(every near-best seed is stopped). The dashboard's forecasts (``forecast_paths.sweep_forecasts``) are a
``BayesPolicy``'s own numbers (``policy_numbers``) after the one simulator fed it the chart's curves
(``simulator.bayes_numbers``), so the two show one number.
"""
from __future__ import annotations

import statistics
from typing import Hashable, Optional

import numpy as np

from . import calibrated, decision_text, history_risk, prior, risk_map
from .budget import stops_fund_a_seed
from .calibrated import Prediction, SeedFold
from .parameters import BayesParams
from .curves import SweepCurves
from .decision import STOP, Decision
from .policy import Policy

__all__ = ["BayesPolicy", "bayes_stops", "policy_numbers", "sweep_numbers", "SweepNumbers"]


FRESH_SEED_MARGIN = 0.5
"""With a budget, bayes stops a seed only when a fresh seed would add at least ``1 / FRESH_SEED_MARGIN`` times
(twice) as much to the sweep's best worth per step as the seed's own rest (``calibrated.worth_continuing``'s
``margin``): a safety factor on two estimates. 0 never stops (8 seeds to their end), 1 is the plain comparison.
Chosen on the synthetic tune split (generator seed 1, 300 sweeps, budget 8 runs on 4 slots, risk 0.20): mean gain
of the best seed found over 8 seeds run to their end +0.0023 at 1, +0.0037 at 0.5 (interval +0.0001 to +0.0073;
sweeps lost 25 % -> 11 %), +0.0009 at 0.25, +0.0001 at 0.1; on 1,000 tune sweeps +0.0021 [+0.0003, +0.0039] at
0.5 against +0.0008 at 0.25 (README, "Does a budget pay?")."""


class SweepNumbers:
    """The calibrated numbers of one check: ``order`` (the seeds, draws' columns), ``preds`` (run -> Prediction),
    ``worths`` (draws x seeds, in the policy's sign: larger is better), ``p`` (run -> P(near-best))."""

    def __init__(self, order: list, preds: dict, worths: np.ndarray, tolerance: float):
        self.order, self.preds, self.worths, self.tolerance = order, preds, worths, tolerance
        near = calibrated.p_near_best(worths, tolerance) if order else np.zeros(0)
        self.p = {run_id: float(near[j]) for j, run_id in enumerate(order)}

    def column(self, run_id: Hashable) -> int:
        return self.order.index(run_id)

    def interval(self, run_id: Hashable, sign: float) -> tuple[float, float, float]:
        """The worth's median and 95 % interval (2.5 % and 97.5 % quantiles of its draws), in the metric's sign."""
        lo, mid, hi = (sign * float(x) for x in np.quantile(self.worths[:, self.column(run_id)], [0.025, 0.5, 0.975]))
        return mid, min(lo, hi), max(lo, hi)


def sweep_numbers(current: dict[Hashable, tuple[float, float, float]], frozen: dict[Hashable, tuple[Prediction, dict]],
                  *, window: int, tolerance: float, table: prior.DriftTable = prior.BUILTIN) -> SweepNumbers:
    """The calibrated numbers from the seeds in the race, in the policy's sign (larger is better).

    ``current[run] = (level, noise, fraction)`` of the seeds that are running or finished; ``frozen[run] =
    (prediction, levels)`` of the seeds the policy stopped: the prediction they had then and every seed's level
    at that moment. The standing and scale of the current seeds are computed over every seed (a stopped one by
    its level then: as in the tuning corpus, where every seed is there); a frozen prediction is moved by the
    sweep's common course since (the median change of the current seeds' levels from then: its drift was learned
    relative to the sweep's, ``calibrated``). Columns are in the run ids' order (run pks: launch order), so two
    sweeps alike but for their pks get the same numbers. ``table``: the drift table the draws come from (the
    built-in one, or ``prior.learn``'s from the project's finished sweeps)."""
    levels = {**{r: (p.level, 0.0, p.fraction) for r, (p, _) in frozen.items()}, **current}
    preds = calibrated.predictions(levels, window)
    for run_id, (pred, then) in frozen.items():
        moved = [current[r][0] - float(level) for r, level in then if r in current]
        offset = statistics.median(moved) if moved else 0.0
        preds[run_id] = Prediction(level=pred.level + offset, scale=pred.scale, fraction=pred.fraction,
                                   standing=pred.standing)
    order = sorted(preds, key=lambda r: (type(r).__name__, r))
    worths = calibrated.sweep_draws([preds[r] for r in order], table=table) if order else np.zeros((0, 0))
    return SweepNumbers(order, preds, worths, tolerance)


class BayesPolicy(Policy):
    """Stop the seeds least likely to be near-best while P(every near-best seed is stopped) <= ``risk``.

    At every check, each seed past the grace period and before its horizon with at least ``min_peers`` peers is a
    candidate. Its peers are the other seeds in the race: running, finished, or stopped by this policy (at the
    prediction frozen in their decision); runs killed or failed before their end, or stopped by a guard, are not.
    The candidates are taken in increasing P(near-best) and each is stopped while the model's loss, the seeds
    stopped before included, stays <= ``risk_map.model_risk(risk)`` (``calibrated.choose_stops``). Each decision's details keep its
    P(near-best), the loss, the risk, the worth's median and 95 % interval, the frozen prediction and every seed's
    level then (what a later check needs of it).
    """

    compares_peers = True
    learns = True

    def __init__(self, params: BayesParams):
        super().__init__(params)
        self.folds: dict[Hashable, SeedFold] = {}
        self.frozen: dict[Hashable, tuple[Prediction, list]] = {}
        self.sign = 1.0 if params.mode == "max" else -1.0
        self.table = prior.BUILTIN
        self._memo.update(folds=self.folds, frozen=self.frozen, table=self.table, fit=None)  # what bayes_stops reads

    def _learn(self, history, config: Optional[dict] = None, risk_fit=None) -> None:
        """Draw from the drift table learned from ``history`` (finished sweeps: run -> [(step, value)] of this
        policy's metric; ``prior.learn``), the built-in one when it holds none; stop at the risk level ``risk_fit``
        (``history_risk.RiskFit``, learned by ``registry.make_policy`` from the history's complete sweeps), the
        built-in risk map without one."""
        self.table = self._memo["table"] = prior.learn(history, self.sign)
        self._memo["fit"] = risk_fit

    def _observe_main(self, run_id: Hashable, step: int, value: float) -> bool:
        taken = super()._observe_main(run_id, step, value)
        if taken:
            fold = self.folds.get(run_id)
            if fold is None:
                fold = self.folds[run_id] = SeedFold(self.params.final_window())
            fold.add(step, self.sign * value)
        return taken

    def describe(self) -> str:
        return self._describe_rule() + self._describe_guards()

    def _describe_rule(self) -> str:
        p: BayesParams = self.params  # type: ignore[assignment]
        return (f"bayes on {p.metric} ({p.mode}): every step from {p.grace()}, the seeds least likely to end within "
                f"{p.tolerance:g} of the best seed stop while the model's P(every near-best seed is stopped) <= "
                f"{model_risk(p, self.table, self._memo['fit']):.3g}, the level that kept the realized loss within "
                f"risk {p.risk:g} on {risk_source(p, self._memo['fit'])} (calibrated worth forecasts, "
                f"{self.table.source}, min {p.min_peers} peers)")

    def tell_stop(self, decision: Decision) -> None:
        """A stop of an earlier check: out of the race, at the prediction it had then."""
        if decision.rule != "bayes" or decision.run_id in self.stopped:
            return
        frozen = frozen_from_details(decision.details)
        if frozen is None:  # a stop of the earlier model (no prediction kept): out of the race, as if killed
            self.mark_stopped(decision.run_id)
            return
        self.stopped[decision.run_id] = decision
        self.frozen[decision.run_id] = frozen

    def _find_stops(self) -> list[Decision]:
        return bayes_stops(self._view(), self.params, self._memo)


def policy_numbers(policy: BayesPolicy) -> SweepNumbers:
    """The calibrated numbers of a bayes policy as they stand (the dashboard's, for the same curves and stops)."""
    return _numbers(policy._view(), policy.params, policy._memo)


def _current(sweep: SweepCurves, folds: dict[Hashable, SeedFold]) -> dict[Hashable, tuple[float, float, float]]:
    """(level, noise, fraction) of every seed running or finished, with two points or more."""
    out = {}
    for run_id, fold in folds.items():
        horizon = sweep.horizon(run_id)
        if fold.n_diffs >= 1 and (run_id not in sweep.stopped or fold.step >= horizon):
            out[run_id] = (fold.level, fold.noise, min(1.0, fold.step / horizon))
    return out


def _numbers(sweep: SweepCurves, p: BayesParams, memo: dict) -> SweepNumbers:
    return sweep_numbers(_current(sweep, memo["folds"]), memo["frozen"], window=p.final_window(),
                         tolerance=p.tolerance, table=memo["table"])


def model_risk(p: BayesParams, table: prior.DriftTable, fit: Optional[history_risk.RiskFit] = None) -> float:
    """The model loss the stops may reach for the promised ``risk``: the level learned from the project's complete
    sweeps (``history_risk``) when ``fit`` has one for it, else the built-in map's (``risk_map``; its learned
    pairs when ``table`` came from finished sweeps)."""
    level = fit.level(p.risk) if fit is not None and not risk_map.is_uncalibrated() else None
    return level if level is not None else risk_map.model_risk(p.risk, learned=table.sweeps > 0)


def risk_source(p: BayesParams, fit: Optional[history_risk.RiskFit]) -> str:
    """Where the level of ``model_risk`` was chosen: this project's sweeps, or the tuning sweeps."""
    return fit.sweeps_text if fit is not None and fit.level(p.risk) is not None else "the tuning sweeps"


def bayes_stops(sweep: SweepCurves, p: BayesParams, memo: dict) -> list[Decision]:
    """``bayes``: a promised risk. With W_j the worth (noise-free final) of seed j drawn jointly from its calibrated
    predictive distribution (``calibrated``: level + scale·z, z from the drift table) and N = {j : W_j >= max_k W_k
    − ``tolerance``} the near-best seeds, the candidates c (live, past grace, before their horizon, with at least
    ``min_peers`` peers in the race) are taken in increasing P(c in N) and each is stopped while

        loss(S) = P(N ⊆ S) <= model_risk(``risk``),   S = the seeds stopped so far, this one included

    (``risk_map``: the model loss level whose realized loss stayed within ``risk`` on the tuning sweeps;
    ``calibrated.choose_stops``, on Monte Carlo draws with a fixed seed). ``memo``: ``folds`` (run ->
    ``calibrated.SeedFold``, fed by the policy's ``observe``) and ``frozen`` (a stopped seed's prediction then, and
    every seed's level then), which this rule adds its stops to."""
    judged = [run_id for run_id, _ in sweep.judgeable()]
    if not judged:
        return []
    frozen = memo["frozen"]
    sign = 1.0 if p.mode == "max" else -1.0
    numbers = _numbers(sweep, p, memo)
    peers = len(numbers.order) - 1
    candidates = [numbers.column(r) for r in judged if r in numbers.preds and peers >= p.min_peers]
    if not candidates:
        return []
    stopped = [numbers.column(r) for r in frozen]
    level = model_risk(p, memo["table"], memo.get("fit"))
    chosen = calibrated.choose_stops(numbers.worths, p.tolerance, level, candidates, stopped)
    gains: dict[int, tuple[float, float]] = {}
    if memo.get("budget") is not None and chosen:
        chosen, gains = _worth_a_fresh_seed(sweep, p, numbers, memo, chosen, stopped)
    levels = [[r, numbers.preds[r].level] for r in numbers.order if r not in frozen]
    best = max(numbers.order, key=lambda r: numbers.p[r])
    best_mid = numbers.interval(best, sign)[0]
    stops = []
    for column, prob, lost in chosen:
        run_id = numbers.order[column]
        pred = numbers.preds[run_id]
        mid, low, high = numbers.interval(run_id, sign)
        step = sweep.curves[run_id].last_step
        frozen[run_id] = (pred, levels)
        details = {"probability": prob, "loss": lost, "risk": p.risk, "model_risk": level, "tolerance": p.tolerance,
                   "forecast": mid, "ci_low": low, "ci_high": high, "horizon": sweep.horizon(run_id),
                   "prediction": pred.to_json(), "levels": levels, "prior": memo["table"].source,
                   "risk_source": risk_source(p, memo.get("fit")),
                   "peers": [[r, numbers.p[r]] for r in numbers.order if r != run_id]}
        # (written from the details by the formatter the dashboard's columns use, within the metric's range)
        reason = decision_text.bayes_reason(details, metric=sweep.params.metric, step=step, best=best_mid,
                                            peers=peers, bounds=sweep.bounds,
                                            tail=_fresh_seed_reason(gains.get(column), step, sweep, run_id, p))
        stops.append(Decision(run_id=run_id, action=STOP, rule="bayes", step=step, value=mid, threshold=best_mid,
                              n_peers=peers, details=details, reason=reason))
        if column in gains:
            stops[-1].details.update(gain=gains[column][0], fresh_gain=gains[column][1])
    return stops


def _worth_a_fresh_seed(sweep: SweepCurves, p: BayesParams, numbers: SweepNumbers, memo: dict,
                        chosen: list[tuple[int, float, float]], stopped: list[int]) -> tuple[list, dict]:
    """With a budget (its freed slots start new seeds), of the stops the risk allows keep those whose rest buys less
    of the sweep's best worth per step than a fresh seed would, by the margin ``FRESH_SEED_MARGIN``
    (``calibrated.worth_continuing``: g_j / steps left < margin x g_new / ``max_steps``), and none unless the steps they free start a new seed (``budget.stops_fund_a_seed``).
    Returns them with their loss again (the set is smaller) and column -> (g_j, g_new); the stops the budget
    withheld go to ``memo["held"]`` (``Policy.decide`` says why on their rows)."""
    worths, budget = numbers.worths, memo["budget"]
    kept = [j for j in range(worths.shape[1]) if j not in stopped]
    fresh = calibrated.fresh_seed_gain(worths, kept)
    gains, worth_stopping = {}, []
    for column, prob, _ in chosen:
        run_id = numbers.order[column]
        left = max(sweep.horizon(run_id) - sweep.curves[run_id].last_step, 0)
        gains[column] = (calibrated.continuing_gain(worths, column, kept), fresh)
        if not calibrated.worth_continuing(gains[column][0], left, fresh, p.max_steps, FRESH_SEED_MARGIN):
            worth_stopping.append((column, prob, left))
    if not stops_fund_a_seed(budget, sum(left for _, _, left in worth_stopping)):
        memo["held"] = [numbers.order[column] for column, _, _ in worth_stopping]
        return [], {}
    out, so_far = [], list(stopped)
    for column, prob, _ in worth_stopping:
        so_far.append(column)
        out.append((column, prob, calibrated.loss(worths, p.tolerance, so_far)))
    return out, gains


def _fresh_seed_reason(gains: Optional[tuple[float, float]], step: int, sweep: SweepCurves, run_id: Hashable,
                       p: BayesParams) -> str:
    if gains is None:
        return ""
    left = sweep.horizon(run_id) - step
    return (f"; its {left} steps left would add {gains[0]:.2g} to the best seed's expected worth, a fresh seed's "
            f"{p.max_steps} steps {gains[1]:.2g} (stopped: a fresh seed adds at least {1 / FRESH_SEED_MARGIN:g}x as "
            f"much per step)")



def bayes_waiting(p: BayesParams, last_step: int, others: list[tuple[int, bool]]) -> Optional[str]:
    """waiting for peers in the race (seeds with two points or more, at whatever step): k of min_peers"""
    n = sum(1 for reached, out in others if not out and reached >= 2)  # running, finished or stopped by bayes
    return (f"waiting for peers in the race: {n} of {p.min_peers} (a run killed or failed before its end is "
            f"not one)" if n < p.min_peers else None)


def frozen_from_details(details: dict) -> Optional[tuple[Prediction, list]]:
    """A stored bayes stop's frozen prediction and levels (None for a decision of an older version)."""
    if "prediction" not in details:
        return None
    return Prediction.from_json(details["prediction"]), details.get("levels", [])
