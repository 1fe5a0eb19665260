"""Health guards: per-run stop rules on RL-health metrics that compose with any ranking policy.

A ranking policy (median, ASHA, bayes ...) compares a run with its peers on one metric. A guard looks at one run
alone, on the metric that shows it is broken, and stops it whatever its rank says. Each guard is a fold over the
run's points (``GuardFold``: a debiased EMA, the step its current breach began, the best value so far), so a
policy check can save it as JSON and go on from it, and a replay decides the same as a check.

The kinds (``GUARD_KINDS``), each with its own reason; a breach must hold ``for_steps`` steps in a row (one
bad batch never stops a run), and no run is judged before the policy's grace period or at its final step:

- ``entropy_collapse``: smoothed ``entropy`` below ``below`` (nats per token). A policy that has become almost
  deterministic stops exploring; DAPO §3.1 ("entropy collapse") motivates Clip-Higher with exactly this.
- ``length_at_cap``: smoothed ``length/clipped_frac`` above ``above``: nearly every completion is cut at
  ``max_new_tokens``, so rewards measure truncation (DAPO §3.4, overlong reward shaping).
- ``zero_std``: smoothed ``frac_zero_std_groups`` above ``above``: nearly every group's rewards are equal, so
  GRPO's group-normalised advantages are 0 and the run learns nothing (DAPO §3.2, dynamic sampling).
- ``reward_drop``: the smoothed ``metric`` (default ``reward/mean``) more than ``drop`` below its own best so
  far: a collapse after learning, the case seed sweeps lose most compute to.

Config (a sweep policy's ``guards`` key): ``[{"kind": "entropy_collapse", "below": 0.05, "for_steps": 10},
{"kind": "reward_drop", "drop": 0.2}]``; every key but ``kind`` has a default (``GuardParams``).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Optional

from training.fields import FieldErrors, coerce_keys

from .smoothing import make_smoother

__all__ = ["GUARD_KINDS", "GUARD_METRICS", "GuardParams", "GuardFold", "parse_guards", "guard_reason"]

GUARD_METRICS = {"entropy_collapse": "entropy", "length_at_cap": "length/clipped_frac",
                 "zero_std": "frac_zero_std_groups", "reward_drop": "reward/mean"}
GUARD_KINDS = tuple(GUARD_METRICS)
MAX_GUARDS = 8


@dataclass(frozen=True)
class GuardParams:
    """One guard. ``below`` / ``above`` / ``drop`` apply to the kind that reads them (the others ignore theirs and
    may not set them)."""

    kind: str
    """``entropy_collapse``, ``length_at_cap``, ``zero_std`` or ``reward_drop``."""
    metric: str = ""
    """The metric the guard reads; empty means the kind's own (``GUARD_METRICS``)."""
    below: float = 0.05
    """``entropy_collapse``: breached while the smoothed metric is below this."""
    above: float = 0.95
    """``length_at_cap``, ``zero_std``: breached while the smoothed metric is above this (a share in [0, 1])."""
    drop: float = 0.2
    """``reward_drop``: breached while the smoothed metric is more than this below its best so far."""
    for_steps: int = 10
    """A breach must hold this many steps in a row before the run is stopped."""
    smoothing_weight: float = 0.6
    """Debiased-EMA weight of the guard's curve (the RL-health alerts' default)."""

    def watched(self) -> str:
        return self.metric or GUARD_METRICS[self.kind]

    def errors(self, given: set[str]) -> dict[str, str]:
        e: dict[str, str] = {}
        if self.kind not in GUARD_KINDS:
            return {"kind": f"must be one of {', '.join(GUARD_KINDS)}; got {self.kind!r}"}
        own = {"entropy_collapse": "below", "length_at_cap": "above", "zero_std": "above", "reward_drop": "drop"}
        for key in ("below", "above", "drop"):
            if key in given and key != own[self.kind]:
                e[key] = f"{self.kind} reads {own[self.kind]!r}, not {key!r}"
        if self.kind in ("length_at_cap", "zero_std") and not 0.0 < self.above < 1.0:
            e["above"] = f"must lie in (0, 1) (a share of completions or groups); got {self.above}"
        if self.kind == "entropy_collapse" and not self.below > 0.0:
            e["below"] = f"must be > 0 (nats per token); got {self.below}"
        if self.kind == "reward_drop" and not self.drop > 0.0:
            e["drop"] = f"must be > 0, in the metric's units; got {self.drop}"
        if not 1 <= self.for_steps <= 100_000:
            e["for_steps"] = f"must lie in [1, 100000]; got {self.for_steps}"
        if not 0.0 <= self.smoothing_weight < 1.0:
            e["smoothing_weight"] = f"must lie in [0, 1); got {self.smoothing_weight}"
        if len(self.metric) > 200:
            e["metric"] = f"at most 200 characters; got {len(self.metric)}"
        return e


def parse_guards(value: Any) -> tuple[GuardParams, ...]:
    """The ``guards`` key of a policy config: a list of guard mappings, checked; raises FieldErrors keyed
    ``guards`` or ``guards.<i>.<key>``."""
    if value in (None, ""):
        return ()
    if not isinstance(value, (list, tuple)):
        raise FieldErrors({"guards": f"expected a list of guards, e.g. [{{\"kind\": \"entropy_collapse\"}}]; "
                                     f"got {type(value).__name__}"})
    if len(value) > MAX_GUARDS:
        raise FieldErrors({"guards": f"at most {MAX_GUARDS} guards; got {len(value)}"})
    fields = {f.name: f for f in dataclasses.fields(GuardParams)}
    errors: dict[str, str] = {}
    guards = []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            errors[f"guards.{i}"] = f"expected a mapping with a 'kind'; got {type(item).__name__}"
            continue
        kwargs, mine = coerce_keys(fields, item, "unknown key {key!r}; allowed: {allowed}")
        if "kind" not in item:
            mine["kind"] = f"is required: one of {', '.join(GUARD_KINDS)}"
        if not mine:
            guard = GuardParams(**kwargs)
            mine = guard.errors(set(item))
            if not mine:
                guards.append(guard)
        errors.update({f"guards.{i}.{key}": message for key, message in mine.items()})
    if errors:
        raise FieldErrors(errors)
    kinds = [(g.kind, g.watched()) for g in guards]
    if len(set(kinds)) != len(kinds):
        raise FieldErrors({"guards": "each kind of guard at most once per metric"})
    return tuple(guards)


class GuardFold:
    """One guard's view of one run, point by point: smoothed value, best so far, and where the breach began.

    ``add(step, value)`` ignores a step at or before the last one (the database layer may feed a point twice).
    ``breached_for()`` is how many steps the current breach has lasted (0: no breach), counted as
    last_step - first breached step + 1."""

    def __init__(self, params: GuardParams):
        self.params = params
        self.smoother = make_smoother("ema", params.smoothing_weight, 1)
        self.last_step = -1
        self.value = math.nan
        self.best = -math.inf
        self.breach_from: Optional[int] = None

    def add(self, step: int, value: float) -> None:
        if step <= self.last_step:
            return
        self.last_step = step
        self.value = self.smoother.update(float(value))
        self.best = max(self.best, self.value)
        if self._breached():
            if self.breach_from is None:
                self.breach_from = step
        else:
            self.breach_from = None

    def _breached(self) -> bool:
        p = self.params
        if p.kind == "entropy_collapse":
            return self.value < p.below
        if p.kind == "reward_drop":
            return self.value < self.best - p.drop
        return self.value > p.above

    def breached_for(self) -> int:
        return 0 if self.breach_from is None else self.last_step - self.breach_from + 1

    def threshold(self) -> float:
        """What the smoothed value was compared with (the bound, or best - drop)."""
        p = self.params
        if p.kind == "entropy_collapse":
            return p.below
        if p.kind == "reward_drop":
            return self.best - p.drop
        return p.above


def guard_reason(fold: GuardFold) -> str:
    """Why the guard stops the run, in words (the decision's reason)."""
    p, metric, n = fold.params, fold.params.watched(), fold.breached_for()
    since = f"for {n} steps (since step {fold.breach_from}; the guard waits {p.for_steps})"
    if p.kind == "entropy_collapse":
        return (f"guard entropy_collapse: smoothed {metric} {fold.value:.4g} at step {fold.last_step} has been below "
                f"{p.below:g} {since}: the policy has stopped exploring")
    if p.kind == "length_at_cap":
        return (f"guard length_at_cap: smoothed {metric} {fold.value:.3g} at step {fold.last_step} has been above "
                f"{p.above:g} {since}: most completions are cut at max_new_tokens")
    if p.kind == "zero_std":
        return (f"guard zero_std: smoothed {metric} {fold.value:.3g} at step {fold.last_step} has been above "
                f"{p.above:g} {since}: almost every group has equal rewards, so no learning signal")
    return (f"guard reward_drop: smoothed {metric} {fold.value:.4g} at step {fold.last_step} has been more than "
            f"{p.drop:g} below its best {fold.best:.4g} {since}")
