"""A policy's parameters: one frozen dataclass per policy, every field documented, unknown keys rejected, values
checked with the shared field rules (``training.fields``) and each policy's own ``errors()``."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Optional

from training.fields import FieldErrors, coerce_keys

from .guards import parse_guards
from .smoothing import SMOOTHING_KINDS

__all__ = ["CommonParams", "ManualParams", "MedianParams", "AshaParams", "ThresholdParams", "BayesParams",
           "parse_params", "RISK_ONLY_BAYES",
           "defaults_text", "MODES"]

MODES = ("max", "min")


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
    guards: tuple = ()
    """Health guards (``guards.GuardParams``) that stop a broken run whatever its rank: a list such as
    ``[{"kind": "entropy_collapse", "below": 0.05}, {"kind": "reward_drop", "drop": 0.2}]``. Empty = none."""

    def grace(self) -> int:
        return self.grace_steps if self.grace_steps is not None else math.ceil(0.2 * self.max_steps)

    def for_width(self, width: int) -> "CommonParams":
        """The params for a feed whose points are means of ``width`` steps (the chart tier's buckets, each at its
        last step): the same, as every count here is in steps; a rule that counts points overrides it."""
        return self

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
    """Manual: no ranking; runs are stopped from the dashboard only (it needs no metric), and by its health
    guards if it has any (they need ``max_steps``: nothing is decided at a run's final step)."""

    metric: str = ""
    max_steps: int = 0

    def errors(self) -> dict[str, str]:
        if self.guards and self.max_steps < 2:
            return {"max_steps": f"must be at least 2 when guards are set; got {self.max_steps}"}
        return {}


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


@dataclass(frozen=True)
class BayesParams(CommonParams):
    """Calibrated risk rule (``bayes``, ``bayes.BayesPolicy``): stop the seeds least likely to end near-best while
    the chance that the sweep has stopped every near-best seed stays at most ``risk``."""

    tolerance: float = 0.02
    """A seed whose worth (its final without noise) is within this of the best seed's counts as near-best, in the
    metric's units (0.02 suits rewards and accuracies in [0, 1]; set it for other scales)."""
    risk: float = 0.05
    """The probability, per sweep, that you accept of stopping every near-best seed, in (0, 0.5]. On the
    benchmark's synthetic test corpus (bench/early_stopping.py --calibration) the realized loss rate stays within
    it; a higher risk saves more compute."""
    half_life: Optional[int] = None
    """The drawn forecast path's trend fit weighs a point half as much as one this many steps later. Empty means
    25 % of ``max_steps`` (rounded up)."""
    final_points: Optional[int] = None
    """A seed's final (and its level, the model's input) is the mean of this many last points. Empty means 10 %
    of ``max_steps`` (rounded up)."""

    def half_life_steps(self) -> int:
        return self.half_life if self.half_life is not None else math.ceil(0.25 * self.max_steps)

    def final_window(self) -> int:
        return self.final_points if self.final_points is not None else max(1, math.ceil(0.1 * self.max_steps))

    def for_width(self, width: int) -> "BayesParams":
        """A seed's level and final are the mean of its last ``final_window()`` points: fed bucket means of
        ``width`` steps, that many steps are ``round(final_window() / width)`` buckets (at least 1).

        >>> BayesParams(metric="m", max_steps=3000).for_width(8).final_window()
        38
        """
        if width <= 1:
            return self
        return dataclasses.replace(self, final_points=max(1, round(self.final_window() / width)))

    def errors(self) -> dict[str, str]:
        e = super().errors()
        if self.min_peers < 1:
            e["min_peers"] = f"must be at least 1 for bayes; got {self.min_peers}"
        if not (math.isfinite(self.tolerance) and self.tolerance > 0):
            e["tolerance"] = f"must be a finite number > 0; got {self.tolerance}"
        if not (math.isfinite(self.risk) and 0.0 < self.risk <= 0.5):
            e["risk"] = f"must lie in (0, 0.5]; got {self.risk}"
        if self.half_life is not None and self.half_life < 1:
            e["half_life"] = f"must be at least 1 (or empty for 25 % of max_steps); got {self.half_life}"
        if self.final_points is not None and not 1 <= self.final_points <= max(1, self.max_steps):
            e["final_points"] = f"must lie in [1, max_steps] = [1, {self.max_steps}]; got {self.final_points}"
        return e


RISK_ONLY_BAYES = ("only bayes has a probability model; use {\"name\": \"bayes\", \"risk\": ...} for a promised "
                   "risk, or leave risk out")
"""The field error of ``risk`` on a policy other than bayes (median, asha, threshold, manual)."""


def parse_params(cls: type, config: dict) -> CommonParams:
    """``config`` checked against the params dataclass ``cls``: unknown keys, types, ranges; raises FieldErrors."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    errors: dict[str, str] = {}
    if "risk" in config and "risk" not in fields:
        errors["risk"] = RISK_ONLY_BAYES
    kwargs: dict[str, Any] = {}
    if "guards" in config:
        try:
            kwargs["guards"] = parse_guards(config["guards"])
        except FieldErrors as exc:
            errors.update(exc.errors)
    plain = {key: value for key, value in config.items() if key not in ("name", "guards") and key not in errors}
    values, problems = coerce_keys(fields, plain, f"unknown key {{key!r}} for policy {config['name']!r}; "
                                                  "allowed: {allowed}")
    kwargs.update(values)
    errors.update(problems)
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


def defaults_text(classes: dict[str, type]) -> str:
    """Every parameter with its default, from the dataclasses themselves (the form's help text).

    ``classes`` maps a policy name to its params dataclass; the common keys are listed once."""
    common = {f.name: f.default for f in dataclasses.fields(CommonParams)}

    def text(f: dataclasses.Field) -> str:
        return f"{f.name} {'empty' if f.default is None else f.default}"

    # the keys the form asks for by themselves (metric, mode) and max_steps (the runs' total_steps) are left out
    parts = ["every policy: " + ", ".join(text(f) for f in dataclasses.fields(CommonParams)
                                          if f.default is not dataclasses.MISSING and f.name not in ("mode", "guards"))]
    for name, cls in classes.items():
        # a policy's own keys, and the common ones whose default it changes
        own = [text(f) for f in dataclasses.fields(cls)
               if f.default is not dataclasses.MISSING and common.get(f.name, ...) != f.default]
        if own and name != "manual":
            parts.append(f"{name}: {', '.join(own)}")
    return "; ".join(parts)
