"""Early-stopping policies for seed sweeps (DESIGN §5).

Pure Python, importing no Django, so a sweep can be replayed offline (``replay``, ``bench/early_stopping.py``)
and the database layer can feed a policy the curves it stores and apply what it decides.

    policy = make_policy({"name": "median", "metric": "reward/mean", "mode": "max", "max_steps": 40})
    policy.observe("seed-3", step=12, value=0.41)      # one call per logged point, any run order
    for decision in policy.decide():                   # each run is stopped at most once
        ...  # decision.run_id, .action ("stop" | "extend"), .reason, .rule, .step, .value, .threshold

Policies (``name``):

- ``manual``: never decides (kill buttons only).
- ``median``: median stopping rule (Golovin et al., "Google Vizier", KDD 2017): stop a run whose smoothed metric
  at step s is worse than the median of its peers' smoothed values at step s.
- ``asha``: asynchronous successive halving (Li et al., "A System for Massively Parallel Hyperparameter
  Tuning", MLSys 2020): rungs at ``min_steps * eta**k`` below ``max_steps``; at each rung only the top
  ``1/eta`` of the runs that reached it continue.
- ``threshold``: stop when the smoothed metric crosses a bound (``lower_bound`` / ``upper_bound``, e.g.
  entropy collapsing below 0.05) or has not improved by ``min_delta`` for ``patience`` steps.

What every policy shares (``CommonParams``): the metric is smoothed per run (debiased EMA by default), no run is
judged before ``grace_steps``, and a comparison needs at least ``min_peers`` other runs that reached the same
step, so one noisy batch or a lonely early run does not kill a seed. ``mode`` says whether larger (``max``) or
smaller (``min``) values are better. A run is never judged at or after its final step (stopping it would
save nothing), points a run logs after its stop are ignored, and a run gets at most one stop and one
extension. ``mark_stopped(run_id)`` tells the policy about a run that ended otherwise (killed by a user).

Steps: a run with ``max_steps`` steps logs steps ``1 .. max_steps`` (the training loop's convention: step k
is the k-th completed step); points must arrive in increasing step order per run, and a repeated or older step is ignored, so the database
layer may feed the same rows twice.

Extensions (optional, ``extend_survivors_by: N`` > 0): every stop frees a slot; ``decide`` then proposes to
extend the best live run (highest smoothed value at its latest step, past the grace period, not extended
before) by N steps, one proposal per freed slot. The scheduler applies an extension only when the sweep has
no queued seed left (a queued seed takes a freed slot first).
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any, Hashable, Iterable, Optional, Sequence

from training.fields import FieldErrors, coerce

__all__ = [
    "Decision", "CommonParams", "MedianParams", "AshaParams", "ThresholdParams",
    "make_policy", "replay", "ReplayResult", "debiased_ema", "running_mean", "smooth", "POLICY_NAMES",
]

STOP = "stop"
EXTEND = "extend"
SMOOTHING_KINDS = ("ema", "mean", "none")
MODES = ("max", "min")


@dataclass(frozen=True)
class Decision:
    """One decision about one run, with the numbers it used (the database stores every field).

    ``value`` is the run's smoothed metric that was compared, ``threshold`` what it was compared with (peer
    median, rung cut-off, bound or best-so-far), ``n_peers`` how many other runs the comparison used, and
    ``extra_steps`` how many steps an ``extend`` grants (0 for a stop).
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

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# --------------------------------------------------------------------------------------------------
# Smoothing
# --------------------------------------------------------------------------------------------------

def debiased_ema(values: Iterable[float], weight: float) -> list[float]:
    """Exponential moving average with Adam's bias correction (TensorBoard's smoothing slider).

    m_t = w * m_{t-1} + (1 - w) * x_t with m_0 = 0, and s_t = m_t / (1 - w**t) for t = 1, 2, ...
    Dividing by 1 - w**t removes the pull toward 0 of the first points, so s_1 = x_1 and a constant curve
    stays constant.

    >>> debiased_ema([1.0, 1.0, 1.0], 0.9)
    [1.0, 1.0, 1.0]
    >>> [round(v, 4) for v in debiased_ema([0.0, 1.0], 0.5)]
    [0.0, 0.6667]
    """
    smoother = _EmaSmoother(weight)
    return [smoother.update(x) for x in values]


def running_mean(values: Iterable[float], window: int) -> list[float]:
    """Mean of the last ``window`` values (fewer at the start): s_t = mean(x_{max(1, t-window+1)} .. x_t).

    >>> running_mean([1.0, 2.0, 3.0, 4.0], 2)
    [1.0, 1.5, 2.5, 3.5]
    """
    smoother = _WindowSmoother(window)
    return [smoother.update(x) for x in values]


def smooth(values: Iterable[float], kind: str = "ema", weight: float = 0.6, window: int = 5) -> list[float]:
    """Smooth a whole curve as a policy does point by point (``kind``: ema, mean or none)."""
    smoother = _make_smoother(kind, weight, window)
    return [smoother.update(x) for x in values]


class _EmaSmoother:
    def __init__(self, weight: float):
        self.weight = weight
        self.biased = 0.0
        self.count = 0

    def update(self, x: float) -> float:
        self.count += 1
        self.biased = self.weight * self.biased + (1.0 - self.weight) * x
        if self.weight == 0.0:
            return self.biased
        return self.biased / (1.0 - self.weight ** self.count)


class _WindowSmoother:
    def __init__(self, window: int):
        self.window = window
        self.recent: list[float] = []

    def update(self, x: float) -> float:
        self.recent.append(x)
        if len(self.recent) > self.window:
            self.recent.pop(0)
        return sum(self.recent) / len(self.recent)


class _IdentitySmoother:
    def update(self, x: float) -> float:
        return x


def _make_smoother(kind: str, weight: float, window: int):
    if kind == "ema":
        return _EmaSmoother(weight)
    if kind == "mean":
        return _WindowSmoother(window)
    return _IdentitySmoother()


# --------------------------------------------------------------------------------------------------
# Config: one dataclass per policy, every field documented, unknown keys rejected
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CommonParams:
    """Keys every policy accepts."""

    metric: str
    """The logged metric the policy watches, e.g. ``reward/mean``, ``accuracy``, ``entropy``."""
    max_steps: int
    """Steps each run is configured for (the run's ``total_steps``); nothing is decided at step ``max_steps``."""
    mode: str = "max"
    """``max`` when larger values are better (reward, accuracy), ``min`` when smaller are (loss)."""
    smoothing: str = "ema"
    """How each run's curve is smoothed before any comparison: ``ema`` (debiased EMA), ``mean`` (running
    mean over ``smoothing_window`` points) or ``none``."""
    smoothing_weight: float = 0.8
    """EMA weight w in [0, 1): s_t = w*s_(t-1) + (1-w)*x_t, debiased; higher is smoother."""
    smoothing_window: int = 5
    """Window of the running mean (``smoothing: mean``)."""
    grace_steps: Optional[int] = None
    """No run is judged before this step. Empty means 20 % of ``max_steps`` (rounded up)."""
    min_peers: int = 3
    """A comparison needs at least this many other runs that reached the same step (0 allowed for
    ``threshold``, which needs no peers)."""
    extend_survivors_by: int = 0
    """When > 0, every stop also proposes to extend the best live run by this many steps (0 = never)."""

    def grace(self) -> int:
        return self.grace_steps if self.grace_steps is not None else math.ceil(0.2 * self.max_steps)

    def errors(self) -> dict[str, str]:
        e: dict[str, str] = {}
        if not self.metric.strip():
            e["metric"] = "must name a logged metric; got an empty string"
        if self.max_steps < 2:
            e["max_steps"] = f"must be at least 2; got {self.max_steps}"
        if self.mode not in MODES:
            e["mode"] = f"must be one of {', '.join(MODES)}; got {self.mode!r}"
        if self.smoothing not in SMOOTHING_KINDS:
            e["smoothing"] = f"must be one of {', '.join(SMOOTHING_KINDS)}; got {self.smoothing!r}"
        if not 0.0 <= self.smoothing_weight < 1.0:
            e["smoothing_weight"] = f"must lie in [0, 1); got {self.smoothing_weight}"
        if self.smoothing_window < 1:
            e["smoothing_window"] = f"must be at least 1; got {self.smoothing_window}"
        if self.grace_steps is not None and not 0 <= self.grace_steps < self.max_steps:
            e["grace_steps"] = f"must lie in [0, max_steps) = [0, {self.max_steps}); got {self.grace_steps}"
        if self.min_peers < 0:
            e["min_peers"] = f"must be 0 or more; got {self.min_peers}"
        if self.extend_survivors_by < 0:
            e["extend_survivors_by"] = f"must be 0 or more; got {self.extend_survivors_by}"
        return e


@dataclass(frozen=True)
class ManualParams(CommonParams):
    """Manual: the policy never decides; runs are stopped from the dashboard only."""


@dataclass(frozen=True)
class MedianParams(CommonParams):
    """Median stopping rule."""

    min_delta: float = 0.05
    """Stop only when the run is worse than the peer median by more than this margin, in the metric's units
    (the default suits rewards and accuracies in [0, 1]; set it for other scales)."""
    eval_every: int = 1
    """Judge a run every this many steps after the grace period (1 = every step)."""

    def errors(self) -> dict[str, str]:
        e = super().errors()
        if self.min_peers < 1:
            e["min_peers"] = f"must be at least 1 for the median rule; got {self.min_peers}"
        if self.min_delta < 0:
            e["min_delta"] = f"must be 0 or more; got {self.min_delta}"
        if self.eval_every < 1:
            e["eval_every"] = f"must be at least 1; got {self.eval_every}"
        return e


@dataclass(frozen=True)
class AshaParams(CommonParams):
    """Asynchronous successive halving."""

    min_steps: Optional[int] = None
    """First rung (r in r*eta**k). Empty means 25 % of ``max_steps`` (rounded up), but not before the grace
    period."""
    eta: int = 2
    """Reduction factor: at each rung only the top 1/eta of the runs that reached it continue."""

    def rungs(self) -> list[int]:
        """Rung steps r*eta**k that lie before the final step ``max_steps`` and not before the grace period."""
        first = self.min_steps if self.min_steps is not None else max(1, self.grace(), math.ceil(0.25 * self.max_steps))
        rungs, rung = [], first
        while rung < self.max_steps:
            if rung >= self.grace():
                rungs.append(rung)
            rung *= self.eta
        return rungs

    def errors(self) -> dict[str, str]:
        e = super().errors()
        if self.min_peers < 1:
            e["min_peers"] = f"must be at least 1 for asha; got {self.min_peers}"
        if self.eta < 2:
            e["eta"] = f"must be at least 2; got {self.eta}"
        if self.min_steps is not None and not 1 <= self.min_steps < self.max_steps:
            e["min_steps"] = f"must lie in [1, max_steps) = [1, {self.max_steps}); got {self.min_steps}"
        return e


@dataclass(frozen=True)
class ThresholdParams(CommonParams):
    """Threshold / patience."""

    lower_bound: Optional[float] = None
    """Stop when the smoothed metric falls below this (e.g. entropy collapse). Empty = off."""
    upper_bound: Optional[float] = None
    """Stop when the smoothed metric rises above this (e.g. response length at the cap). Empty = off."""
    patience: Optional[int] = None
    """Stop when the smoothed metric has not improved (per ``mode``) by ``min_delta`` for this many steps.
    Empty = off."""
    min_delta: float = 0.0
    """Smallest change that counts as an improvement for ``patience``."""
    min_peers: int = 0
    """Threshold rules need no peers; set > 0 to act only once this many other runs reached the step."""

    def errors(self) -> dict[str, str]:
        e = super().errors()
        if self.lower_bound is None and self.upper_bound is None and self.patience is None:
            e["lower_bound"] = "set at least one of lower_bound, upper_bound, patience"
        if self.lower_bound is not None and self.upper_bound is not None and self.lower_bound >= self.upper_bound:
            e["upper_bound"] = f"must be greater than lower_bound ({self.lower_bound}); got {self.upper_bound}"
        if self.patience is not None and self.patience < 1:
            e["patience"] = f"must be at least 1 (or empty for off); got {self.patience}"
        if self.min_delta < 0:
            e["min_delta"] = f"must be 0 or more; got {self.min_delta}"
        return e


def _parse_params(cls: type, config: dict) -> CommonParams:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    errors: dict[str, str] = {}
    kwargs: dict[str, Any] = {}
    for key, value in config.items():
        if key == "name":
            continue
        if key not in fields:
            errors[key] = f"unknown key {key!r} for policy {config['name']!r}; allowed: {', '.join(sorted(fields))}"
            continue
        try:
            kwargs[key] = coerce(value, fields[key].type)
        except ValueError as exc:
            errors[key] = str(exc)
    for name, f in fields.items():
        if f.default is dataclasses.MISSING and name not in config:
            errors[name] = "is required"
    if errors:
        raise FieldErrors(errors)
    params = cls(**kwargs)
    errors = params.errors()
    if errors:
        raise FieldErrors(errors)
    return params


# --------------------------------------------------------------------------------------------------
# Per-run curve store
# --------------------------------------------------------------------------------------------------

class _RunCurve:
    """One run's smoothed curve, point by point, with look-up of the value "at step s"."""

    def __init__(self, smoother):
        self.smoother = smoother
        self.steps: list[int] = []
        self.smoothed: list[float] = []

    @property
    def last_step(self) -> int:
        return self.steps[-1] if self.steps else -1

    @property
    def last_value(self) -> float:
        return self.smoothed[-1]

    def add(self, step: int, value: float) -> bool:
        if step <= self.last_step:
            return False
        self.steps.append(step)
        self.smoothed.append(self.smoother.update(value))
        return True

    def value_at(self, step: int) -> Optional[float]:
        """Smoothed value at the last logged step <= ``step``; None when the run has not reached ``step``."""
        if self.last_step < step:
            return None
        return self.smoothed[bisect_right(self.steps, step) - 1]


# --------------------------------------------------------------------------------------------------
# Policies
# --------------------------------------------------------------------------------------------------

class Policy:
    """Base class: keeps the curves, applies grace and the once-per-run rule; subclasses find the stops."""

    rule = "manual"

    def __init__(self, params: CommonParams):
        self.params = params
        self.curves: dict[Hashable, _RunCurve] = {}
        self.stopped: dict[Hashable, Optional[Decision]] = {}  # None: ended for another reason (mark_stopped)
        self.extended: dict[Hashable, Decision] = {}
        self._extension_credits = 0

    # -- the interface ---------------------------------------------------------------------------
    def observe(self, run_id: Hashable, step: int, value: float) -> None:
        """Record one logged point of ``run_id``'s metric. Points a run logs after the step at which this
        policy stopped it (while it winds down) are ignored."""
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step: expected an integer >= 0; got {step!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"value: expected a finite number for run {run_id!r} at step {step}; got {value!r}")
        decision = self.stopped.get(run_id)
        if decision is not None and step > decision.step:
            return
        curve = self.curves.get(run_id)
        if curve is None:
            p = self.params
            curve = self.curves[run_id] = _RunCurve(_make_smoother(p.smoothing, p.smoothing_weight,
                                                                   p.smoothing_window))
        curve.add(step, float(value))

    def mark_stopped(self, run_id: Hashable) -> None:
        """Tell the policy that ``run_id`` ended for another reason (a user killed it, it failed): no decision is
        made about it from now on; the points it logged still count for its peers. A database layer that
        rebuilds a policy from stored metrics calls this for every run that already ended before ``decide``."""
        self.stopped.setdefault(run_id, None)

    def decide(self) -> list[Decision]:
        """New decisions since the last call: stops first, then any extensions the stops paid for."""
        stops = self._find_stops()
        for decision in stops:
            self.stopped[decision.run_id] = decision
        self._extension_credits += len(stops) if self.params.extend_survivors_by > 0 else 0
        return stops + self._find_extensions()

    # -- helpers for subclasses ------------------------------------------------------------------
    def _find_stops(self) -> list[Decision]:
        return []

    def horizon(self, run_id: Hashable) -> int:
        extension = self.extended.get(run_id)
        return self.params.max_steps + (extension.extra_steps if extension else 0)

    def judgeable_runs(self) -> list[tuple[Hashable, _RunCurve]]:
        """Live runs past the grace period and before their final step (only these can be stopped)."""
        grace = self.params.grace()
        return [(run_id, curve) for run_id, curve in self.curves.items()
                if run_id not in self.stopped and curve.steps
                and grace <= curve.last_step < self.horizon(run_id)]

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

    def describe(self, value: float) -> str:
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
                reason=(f"best live run: smoothed {self.describe(curve.last_value)} at step {curve.last_step}; "
                        f"a stopped run freed a slot, so it gets {p.extend_survivors_by} more steps "
                        f"(until step {self.horizon(run_id) + p.extend_survivors_by})"))
            self.extended[run_id] = decision
            self._extension_credits -= 1
            decisions.append(decision)
        return decisions


class ManualPolicy(Policy):
    """Never decides: runs are stopped by hand from the dashboard."""

    rule = "manual"


class MedianStoppingPolicy(Policy):
    """Stop a run whose smoothed metric at step s is worse than the median of its peers' at step s.

    Peers are the other runs that reached step s (stopped and finished runs count with their value at s). In a
    sweep where every seed runs at once this keeps halving the field after the grace period until a run has
    fewer than ``min_peers`` peers left, i.e. about ``min_peers`` runs survive (Golovin et al. 2017 compare
    with completed trials; here there may be none, so the sweep's own runs at the same step are the peers).
    """

    rule = "median"

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
                    reason=(f"median rule: smoothed {self.describe(value)} at step {step} is "
                            f"{'below' if p.mode == 'max' else 'above'} the median {median:.4g} of "
                            f"{len(peers)} peers at that step{margin}")))
        return stops


class AshaPolicy(Policy):
    """Asynchronous successive halving: at each rung only the top 1/eta of the runs that reached it continue.

    A run's rung value is its smoothed metric at the rung step. A run is judged at a rung as soon as at least
    ``min_peers`` other runs have a value there (until then it keeps running and is judged later, at whatever
    step it has reached): it continues when it ranks within the top max(1, floor(n/eta)) of the n values
    recorded at that rung so far (runs stopped earlier at that rung included), otherwise it is stopped.
    """

    rule = "asha"

    def __init__(self, params: AshaParams):
        super().__init__(params)
        self.rung_steps = params.rungs()
        # rung index -> run_id -> smoothed value at the rung, in arrival order
        self.rung_values: list[dict[Hashable, float]] = [{} for _ in self.rung_steps]
        self.passed: list[set] = [set() for _ in self.rung_steps]

    def _find_stops(self) -> list[Decision]:
        p: AshaParams = self.params  # type: ignore[assignment]
        # 1. record every live run's value at each rung it reached
        for run_id, curve in self.curves.items():
            if run_id in self.stopped:
                continue
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
                        reason=(f"asha rung {k} (step {rung}): smoothed {self.describe(value)} ranks {rank} of "
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

    def _update_best(self, run_id: Hashable, curve: _RunCurve) -> tuple[int, float]:
        p: ThresholdParams = self.params  # type: ignore[assignment]
        best_step, best = self.best.get(run_id, (curve.steps[0], curve.smoothed[0]))
        seen = best_step
        for step, value in zip(curve.steps, curve.smoothed):
            if step <= seen:
                continue
            if self.worse(best, value, p.min_delta):  # value improves on best by more than min_delta
                best_step, best = step, value
        self.best[run_id] = (best_step, best)
        return best_step, best

    def _find_stops(self) -> list[Decision]:
        p: ThresholdParams = self.params  # type: ignore[assignment]
        stops = []
        for run_id, curve in self.judgeable_runs():
            best_step, best = self._update_best(run_id, curve)
            step, value = curve.last_step, curve.last_value
            n_peers = len(self.peer_values(run_id, step))
            if n_peers < p.min_peers:
                continue
            decision = None
            if p.lower_bound is not None and value < p.lower_bound:
                decision = (f"threshold: smoothed {self.describe(value)} at step {step} fell below the lower bound "
                            f"{p.lower_bound:g}", p.lower_bound, "threshold")
            elif p.upper_bound is not None and value > p.upper_bound:
                decision = (f"threshold: smoothed {self.describe(value)} at step {step} rose above the upper bound "
                            f"{p.upper_bound:g}", p.upper_bound, "threshold")
            elif p.patience is not None and step - best_step >= p.patience:
                decision = (f"patience: smoothed {self.describe(value)} at step {step} has not improved on the best "
                            f"{best:.4g} (step {best_step}) by more than {p.min_delta:g} for {step - best_step} "
                            f"steps (patience {p.patience})", best, "patience")
            if decision:
                reason, threshold, rule = decision
                stops.append(Decision(run_id=run_id, action=STOP, rule=rule, step=step, value=value,
                                      threshold=threshold, n_peers=n_peers, reason=reason))
        return stops


_REGISTRY: dict[str, tuple[type, type]] = {
    "manual": (ManualParams, ManualPolicy),
    "median": (MedianParams, MedianStoppingPolicy),
    "asha": (AshaParams, AshaPolicy),
    "threshold": (ThresholdParams, ThresholdPolicy),
}
POLICY_NAMES = tuple(_REGISTRY)


def parse_config(config: dict) -> CommonParams:
    """Validate a policy config; raises FieldErrors (a ValueError) naming every bad key."""
    if not isinstance(config, dict):
        raise FieldErrors({"config": f"expected a mapping; got {type(config).__name__}"})
    name = config.get("name")
    if not isinstance(name, str) or name not in _REGISTRY:
        raise FieldErrors({"name": f"must be one of {', '.join(POLICY_NAMES)}; got {name!r}"})
    params_cls, _ = _REGISTRY[name]
    return _parse_params(params_cls, config)


def make_policy(config: dict) -> Policy:
    """Build a policy from ``{"name": ..., "metric": ..., "mode": ..., "max_steps": ..., other keys}``.

    ``name``, ``metric`` and ``max_steps`` are required; every other key has the default documented on its
    params dataclass (``CommonParams`` plus ``MedianParams``, ``AshaParams`` or ``ThresholdParams``).
    """
    params = parse_config(config)
    _, policy_cls = _REGISTRY[config["name"]]
    return policy_cls(params)


# --------------------------------------------------------------------------------------------------
# Offline replay
# --------------------------------------------------------------------------------------------------

@dataclass
class ReplayResult:
    """What a replayed sweep did: every decision, where each stopped run stopped, how many points each ran."""

    decisions: list[Decision]
    stopped_at: dict[Hashable, int]
    steps_run: dict[Hashable, int]
    total_steps: int

    @property
    def compute_saved(self) -> float:
        """1 - (points run) / (points every run would have run to its end)."""
        return 1.0 - sum(self.steps_run.values()) / self.total_steps if self.total_steps else 0.0

    @property
    def survivors(self) -> list[Hashable]:
        return [run_id for run_id in self.steps_run if run_id not in self.stopped_at]


def replay(policy_config: dict, curves: dict[Hashable, Sequence[tuple[int, float]]], parallel: bool = True,
           concurrency: Optional[int] = None) -> ReplayResult:
    """Feed recorded curves to a fresh policy as a sweep would produce them, calling ``decide`` after each tick.

    At every tick each running run logs its next point (in parallel: all runs at once, step by step); a run
    stopped by a decision logs nothing more and its slot goes to the next run in ``curves`` order.
    ``concurrency`` limits how many runs run at once (default: all when ``parallel``, one otherwise).
    Extensions are recorded but the replay has no points beyond a curve's end.
    """
    policy = make_policy(policy_config)
    limit = concurrency or (len(curves) if parallel else 1)
    if limit < 1:
        raise ValueError(f"concurrency: must be at least 1; got {concurrency}")
    queued = list(curves)
    position: dict[Hashable, int] = {}
    running: list[Hashable] = []
    decisions: list[Decision] = []
    stopped_at: dict[Hashable, int] = {}
    while queued or running:
        while queued and len(running) < limit:
            run_id = queued.pop(0)
            running.append(run_id)
            position[run_id] = 0
        for run_id in list(running):
            step, value = curves[run_id][position[run_id]]
            policy.observe(run_id, int(step), float(value))
            position[run_id] += 1
        for decision in policy.decide():
            decisions.append(decision)
            if decision.action == STOP:
                stopped_at[decision.run_id] = decision.step
                if decision.run_id in running:
                    running.remove(decision.run_id)
        running = [run_id for run_id in running if position[run_id] < len(curves[run_id])]
    return ReplayResult(decisions=decisions, stopped_at=stopped_at, steps_run=dict(position),
                        total_steps=sum(len(points) for points in curves.values()))
