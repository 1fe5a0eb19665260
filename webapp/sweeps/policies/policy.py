"""A policy: ``Policy`` keeps every run's smoothed curve (``curves``), asks its rule which runs stop (a pure
function over the curves, ``stopping_rules``), applies its guards and the once-per-run rule, proposes extensions for
freed slots, and says in words what it does (``describe``), when it looks at a run next (``next_check``) and why it
cannot decide about one now (``waiting``). ``Rule`` is what a rule declares of itself (``RULE = Rule(...)`` in its
module of ``policies.rules``); ``registry`` finds them. Feeding a policy curves is ``simulator``."""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Hashable, Iterable, Optional

from .budget import BudgetUse, held_note, stops_fund_a_seed
from .curves import RunCurve, SweepCurves
from .decision import EXTEND, STOP, Decision
from .guards import GuardFold, guard_reason
from .metric_ranges import Range, metric_range
from .parameters import CommonParams
from .smoothing import make_smoother

__all__ = ["Policy", "Rule"]


class Policy:
    """Base class: keeps the curves, applies grace, the guards and the once-per-run rule; its rule
    (``record.stops``) finds the stops. Eight public methods: ``observe``, ``decide``, ``tell_stop``,
    ``mark_stopped`` (the feed), ``metrics``, ``describe``, ``next_check``, ``waiting`` (what callers show)."""

    rule = "manual"  # its name, set by its ``Rule`` record (the record's ``name``, written there only)
    record: "Rule"  # its record (set by the record): the stops and waiting functions this class calls
    ranks = True  # whether it ranks runs on its metric (manual does not; its guards may still stop runs)
    compares_peers = False  # whether it judges a run against other runs (min_peers matters: feasibility.py)
    learns = False  # whether it learns from the project's finished sweeps (``make_policy``'s history)

    def __init__(self, params: CommonParams):
        self.params = params
        self.curves: dict[Hashable, RunCurve] = {}
        self.stopped: dict[Hashable, Optional[Decision]] = {}  # None: ended for another reason (mark_stopped)
        self.extended: dict[Hashable, Decision] = {}
        self._extension_credits = 0
        self.guards = list(params.guards)
        self.guard_folds: dict[Hashable, list[GuardFold]] = {}  # run -> one fold per guard, in guards' order
        self.reads_curves = self.ranks or bool(self.guards)  # whether the database layer must feed it the curves
        self._memo: dict = {}  # what the rule keeps between decisions of one feed (stopping_rules)
        self.held: dict[Hashable, str] = {}  # run -> why its rule's stop was withheld at the last decide (a budget)
        # the metric's range (metric_ranges; a caller that knows the runs' config sets its own): what a reason's
        # forecasts are written within
        self.bounds: Range = metric_range(params.metric)
        p = params
        self._new_smoother = partial(make_smoother, p.smoothing, p.smoothing_weight, p.smoothing_window)

    # -- the interface ---------------------------------------------------------------------------
    def observe(self, run_id: Hashable, step: int, value: float, metric: Optional[str] = None) -> None:
        """Record one logged point of ``run_id``'s ``metric`` (default: the policy's own; a guard's metric feeds that
        guard, ``metrics()`` lists both). Points a run logs after the step at which this policy stopped it (while
        it winds down) are ignored."""
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step: expected an integer >= 0; got {step!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"value: expected a finite number for run {run_id!r} at step {step}; got {value!r}")
        decision = self.stopped.get(run_id)
        if decision is not None and step > decision.step:
            return
        metric = metric or self.params.metric
        if self.guards:
            folds = self.guard_folds.get(run_id)
            if folds is None:
                folds = self.guard_folds[run_id] = [GuardFold(g) for g in self.guards]
            for fold in folds:
                if fold.params.watched() == metric:
                    fold.add(step, float(value))
        if metric == self.params.metric:
            self._observe_main(run_id, step, float(value))

    def _observe_main(self, run_id: Hashable, step: int, value: float) -> bool:
        """A point of the policy's own metric; whether the curve took it (not a repeated or older step)."""
        curve = self.curves.get(run_id)
        if curve is None:
            curve = self.curves[run_id] = RunCurve(self._new_smoother)
        return curve.add(step, value)

    def metrics(self) -> list[str]:
        """The metrics this policy reads: its own (none for manual) and its guards'."""
        names = [self.params.metric] if self.params.metric else []
        return names + sorted({g.watched() for g in self.guards} - set(names))


    def tell_stop(self, decision: Decision) -> None:
        """Tell the policy about a stop it decided in an earlier check (each check replays ``decide`` from scratch:
        a rule whose later stops depend on its earlier ones reads them here). Most rules need nothing of it."""

    def mark_stopped(self, run_id: Hashable) -> None:
        """Tell the policy that ``run_id`` ended for another reason (a user killed it, it failed): no decision is
        made about it from now on; the points it logged still count for its peers. A database layer that
        rebuilds a policy from stored metrics calls this for every run that already ended before ``decide``."""
        self.stopped.setdefault(run_id, None)

    def decide(self, budget: Optional[BudgetUse] = None) -> list[Decision]:
        """New decisions since the last call: stops first (the guards', then the ranking's), then any extensions
        the stops or the budget pay for. ``budget``: the sweep's budget use now. When its freed slots start new
        seeds, a rule that ranks seeds against their peers (median, asha, bayes) stops only if what it frees starts
        a new seed (``budget.stops_fund_a_seed``), and ``bayes`` weighs each seed's rest against a fresh seed (its
        rule reads ``memo["budget"]``); a bound's or a guard's stop is made whatever the budget. The stops withheld
        for the budget are in ``held`` (run -> why it is kept) until the next ``decide``. When freed slots extend
        survivors (``extend_survivors_by``), stops are made as without a budget, and the budget pays for the
        extensions instead (``_extensions_paid``)."""
        extends = self.params.extend_survivors_by > 0
        seeds_budget = None if extends else budget
        stops = self._find_guard_stops()
        for decision in stops:
            self.stopped[decision.run_id] = decision
        self._memo["budget"], self._memo["held"] = seeds_budget, []
        ranked = self._find_stops()
        held = list(self._memo["held"])  # bayes_stops makes the funding check itself before it freezes a stop
        if seeds_budget is not None and self.compares_peers and ranked and not stops_fund_a_seed(
                seeds_budget, self._steps_left(d.run_id for d in ranked)):
            held, ranked = [d.run_id for d in ranked], []
        self.held = self._held_notes(held, seeds_budget)
        for decision in ranked:
            self.stopped[decision.run_id] = decision
        stops += ranked
        if extends:
            self._extension_credits = self._extensions_paid(budget, stops)
        return stops + self._find_extensions()

    def _extensions_paid(self, budget: Optional[BudgetUse], stops: list[Decision]) -> int:
        """How many survivors may be extended now: without a budget, one per stop (made now, or earlier and not
        yet used); with one, as many extensions of ``extend_survivors_by`` steps as what is left of it, plus the
        rest of the runs just stopped, pays for (an extension the scheduler skipped is asked again next time)."""
        if budget is None:
            return self._extension_credits + len(stops)
        left = budget.left + self._steps_left(d.run_id for d in stops)
        return max(0, left // self.params.extend_survivors_by)

    def describe(self) -> str:
        """What the policy does, in one sentence (the sweep form and the dashboard show it)."""
        return f"{self._describe_rule()}; smoothing {self.params.smoothing}{self._describe_guards()}"

    def _learn(self, history, config: Optional[dict] = None, risk_fit: Any = None) -> None:
        """Learn from the project's finished sweeps (``make_policy``'s ``history``): only ``bayes`` does."""

    def _describe_guards(self) -> str:
        if not self.guards:
            return ""
        bound = {"entropy_collapse": lambda g: f"< {g.below:g}", "length_at_cap": lambda g: f"> {g.above:g}",
                 "zero_std": lambda g: f"> {g.above:g}", "reward_drop": lambda g: f"{g.drop:g} below its best"}
        return "; guards: " + ", ".join(f"{g.kind} ({g.watched()} {bound[g.kind](g)} for {g.for_steps} steps)"
                                        for g in self.guards)

    def next_check(self, last_step: int, total_steps: int) -> Optional[int]:
        """The step at which a live run that reached ``last_step`` is judged next; None when it never will be
        (nothing is decided at or after a run's final step)."""
        step = self._next_step(last_step + 1)
        return step if step is not None and step < total_steps else None

    def waiting(self, last_step: int, others: Iterable[tuple[int, bool]], *, queued: bool = False) -> Optional[str]:
        """Why no decision can be made about a live run now, in words for its row on the dashboard ("waiting for
        peers at step 40: 2 of 3", "judged from step 8"); None when it is judged now, or never (manual).

        ``last_step``: the run's last step; ``others``: every other run of the sweep that has started, as (the
        step its curve counts up to: its last step, or the step this policy stopped it at; whether it is out of
        the race: ended before its final step other than by this policy's stop); ``queued``: the run waits for a
        slot. Reads no curve, so the dashboard can ask it of every row: a peer counts at step s when its curve
        reaches s (``SweepCurves.peer_values``), as the check counts it (docs/architecture.md, "Early stopping")."""
        first = self._next_step(0)
        if first is None:
            return None
        if queued:
            return f"queued; judged from step {first} once it runs"
        if last_step < first:
            return f"judged from step {first}"
        return self.record.waiting(self.params, last_step, list(others)) if self.ranks else None

    # -- for the rules ----------------------------------------------------------------------------
    def _view(self) -> SweepCurves:
        """What the rule reads: the curves, the runs out of the race, the extensions."""
        return SweepCurves(self.params, self.curves, self.stopped, self.extended, self.bounds)

    def _horizon(self, run_id: Hashable) -> int:
        return self._view().horizon(run_id)

    def _judgeable_runs(self) -> list[tuple[Hashable, RunCurve]]:
        return self._view().judgeable()

    def _format_value(self, value: float) -> str:
        return self._view().format_value(value)

    def _describe_rule(self) -> str:
        return f"{self.rule} on {self.params.metric} ({self.params.mode})"

    def _steps_left(self, run_ids: Iterable[Hashable]) -> int:
        view = self._view()
        return sum(max(view.horizon(run_id) - self.curves[run_id].last_step, 0) for run_id in run_ids)

    def _held_notes(self, held: list[Hashable], budget: Optional[BudgetUse]) -> dict[Hashable, str]:
        """run -> "would be stopped at step 12 (median), but no new seed could use its steps: budget ..." for the
        runs whose ranking stops the budget withheld (``held``, together)."""
        if not held or budget is None:
            return {}
        why = held_note(budget, self._steps_left(held))
        return {run_id: f"would be stopped at step {self.curves[run_id].last_step} ({self.rule}), but {why}"
                for run_id in held}

    def _next_step(self, after: int) -> Optional[int]:
        """The first step >= ``after`` at which this policy judges a run (grace period included)."""
        return max(after, self.params.grace())

    def _find_stops(self) -> list[Decision]:
        return self.record.stops(self._view(), self.params, self._memo)

    def _find_guard_stops(self) -> list[Decision]:
        """Live runs one of whose guards has been breached for its ``for_steps`` (past the grace period, before
        the run's final step); the first such guard in config order gives the reason."""
        grace, stops = self.params.grace(), []
        for run_id, folds in self.guard_folds.items():
            if run_id in self.stopped:
                continue
            for fold in folds:
                g = fold.params
                if not grace <= fold.last_step < self._horizon(run_id) or fold.breached_for() < g.for_steps:
                    continue
                stops.append(Decision(
                    run_id=run_id, action=STOP, rule=f"guard:{g.kind}", step=fold.last_step, value=fold.value,
                    threshold=fold.threshold(), reason=guard_reason(fold),
                    details={"guard": g.kind, "metric": g.watched(), "breach_from": fold.breach_from,
                             "for_steps": g.for_steps, "best": fold.best if g.kind == "reward_drop" else None}))
                break
        return stops

    def _find_extensions(self) -> list[Decision]:
        p, view = self.params, self._view()
        decisions = []
        while self._extension_credits > 0:
            candidates = [(run_id, curve) for run_id, curve in view.judgeable()
                          if run_id not in self.extended]
            if not candidates:
                break
            run_id, curve = min(candidates, key=lambda item: view.sort_key(item[1].last_value))
            others = [c.last_value for rid, c in self.curves.items() if rid != run_id and rid not in self.stopped]
            decision = Decision(
                run_id=run_id, action=EXTEND, rule=self.rule, step=curve.last_step, value=curve.last_value,
                threshold=curve.last_value, n_peers=len(others), extra_steps=p.extend_survivors_by,
                reason=(f"best live run: smoothed {view.format_value(curve.last_value)} at step {curve.last_step}; "
                        f"a stopped run freed a slot, so it gets {p.extend_survivors_by} more steps "
                        f"(until step {view.horizon(run_id) + p.extend_survivors_by})"))
            self.extended[run_id] = decision
            self._extension_credits -= 1
            decisions.append(decision)
        return decisions


@dataclass(frozen=True)
class Rule:
    """One early-stopping rule: all that the engine, the forms, the API and the CLI know of it. A module of
    ``policies.rules`` declares it as ``RULE = Rule(...)`` (``registry`` walks that package)."""

    name: str
    """Its name in configs (``{"name": "median"}``), the forms and the API: written here only."""
    params: type
    """Its params dataclass (``parameters``): every key documented, unknown keys rejected, ranges checked."""
    stops: Callable[[SweepCurves, Any, dict], list[Decision]]
    """(sweep, params, memo) -> its new stops, its formula in its docstring (``stopping_rules``, ``bayes``)."""
    policy: type
    """Its ``Policy`` class: when it judges a run (``next_check``), what it says it does (``describe``)."""
    waiting: Callable[[Any, int, list], Optional[str]]
    """(params, a live run's last step, the other started runs) -> what it says of a run past its first judged
    step that it cannot decide about yet, or None (``Policy.waiting``; ``stopping_rules``, ``bayes``)."""
    compares: bool = False
    """Whether it judges a run against the sweep's others (a sweep of one run gives it nothing to compare)."""

    @property
    def summary(self) -> str:
        """The first line of its policy class's docstring, as plain text (no ``literal`` marks)."""
        return (self.policy.__doc__ or "").strip().splitlines()[0].replace("``", "")

    @property
    def waiting_text(self) -> str:
        """What it says while it waits, in general: the first line of its waiting function's docstring (plain)."""
        return (self.waiting.__doc__ or "").strip().splitlines()[0].replace("``", "")


    def __post_init__(self) -> None:
        self.policy.rule, self.policy.record = self.name, self
