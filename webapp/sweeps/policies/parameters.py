"""A policy's parameters: one frozen dataclass per policy, every field documented, unknown keys rejected, each
field's range in its metadata (``min``/``max``/``gt``/``lt``, as ``training.config.TrainConfig`` keeps them:
``parse_params`` checks them, ``param_specs`` lists them) and what ties fields together in the policy's own
``errors()``."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Optional

from training.fields import RANGE_KEYS, FieldErrors, coerce_keys, range_text

from .guards import parse_guards
from .smoothing import SMOOTHING_KINDS

__all__ = ["CommonParams", "ManualParams", "MedianParams", "AshaParams", "ThresholdParams", "BayesParams",
           "CutParams", "AutoParams", "parse_params", "param_specs", "RISK_ONLY_BAYES", "defaults_text", "MODES"]

MODES = ("max", "min")


def _r(default: Any, **bounds) -> Any:
    """A field with its default and its range (``min``, ``max``, ``gt``, ``lt``) in its metadata."""
    return dataclasses.field(default=default, metadata=bounds)


def range_message(value: Any, meta: dict) -> Optional[str]:
    """The error of a number outside the field's range, e.g. "must be at least 1; got 0", "must lie in (0, 0.5];
    got 2"; None inside it (or for None: an empty optional field).

    >>> range_message(0, {"min": 1}), range_message(0.6, {"gt": 0, "max": 0.5}), range_message(3, {"min": 1})
    ('must be at least 1; got 0', 'must lie in (0, 0.5]; got 0.6', None)
    """
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    ok = (("min" not in meta or value >= meta["min"]) and ("max" not in meta or value <= meta["max"])
          and ("gt" not in meta or value > meta["gt"]) and ("lt" not in meta or value < meta["lt"]))
    if ok or not any(k in meta for k in RANGE_KEYS):
        return None
    if set(meta) & {"max", "lt"} and set(meta) & {"min", "gt"}:
        return f"must lie {range_text(meta)}; got {value}"
    return f"must be {'at least ' + str(meta['min']) if 'min' in meta else range_text(meta)}; got {value}"


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
    smoothing_weight: float = _r(0.8, min=0.0, lt=1.0)
    """EMA weight w in [0, 1): s_t = w*s_(t-1) + (1-w)*x_t, debiased; higher is smoother."""
    smoothing_window: int = _r(5, min=1)
    """Window of the running mean (``smoothing: mean``)."""
    grace_steps: Optional[int] = None
    """No run is judged before this step. Empty means 20 % of ``max_steps`` (rounded up)."""
    min_peers: int = _r(3, min=0)
    """A comparison needs at least this many other runs that reached the same step (0 allowed for
    ``threshold``, which needs no peers)."""
    extend_survivors_by: int = _r(0, min=0)
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
        if self.grace_steps is not None and not 0 <= self.grace_steps < self.max_steps:
            e["grace_steps"] = f"must lie in [0, max_steps) = [0, {self.max_steps}); got {self.grace_steps}"
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

    min_peers: int = _r(3, min=1)
    """A comparison needs at least this many other runs that reached the same step."""
    min_delta: float = _r(0.05, min=0.0)
    """Stop only when the run is worse than the peer median by more than this margin, in the metric's units
    (the default suits rewards and accuracies in [0, 1]; set it for other scales)."""
    eval_every: int = _r(1, min=1)
    """Judge a run every this many steps after the grace period (1 = every step)."""



@dataclass(frozen=True)
class AshaParams(CommonParams):
    """Asynchronous successive halving."""

    min_steps: Optional[int] = None
    """First rung (r in r*eta**k). Empty means 25 % of ``max_steps`` (rounded up), but not before the grace
    period."""
    min_peers: int = _r(3, min=1)
    """A rung's judgment needs at least this many other runs that reached it."""
    eta: int = _r(2, min=2)
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
    patience: Optional[int] = _r(None, min=1)
    """Stop when the smoothed metric has not improved (per ``mode``) by ``min_delta`` for this many steps.
    Empty = off."""
    min_delta: float = _r(0.0, min=0.0)
    """Smallest change that counts as an improvement for ``patience``."""
    min_peers: int = _r(0, min=0)
    """Threshold rules need no peers; set > 0 to act only once this many other runs reached the step."""

    def errors(self) -> dict[str, str]:
        e = super().errors()
        if self.lower_bound is None and self.upper_bound is None and self.patience is None:
            e["lower_bound"] = "set at least one of lower_bound, upper_bound, patience"
        if self.lower_bound is not None and self.upper_bound is not None and self.lower_bound >= self.upper_bound:
            e["upper_bound"] = f"must be greater than lower_bound ({self.lower_bound}); got {self.upper_bound}"
        return e


@dataclass(frozen=True)
class BayesParams(CommonParams):
    """Calibrated risk rule (``bayes``, ``bayes.BayesPolicy``): stop the seeds least likely to end near-best while
    the chance that the sweep has stopped every near-best seed stays at most ``risk``."""

    min_peers: int = _r(3, min=1)
    """The seeds in the race (two points or more) a decision needs besides the one judged."""
    tolerance: float = _r(0.02, gt=0.0)
    """A seed whose worth (its final without noise) is within this of the best seed's counts as near-best, in the
    metric's units (0.02 suits rewards and accuracies in [0, 1]; set it for other scales)."""
    risk: float = _r(0.05, gt=0.0, max=0.5)
    """The probability, per sweep, that you accept of stopping every near-best seed, in (0, 0.5]. The policy stops
    while its model's loss stays under the level at which the realized loss stayed within this risk on the tuning
    sweeps (``risk_map``), or on the project's own complete finished sweeps once it has 20 (``history_risk``); on
    both synthetic test corpora (bench/early_stopping.py --calibration) the realized loss rate stays within it. A
    higher risk saves more compute."""
    half_life: Optional[int] = _r(None, min=1)
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
        if not math.isfinite(self.tolerance):
            e["tolerance"] = f"must be a finite number > 0; got {self.tolerance}"
        if self.final_points is not None and not 1 <= self.final_points <= max(1, self.max_steps):
            e["final_points"] = f"must lie in [1, max_steps] = [1, {self.max_steps}]; got {self.final_points}"
        return e


@dataclass(frozen=True)
class CutParams(CommonParams):
    """One-shot cut (``cut``): at one step, keep the top share of the seeds and stop the rest."""

    at: float = _r(0.5, gt=0.0, lt=1.0)
    """Where the cut is made, as a fraction of ``max_steps``: at step ceil(at * max_steps), not before the grace
    period."""
    keep: float = _r(0.5, gt=0.0, lt=1.0)
    """The share of the seeds that reached the cut that go on (at least one): the top round(keep * n) of n."""
    min_peers: int = _r(3, min=1)
    """The cut needs at least this many other runs that reached it; a run that arrives later is judged against
    every value recorded there."""
    grace_steps: Optional[int] = 0
    """No run is judged before this step (the cut's own step decides when; 0 by default)."""

    def cut_step(self) -> int:
        return max(self.grace(), 1, math.ceil(self.at * self.max_steps))

    def errors(self) -> dict[str, str]:
        e = super().errors()
        if not e and self.cut_step() >= self.max_steps:
            e["at"] = f"the cut at step {self.cut_step()} must come before max_steps ({self.max_steps}); got {self.at}"
        return e


@dataclass(frozen=True)
class AutoParams(BayesParams):
    """Learned choice (``auto``): of ``bayes`` and the one-shot cuts, the one that saved most on the project's
    complete finished sweeps while its realized loss stayed within ``risk`` (``history_risk.Choice``); ``bayes``
    with its built-in calibration without such a history."""


RISK_ONLY_BAYES = ("only bayes has a probability model (auto chooses with it); use {\"name\": \"bayes\", \"risk\": ...} "
                   "or auto for a promised risk, or leave risk out")
"""The field error of ``risk`` on a policy other than bayes and auto (median, asha, threshold, cut, manual)."""


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
    errors = {name: why for name, f in fields.items() if (why := range_message(getattr(params, name), f.metadata))}
    errors = {**params.errors(), **errors}
    if errors:
        raise FieldErrors(errors)
    return params


def param_specs(cls: type) -> list[dict]:
    """Each field of a params dataclass: name, default (None: empty; required ones have none), its range as text
    and its bounds (the field's metadata), as the API and the CLI list a rule's parameters."""
    return [{"name": f.name, "default": None if f.default is dataclasses.MISSING else f.default,
             "required": f.default is dataclasses.MISSING, "range": range_text(f.metadata),
             "bounds": {k: f.metadata[k] for k in RANGE_KEYS if k in f.metadata}}
            for f in dataclasses.fields(cls) if f.name != "guards"]


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
