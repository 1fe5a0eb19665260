"""The policies: each keeps every run's smoothed curve, decides which runs stop (and which survivors a freed
slot extends), says in words what it does (``describe``) and when it looks at a run next (``next_check``)."""
from __future__ import annotations

import dataclasses
import math
import statistics
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Hashable, Iterable, Iterator, Optional

from training.fields import FieldErrors

from .guards import GuardFold, guard_reason
from .parameters import (AshaParams, BayesParams, CommonParams, ManualParams, MedianParams, ThresholdParams,
                         defaults_text, parse_params)
from .smoothing import make_smoother

STOP = "stop"
EXTEND = "extend"


@dataclass(frozen=True)
class Decision:
    """One decision about one run, with the numbers it used (the database stores every field).

    ``value`` is the run's smoothed metric that was compared, ``threshold`` what it was compared with (peer
    median, rung cut-off, bound or best-so-far), ``n_peers`` how many other runs the comparison used, and
    ``extra_steps`` how many steps an ``extend`` grants (0 for a stop), and ``details`` any further numbers the
    rule used, as JSON (``bayes``: the probability, the forecast and its interval, the peers' forecasts; empty
    for the other rules).
    """

    run_id: Hashable
    action: str
    reason: str
    rule: str
    step: int
    value: float
    threshold: float
    n_peers: int = 0
    extra_steps: int = 0
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class HistoryMissing(LookupError):
    """A curve restored from a saved state was asked for its value at a step it keeps nothing of (the database
    layer then feeds a fresh policy every stored point instead)."""


@dataclass(frozen=True)
class Checkpoint:
    """A curve as it stood at some step: its smoothed value there (at its last point at or before that step) and,
    when ``full``, its smoother's state, from which the points after that step can be smoothed again."""

    value: float
    smoother: Any = None
    full: bool = False

    def to_json(self) -> list:
        return [self.value, self.smoother] if self.full else [self.value]

    @classmethod
    def from_json(cls, saved: list) -> "Checkpoint":
        return cls(float(saved[0]), saved[1], True) if len(saved) > 1 else cls(float(saved[0]))


class _RunCurve:
    """One run's smoothed curve, point by point, with look-up of the value "at step s".

    A curve built point by point keeps every point. One restored from a saved state (``from_state``) keeps only
    what a later judgment can read: its last point, its first step, its smoother, and a checkpoint at each step of
    ``kept`` it had passed; it records a checkpoint at each kept step it passes from then on. Asked for another
    earlier step it raises HistoryMissing, unless ``refill`` put that step's checkpoint back from the stored points.
    """

    def __init__(self, new_smoother: Callable[[], Any], kept: Iterable[int] = ()):
        self.new_smoother = new_smoother
        self.smoother = new_smoother()
        self.steps: list[int] = []  # every point since the curve was built (or restored: from its last point on)
        self.smoothed: list[float] = []
        self.first_step: Optional[int] = None
        self.checkpoints: dict[int, Checkpoint] = {}
        self._ahead = sorted(kept, reverse=True)  # kept steps not reached yet, the nearest last

    @property
    def last_step(self) -> int:
        return self.steps[-1] if self.steps else -1

    @property
    def last_value(self) -> float:
        return self.smoothed[-1]

    def add(self, step: int, value: float) -> bool:
        if step <= self.last_step:
            return False
        while self._ahead and self._ahead[-1] < step:
            self._checkpoint(self._ahead.pop())  # the curve as it stands is the curve at that step
        self.steps.append(step)
        self.smoothed.append(self.smoother.update(value))
        if self.first_step is None:
            self.first_step = step
        if self._ahead and self._ahead[-1] == step:
            self._checkpoint(self._ahead.pop())
        return True

    def _checkpoint(self, step: int) -> None:
        if self.steps:  # (before the first point value_at needs nothing kept: see there)
            self.checkpoints[step] = Checkpoint(self.smoothed[-1], self.smoother.state(), full=True)

    def value_at(self, step: int) -> Optional[float]:
        """Smoothed value at the last logged step <= ``step``; None when the run has not reached ``step``."""
        if self.last_step < step:
            return None
        if step < self.first_step:
            # Before the run's first point the look-up has always given the last value (bisect's index -1 on the
            # whole curve); kept as it is, so that what a policy decides does not depend on how the curve is held.
            return self.smoothed[-1]
        if step >= self.steps[0]:
            return self.smoothed[bisect_right(self.steps, step) - 1]
        if step in self.checkpoints:
            return self.checkpoints[step].value
        raise HistoryMissing(step)

    def knows(self, step: int) -> bool:
        """Whether ``value_at(step)`` answers without raising HistoryMissing."""
        return (self.last_step < step or step < self.first_step or step >= self.steps[0]
                or step in self.checkpoints)

    def refill_from(self, step: int) -> int:
        """The step after which the stored points must be read again to know the value at ``step``: the nearest
        earlier full checkpoint, or -1 (from the first point)."""
        return max((s for s, c in self.checkpoints.items() if c.full and s <= step), default=-1)

    def refill(self, step: int, values: list[float]) -> None:
        """Put back the checkpoint at ``step`` from ``values``: the run's points after ``refill_from(step)`` up to
        ``step``, in step order, as they were fed (the smoother goes over them again from that checkpoint)."""
        start = self.refill_from(step)
        smoother, value = self.new_smoother(), None
        if start >= 0:
            smoother.load(self.checkpoints[start].smoother)
            value = self.checkpoints[start].value
        for x in values:
            value = smoother.update(float(x))
        if value is None:
            raise HistoryMissing(step)
        self.checkpoints[step] = Checkpoint(value, smoother.state(), full=True)

    def to_state(self, kept: Iterable[int]) -> dict:
        """The curve as JSON: first step, last point, smoother, and a checkpoint at each of the ``kept`` steps
        between the two (value_at answers the others by itself); one the curve still holds the point for, but
        did not record, is kept by its value."""
        checkpoints = {}
        for step in kept:
            if not self.first_step <= step < self.last_step:
                continue
            if step in self.checkpoints:
                checkpoints[str(step)] = self.checkpoints[step].to_json()
            elif step >= self.steps[0]:
                checkpoints[str(step)] = Checkpoint(self.value_at(step)).to_json()
        return {"first": self.first_step, "last": [self.last_step, self.last_value],
                "smoother": self.smoother.state(), "checkpoints": checkpoints}

    @classmethod
    def from_state(cls, new_smoother: Callable[[], Any], saved: dict, kept: Iterable[int]) -> "_RunCurve":
        """The curve ``to_state`` saved, going on from its last point."""
        curve = cls(new_smoother)
        step, value = saved["last"]
        curve.steps, curve.smoothed, curve.first_step = [int(step)], [float(value)], int(saved["first"])
        curve.smoother.load(saved["smoother"])
        curve.checkpoints = {int(s): Checkpoint.from_json(c) for s, c in saved["checkpoints"].items()}
        curve._ahead = sorted((s for s in kept if s > curve.last_step), reverse=True)
        return curve


def _too_few_peers(step: int, others: list[tuple[int, bool]], min_peers: int, what: str = "peers") -> Optional[str]:
    """"waiting for peers at step 40: 2 of 3" when fewer than ``min_peers`` of ``others`` (reached step, ended
    early) reached ``step``; else None.

    >>> _too_few_peers(40, [(40, False), (55, True), (12, True)], 3)
    'waiting for peers at step 40: 2 of 3'
    >>> _too_few_peers(40, [(40, False), (55, True), (41, False)], 3) is None
    True
    """
    n = sum(1 for reached, _ in others if reached >= step)
    return f"waiting for {what} at step {step}: {n} of {min_peers}" if n < min_peers else None


class Policy:
    """Base class: keeps the curves, applies grace and the once-per-run rule; subclasses find the stops."""

    rule = "manual"
    ranks = True  # whether it ranks runs on its metric (manual does not; its guards may still stop runs)
    compares_peers = False  # whether it judges a run against other runs (min_peers matters: feasibility.py)

    def __init__(self, params: CommonParams):
        self.params = params
        self.curves: dict[Hashable, _RunCurve] = {}
        self.stopped: dict[Hashable, Optional[Decision]] = {}  # None: ended for another reason (mark_stopped)
        self.extended: dict[Hashable, Decision] = {}
        self._extension_credits = 0
        self.guards = list(params.guards)
        self.guard_folds: dict[Hashable, list[GuardFold]] = {}  # run -> one fold per guard, in guards' order
        self._kept: frozenset[int] = frozenset()  # steps each curve records a checkpoint at (keep_history_at)
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
            curve = self.curves[run_id] = _RunCurve(self._new_smoother, self._kept)
        return curve.add(step, value)

    def metrics(self) -> list[str]:
        """The metrics this policy reads: its own (none for manual) and its guards'."""
        names = [self.params.metric] if self.params.metric else []
        return names + sorted({g.watched() for g in self.guards} - set(names))

    @property
    def reads_curves(self) -> bool:
        """Whether the database layer must feed it the sweep's curves."""
        return self.ranks or bool(self.guards)

    def tell_stop(self, decision: Decision) -> None:
        """Tell the policy about a stop it decided in an earlier check (the database layer replays ``decide`` from
        the plan's ``policy_step`` on, with nothing ``decide`` set up before: a rule whose later stops depend on
        its earlier ones reads them here). Most rules need nothing of it."""

    def mark_stopped(self, run_id: Hashable) -> None:
        """Tell the policy that ``run_id`` ended for another reason (a user killed it, it failed): no decision is
        made about it from now on; the points it logged still count for its peers. A database layer that
        rebuilds a policy from stored metrics calls this for every run that already ended before ``decide``."""
        self.stopped.setdefault(run_id, None)

    def decide(self) -> list[Decision]:
        """New decisions since the last call: stops first (the guards', then the ranking's), then any extensions
        the stops paid for."""
        stops = self._find_guard_stops()
        for decision in stops:
            self.stopped[decision.run_id] = decision
        ranked = self._find_stops()
        for decision in ranked:
            self.stopped[decision.run_id] = decision
        stops += ranked
        self._extension_credits += len(stops) if self.params.extend_survivors_by > 0 else 0
        return stops + self._find_extensions()

    def describe(self) -> str:
        """What the policy does, in one sentence (the sweep form and the dashboard show it)."""
        return f"{self._describe_rule()}; smoothing {self.params.smoothing}{self._describe_guards()}"

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
        slot. Reads no curve, so the dashboard can ask it of
        every row: a peer counts at step s when its curve reaches s (``peer_values``), as the check counts it
        (docs/architecture.md, "Early stopping")."""
        first = self._next_step(0)
        if first is None:
            return None
        if queued:
            return f"queued; judged from step {first} once it runs"
        if last_step < first:
            return f"judged from step {first}"
        return self._waiting_for_peers(last_step, list(others)) if self.ranks else None

    def _waiting_for_peers(self, last_step: int, others: list[tuple[int, bool]]) -> Optional[str]:
        """The rule judges a run at its last step against the peers that reached it (at least ``min_peers``)."""
        return _too_few_peers(last_step, others, self.params.min_peers)

    def stored_config(self, config: dict) -> dict:
        """What a sweep keeps of the config this policy was built from."""
        return dict(config)

    # -- saving the curves between checks (the database layer, webapp.sweeps.policy_check) ----------
    def history_steps(self) -> set[int]:
        """Steps, besides each run's last one, at which a later ``decide`` may read a run's smoothed value. A
        curve restored from a saved state keeps its value at these and forgets the rest of its past."""
        return set()

    def keep_history_at(self, steps: Iterable[int]) -> None:
        """Make every curve built from now on record a checkpoint at each of ``steps`` as it passes it (call it
        before the first ``observe``; ``load_state`` does)."""
        self._kept = frozenset(steps)

    def save_state(self) -> dict:
        """The curves as JSON, in their order: each run's ``_RunCurve.to_state`` (checkpoints at the steps of
        ``history_steps``) and what the policy itself carries per run from one point to the next
        (``_run_state``). What ``decide`` changes (stops, rung records, extensions) is not in it."""
        kept = sorted(self.history_steps())
        state = {"kept": kept, "runs": [[run_id, {**curve.to_state(kept), **self._run_state(run_id, curve)}]
                                        for run_id, curve in self.curves.items()]}
        if self.guard_folds:
            state["guards"] = [[run_id, [fold.state() for fold in folds]] for run_id, folds in self.guard_folds.items()]
        return state

    def load_state(self, state: dict) -> None:
        """Put back the curves ``save_state`` saved, into a fresh policy: observing the points after each run's
        last one then leaves the curves as observing every point would have."""
        self.keep_history_at(set(state["kept"]) | self.history_steps())
        for run_id, saved in state["runs"]:
            self.curves[run_id] = _RunCurve.from_state(self._new_smoother, saved, self._kept)
            self._load_run_state(run_id, saved)
        for run_id, saved in state.get("guards", ()):
            folds = self.guard_folds[run_id] = [GuardFold(g) for g in self.guards]
            if len(saved) != len(folds):
                raise ValueError(f"run {run_id}: {len(saved)} guard states saved for {len(folds)} guards")
            for fold, fold_state in zip(folds, saved):
                fold.load(fold_state)

    def last_steps(self) -> dict[Hashable, int]:
        """Each run's last observed step (a restored curve's: the last one it was fed before it was saved); with
        guards, the earliest of its curve's and its guards' (a feed from there repeats no point any of them takes:
        each ignores steps it has seen)."""
        steps = {run_id: curve.last_step for run_id, curve in self.curves.items()}
        for run_id, folds in self.guard_folds.items():
            fed = [fold.last_step for fold in folds if fold.last_step >= 0]
            if fed:
                steps[run_id] = min(fed + ([steps[run_id]] if run_id in steps else []))
        return steps

    def order_runs(self, key: Callable[[Hashable, "_RunCurve"], Any]) -> None:
        """Put the curves in the order of ``key(run_id, curve)``: runs are judged in curve order, and of equally
        good candidates for an extension the first wins, so a layer that restores curves and adds new ones
        puts them back in the order its feed would have created them in."""
        self.curves = dict(sorted(self.curves.items(), key=lambda item: key(*item)))

    def missing_history(self) -> Iterator[tuple[int, dict[Hashable, int]]]:
        """Each step of ``history_steps`` (in order) some restored curve does not know its value at, with run ->
        the step after which that run's points must be read again (``refill``). A generator: what is refilled at
        one step is a nearer start for the next."""
        for step in sorted(self.history_steps()):
            missing = {run_id: curve.refill_from(step) for run_id, curve in self.curves.items()
                       if not curve.knows(step)}
            if missing:
                yield step, missing

    def refill(self, run_id: Hashable, step: int, values: list[float]) -> None:
        """Give a restored curve back its value at ``step``: ``values`` are the run's points after the step
        ``missing_history`` named up to ``step``, in step order."""
        self.curves[run_id].refill(step, values)

    def _run_state(self, run_id: Hashable, curve: _RunCurve) -> dict:
        return {}

    def _load_run_state(self, run_id: Hashable, saved: dict) -> None:
        pass

    # -- helpers for subclasses ------------------------------------------------------------------
    def _describe_rule(self) -> str:
        return f"{self.rule} on {self.params.metric} ({self.params.mode})"

    def _next_step(self, after: int) -> Optional[int]:
        """The first step >= ``after`` at which this policy judges a run (grace period included)."""
        return max(after, self.params.grace())

    def _find_stops(self) -> list[Decision]:
        return []

    def _find_guard_stops(self) -> list[Decision]:
        """Live runs one of whose guards has been breached for its ``for_steps`` (past the grace period, before
        the run's final step); the first such guard in config order gives the reason."""
        grace, stops = self.params.grace(), []
        for run_id, folds in self.guard_folds.items():
            if run_id in self.stopped:
                continue
            for fold in folds:
                g = fold.params
                if not grace <= fold.last_step < self.horizon(run_id) or fold.breached_for() < g.for_steps:
                    continue
                stops.append(Decision(
                    run_id=run_id, action=STOP, rule=f"guard:{g.kind}", step=fold.last_step, value=fold.value,
                    threshold=fold.threshold(), reason=guard_reason(fold),
                    details={"guard": g.kind, "metric": g.watched(), "breach_from": fold.breach_from,
                             "for_steps": g.for_steps, "best": fold.best if g.kind == "reward_drop" else None}))
                break
        return stops

    def horizon(self, run_id: Hashable) -> int:
        extension = self.extended.get(run_id)
        return self.params.max_steps + (extension.extra_steps if extension else 0)

    def judgeable_runs(self) -> list[tuple[Hashable, _RunCurve]]:
        """Live runs past the grace period and before their final step (only these can be stopped)."""
        grace = self.params.grace()
        return [(run_id, curve) for run_id, curve in self.curves.items()
                if run_id not in self.stopped and curve.steps
                and grace <= curve.last_step < self.horizon(run_id)]

    def peer_count(self, run_id: Hashable, step: int) -> int:
        """How many other runs reached ``step`` (``len(peer_values(...))`` without reading their values)."""
        return sum(1 for other_id, other in self.curves.items() if other_id != run_id and other.last_step >= step)

    def peer_values(self, run_id: Hashable, step: int) -> list[float]:
        """Smoothed values at ``step`` of every other run that reached it (stopped ones included)."""
        values = []
        for other_id, other in self.curves.items():
            if other_id == run_id:
                continue
            value = other.value_at(step)
            if value is not None:
                values.append(value)
        return values

    def worse(self, value: float, reference: float, margin: float = 0.0) -> bool:
        """True when ``value`` is worse than ``reference`` by more than ``margin`` (per ``mode``)."""
        if self.params.mode == "max":
            return value < reference - margin
        return value > reference + margin

    def sort_key(self, value: float) -> float:
        """Sort key putting the best values first."""
        return -value if self.params.mode == "max" else value

    def format_value(self, value: float) -> str:
        return f"{self.params.metric} {value:.4g}"

    def _find_extensions(self) -> list[Decision]:
        p = self.params
        decisions = []
        while self._extension_credits > 0:
            candidates = [(run_id, curve) for run_id, curve in self.judgeable_runs()
                          if run_id not in self.extended]
            if not candidates:
                break
            run_id, curve = min(candidates, key=lambda item: self.sort_key(item[1].last_value))
            others = [c.last_value for rid, c in self.curves.items() if rid != run_id and rid not in self.stopped]
            decision = Decision(
                run_id=run_id, action=EXTEND, rule=self.rule, step=curve.last_step, value=curve.last_value,
                threshold=curve.last_value, n_peers=len(others), extra_steps=p.extend_survivors_by,
                reason=(f"best live run: smoothed {self.format_value(curve.last_value)} at step {curve.last_step}; "
                        f"a stopped run freed a slot, so it gets {p.extend_survivors_by} more steps "
                        f"(until step {self.horizon(run_id) + p.extend_survivors_by})"))
            self.extended[run_id] = decision
            self._extension_credits -= 1
            decisions.append(decision)
        return decisions


class ManualPolicy(Policy):
    """Never decides: runs are stopped by hand from the dashboard."""

    rule = "manual"
    ranks = False

    def describe(self) -> str:
        if self.guards:
            return f"manual: no ranking; runs are stopped from the dashboard{self._describe_guards()}"
        return "manual: runs are stopped only from the dashboard"

    def _next_step(self, after: int) -> Optional[int]:
        return super()._next_step(after) if self.guards else None

    def metrics(self) -> list[str]:
        return sorted({g.watched() for g in self.guards})  # no ranking metric: only the guards read curves

    def stored_config(self, config: dict) -> dict:
        if self.guards:  # guards alone: what they need to judge (max_steps, grace) and nothing else
            return {key: config[key] for key in ("name", "guards", "max_steps", "grace_steps") if key in config}
        return {}  # an empty policy is a manual sweep


class MedianStoppingPolicy(Policy):
    """Stop a run whose smoothed metric at step s is worse than the median of its peers' at step s.

    Peers are the other runs that reached step s (stopped and finished runs count with their value at s). In a
    sweep where every seed runs at once this keeps halving the field after the grace period until a run has
    fewer than ``min_peers`` peers left, i.e. about ``min_peers`` runs survive (Golovin et al. 2017 compare
    with completed trials; here there may be none, so the sweep's own runs at the same step are the peers).
    """

    compares_peers = True

    rule = "median"

    def _describe_rule(self) -> str:
        p: MedianParams = self.params  # type: ignore[assignment]
        every = f"every {p.eval_every} steps" if p.eval_every > 1 else "every step"
        return (f"median on {p.metric} ({p.mode}): {every} from step {p.grace()}, a run more than "
                f"{p.min_delta:g} worse than the median of at least {p.min_peers} peers stops")

    def _next_step(self, after: int) -> Optional[int]:
        p: MedianParams = self.params  # type: ignore[assignment]
        start = max(after, p.grace())
        return start + (-(start - p.grace())) % p.eval_every

    def _waiting_for_peers(self, last_step: int, others: list[tuple[int, bool]]) -> Optional[str]:
        """Judged at its last step of the ``eval_every`` grid from the grace step."""
        p: MedianParams = self.params  # type: ignore[assignment]
        step = p.grace() + (last_step - p.grace()) // p.eval_every * p.eval_every
        return _too_few_peers(step, others, p.min_peers)

    def history_steps(self) -> set[int]:
        """Where the runs stand: a run is judged at its last step against its peers' values there, and a run that
        logs nothing more (stopped, waiting in the queue) or is far behind (started late) stays below its peers'
        last steps. And the first step judged: a run that starts late is first compared there, and a
        checkpoint there spares re-reading its peers' points from their first one."""
        grace = self.params.grace()
        return {self._next_step(0)} | {c.last_step for c in self.curves.values() if c.last_step >= grace}

    def _find_stops(self) -> list[Decision]:
        p: MedianParams = self.params  # type: ignore[assignment]
        grace = p.grace()
        stops = []
        # Judge every run against the same data (stops are applied after the pass), so order does not matter.
        for run_id, curve in self.judgeable_runs():
            step = curve.last_step
            if (step - grace) % p.eval_every:
                continue
            peers = self.peer_values(run_id, step)
            if len(peers) < p.min_peers:
                continue
            median = statistics.median(peers)
            value = curve.last_value
            if self.worse(value, median, p.min_delta):
                margin = f" by more than {p.min_delta:g}" if p.min_delta else ""
                stops.append(Decision(
                    run_id=run_id, action=STOP, rule=self.rule, step=step, value=value, threshold=median,
                    n_peers=len(peers),
                    reason=(f"median rule: smoothed {self.format_value(value)} at step {step} is "
                            f"{'below' if p.mode == 'max' else 'above'} the median {median:.4g} of "
                            f"{len(peers)} peers at that step{margin}")))
        return stops


class AshaPolicy(Policy):
    """Asynchronous successive halving: at each rung only the top 1/eta of the runs that reached it continue.

    A run's rung value is its smoothed metric at the rung step. A run is judged at a rung as soon as at least
    ``min_peers`` other runs have a value there (until then it keeps running and is judged later, at whatever
    step it has reached): it continues when it ranks within the top max(1, floor(n/eta)) of the n values
    recorded at that rung so far (runs stopped earlier at that rung included, and runs that ended: finished,
    killed, or stopped at a later rung), otherwise it is stopped.
    """

    compares_peers = True

    rule = "asha"

    def __init__(self, params: AshaParams):
        super().__init__(params)
        self.rung_steps = params.rungs()
        # rung index -> run_id -> smoothed value at the rung, in arrival order
        self.rung_values: list[dict[Hashable, float]] = [{} for _ in self.rung_steps]
        self.passed: list[set] = [set() for _ in self.rung_steps]

    def _describe_rule(self) -> str:
        p: AshaParams = self.params  # type: ignore[assignment]
        return (f"asha on {p.metric} ({p.mode}): rungs at steps {', '.join(map(str, self.rung_steps)) or 'none'}; "
                f"the top 1/{p.eta} at each rung continue (min {p.min_peers} peers)")

    def _next_step(self, after: int) -> Optional[int]:
        return next((rung for rung in self.rung_steps if rung >= after), None)

    def _waiting_for_peers(self, last_step: int, others: list[tuple[int, bool]]) -> Optional[str]:
        """Pending at the first rung it reached that fewer than ``min_peers`` other runs reached."""
        p: AshaParams = self.params  # type: ignore[assignment]
        return next((why for rung in self.rung_steps if rung <= last_step
                     and (why := _too_few_peers(rung, others, p.min_peers))), None)

    def history_steps(self) -> set[int]:
        """The rungs: a run's value is recorded (again, in each check's replay) at every rung it reached."""
        return set(self.rung_steps)

    def _find_stops(self) -> list[Decision]:
        p: AshaParams = self.params  # type: ignore[assignment]
        # 1. record every run's value at each rung it reached: a finished, killed or stopped peer's curve (up to
        #    its last step, or the step it was stopped at) counts at the rungs it reached, so a sweep that runs
        #    its seeds one at a time compares a seed with the seeds before it
        for run_id, curve in self.curves.items():
            for k, rung in enumerate(self.rung_steps):
                value = curve.value_at(rung)
                if run_id not in self.rung_values[k] and value is not None:
                    self.rung_values[k][run_id] = value
        # 2. judge pending runs, lowest rung first, each against everything recorded at its rung
        stops: dict[Hashable, Decision] = {}
        for k, rung in enumerate(self.rung_steps):
            recorded = self.rung_values[k]
            n = len(recorded)
            if n - 1 < p.min_peers:
                continue
            keep = max(1, n // p.eta)
            ranked = sorted(recorded.values(), key=self.sort_key)
            cutoff = ranked[keep - 1]
            for run_id, value in recorded.items():
                if run_id in self.passed[k] or run_id in self.stopped or run_id in stops:
                    continue
                curve = self.curves[run_id]
                if curve.last_step >= self.horizon(run_id):
                    continue  # already at its final step: stopping saves nothing
                if self.worse(value, cutoff):
                    rank = 1 + sum(1 for v in recorded.values() if self.sort_key(v) < self.sort_key(value))
                    stops[run_id] = Decision(
                        run_id=run_id, action=STOP, rule=self.rule, step=curve.last_step, value=value,
                        threshold=cutoff, n_peers=n - 1,
                        reason=(f"asha rung {k} (step {rung}): smoothed {self.format_value(value)} ranks {rank} of "
                                f"{n}; only the top {keep} (1/{p.eta}) continue, cut-off {cutoff:.4g}"))
                else:
                    self.passed[k].add(run_id)
        return list(stops.values())


class ThresholdPolicy(Policy):
    """Stop a run whose smoothed metric crosses a bound, or has not improved for ``patience`` steps."""

    rule = "threshold"

    def __init__(self, params: ThresholdParams):
        super().__init__(params)
        self.best: dict[Hashable, tuple[int, float]] = {}  # run_id -> (step, best smoothed value so far)

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

    def _update_best(self, run_id: Hashable, curve: _RunCurve) -> tuple[int, float]:
        """The best smoothed value so far and its step: a fold over the curve (a point improves on the best by
        more than ``min_delta`` or not), so it comes out the same whenever it is updated; it goes on from the
        points after the best one."""
        p: ThresholdParams = self.params  # type: ignore[assignment]
        if run_id not in self.best and curve.steps[0] != curve.first_step:
            raise HistoryMissing(curve.first_step)  # a restored curve comes with its best (_load_run_state)
        best_step, best = self.best.get(run_id, (curve.steps[0], curve.smoothed[0]))
        for i in range(bisect_right(curve.steps, best_step), len(curve.steps)):
            if self.worse(best, curve.smoothed[i], p.min_delta):  # improves on best by more than min_delta
                best_step, best = curve.steps[i], curve.smoothed[i]
        self.best[run_id] = (best_step, best)
        return best_step, best

    def _run_state(self, run_id: Hashable, curve: _RunCurve) -> dict:
        return {"best": list(self._update_best(run_id, curve))}

    def _load_run_state(self, run_id: Hashable, saved: dict) -> None:
        step, value = saved["best"]
        self.best[run_id] = (int(step), float(value))

    def _find_stops(self) -> list[Decision]:
        p: ThresholdParams = self.params  # type: ignore[assignment]
        stops = []
        for run_id, curve in self.judgeable_runs():
            best_step, best = self._update_best(run_id, curve)
            step, value = curve.last_step, curve.last_value
            n_peers = self.peer_count(run_id, step)
            if n_peers < p.min_peers:
                continue
            decision = None
            if p.lower_bound is not None and value < p.lower_bound:
                decision = (f"threshold: smoothed {self.format_value(value)} at step {step} fell below the lower bound "
                            f"{p.lower_bound:g}", p.lower_bound, "threshold")
            elif p.upper_bound is not None and value > p.upper_bound:
                decision = (f"threshold: smoothed {self.format_value(value)} at step {step} rose above the upper bound "
                            f"{p.upper_bound:g}", p.upper_bound, "threshold")
            elif p.patience is not None and step - best_step >= p.patience:
                decision = (f"patience: smoothed {self.format_value(value)} at step {step} has not improved on the best "
                            f"{best:.4g} (step {best_step}) by more than {p.min_delta:g} for {step - best_step} "
                            f"steps (patience {p.patience})", best, "patience")
            if decision:
                reason, threshold, rule = decision
                stops.append(Decision(run_id=run_id, action=STOP, rule=rule, step=step, value=value,
                                      threshold=threshold, n_peers=n_peers, reason=reason))
        return stops


from .bayes import BayesPolicy  # noqa: E402  (it subclasses Policy, defined above)

_REGISTRY: dict[str, tuple[type, type]] = {
    "manual": (ManualParams, ManualPolicy),
    "median": (MedianParams, MedianStoppingPolicy),
    "asha": (AshaParams, AshaPolicy),
    "threshold": (ThresholdParams, ThresholdPolicy),
    "bayes": (BayesParams, BayesPolicy),
}
POLICY_NAMES = tuple(_REGISTRY)


def parse_config(config: dict) -> CommonParams:
    """Validate a policy config; raises FieldErrors naming every bad key. An empty config (or no name) is
    manual."""
    if not isinstance(config, dict):
        raise FieldErrors({"config": f"expected a mapping; got {type(config).__name__}"})
    name = config.get("name") or "manual"
    if not isinstance(name, str) or name not in _REGISTRY:
        raise FieldErrors({"name": f"must be one of {', '.join(POLICY_NAMES)}; got {name!r}"})
    params_cls, _ = _REGISTRY[name]
    return parse_params(params_cls, {**config, "name": name})


def make_policy(config: dict) -> Policy:
    """Build a policy from ``{"name": ..., "metric": ..., "mode": ..., "max_steps": ..., other keys}``.

    ``metric`` and ``max_steps`` are required by every policy but manual (the default, also for ``{}``); every
    other key has the default documented on its params dataclass (``CommonParams`` plus ``MedianParams``,
    ``AshaParams``, ``ThresholdParams`` or ``BayesParams``).
    """
    params = parse_config(config)
    _, policy_cls = _REGISTRY[config.get("name") or "manual"]
    return policy_cls(params)


def params_help() -> str:
    """Every policy parameter and its default, for the sweep form."""
    return defaults_text({name: params_cls for name, (params_cls, _) in _REGISTRY.items()})
