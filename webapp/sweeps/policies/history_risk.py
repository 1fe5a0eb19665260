"""The ``bayes`` policy's risk level learned from the project's own finished sweeps (docs/architecture.md, "Early
stopping"): the model loss at which its realized loss stayed within the promised risk on this project's curves.

The built-in risk map (``risk_map``) was chosen on two synthetic tuning corpora at once, so it is as timid as the
worse calibrated of the two: on the other it leaves much of the promised risk unspent and saves less than a
one-shot rule. A project with enough finished sweeps says how its own curves behave. Of its history, the sweeps
whose every run reached the horizon are the calibration sweeps (at most ``MAX_SWEEPS``, the newest first; a
sweep whose poor seeds were stopped cannot say whether they would have ended near-best). Each is replayed by bayes
at every model loss level l of ``GRID`` with a prior learned from the other half of the history (cross-fitted:
sweep i is judged by a prior from the sweeps j with j % 2 != i % 2), and

    L(l)     = (1 / n) * #{calibration sweeps whose every near-best seed the replay at l stopped}
    level(r) = max { l in GRID : (n L(l') + 1) / (n + 1) <= r  for every l' <= l in GRID }

the conformal risk control threshold (Angelopoulos et al., "Conformal Risk Control", ICLR 2024: for a loss in
[0, 1] and sweeps exchangeable with the calibration sweeps, E[loss] <= r), the smaller levels' losses included as
Learn-then-Test's fixed sequence asks for a loss that is not monotone in l. When no level qualifies (too few
sweeps for the risk: at n = 30 a risk of 0.05 allows no lost sweep) the built-in map decides. A near-best seed of a
recorded sweep is one whose final (the robust mean of its last 20 % of points, ``final_level``) is within the
policy's ``tolerance`` of the best final (``near_best``).

The replays are what a live check costs (``policy_check``) times ``len(GRID)`` per calibration sweep, once per
history: the result is kept in the process, keyed by the history and the parameters that change a replay.
"""
from __future__ import annotations

import math
import statistics
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Mapping, Optional, Sequence

from . import prior

__all__ = ["LEARN", "GRID", "CUT_AT", "CUT_KEEP", "Choice", "MIN_SWEEPS", "MAX_SWEEPS", "RiskFit", "learn", "remembered", "remember", "fit", "near_best", "complete"]

GRID = (0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.10, 0.115, 0.13, 0.145,
        0.16, 0.18, 0.20, 0.225, 0.25, 0.275, 0.30, 0.35, 0.40, 0.45, 0.50)
"""The model loss levels tried, in increasing order until one fails (Learn-then-Test's fixed sequence)."""

MIN_SWEEPS = 20
"""Fewer complete finished sweeps than this: the built-in map (at 20 the smallest risk a level can promise is
1/21, about 0.048)."""

LEARN = "learn"
"""``make_policy``'s default ``risk_fit``: learn it from the history (``learn``)."""

MAX_SWEEPS = 250
"""At most this many calibration sweeps (the newest complete ones)."""

Sweep = Mapping[Hashable, Sequence[tuple[int, float]]]


CUT_AT = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
CUT_KEEP = tuple(k / 8 for k in range(1, 8))
"""The one-shot cuts ``auto`` weighs against bayes: at each fraction ``CUT_AT`` keep the share ``CUT_KEEP`` (the
frontier the bench prints; on the tuning corpora a finer grid of fractions let the choice overfit the history: its
realized loss went over the risk by 1.5 points)."""


@dataclass(frozen=True)
class RiskFit:
    """The realized losses of the replays: ``lost[l]`` sweeps of ``n`` lost every near-best seed at level l, for
    the levels of ``GRID`` walked until one's bound exceeded ``risk`` (so it answers for any risk up to it);
    ``saved[i]``: the share of the calibration sweeps' steps the replay at ``lost[i]``'s level saved; ``cuts``:
    (at, keep, lost, saved) of every one-shot cut of ``CUT_AT`` x ``CUT_KEEP`` replayed on the same sweeps."""

    lost: tuple[tuple[float, int], ...]
    n: int
    risk: float = 0.5
    saved: tuple[float, ...] = ()
    cuts: tuple[tuple[float, float, int, float], ...] = ()

    def level(self, risk: float) -> Optional[float]:
        """The largest level of the module's formula for ``risk``; None when none qualifies.

        >>> fit = RiskFit(((0.01, 0), (0.02, 1), (0.05, 3), (0.1, 2), (0.2, 9)), 40, 0.2)
        >>> fit.level(0.05), fit.level(0.1), fit.level(0.2), fit.level(0.03)
        (0.02, 0.1, 0.1, 0.01)
        >>> fit.level(0.02) is None
        True
        """
        best = None
        for level, lost in self.lost:
            if (lost + 1) / (self.n + 1) > risk:
                break
            best = level
        return best

    def choose(self, risk: float) -> Optional["Choice"]:
        """``auto``'s choice for ``risk``: of bayes at ``level(risk)`` and every cut whose bound (lost + 1) / (n + 1)
        is within ``risk``, the one that saved most of the calibration sweeps' steps (bayes on a tie); None when
        none qualifies.

        >>> fit = RiskFit(((0.01, 0), (0.02, 1)), 40, 0.1, saved=(0.05, 0.12),
        ...               cuts=((0.3, 0.375, 1, 0.30), (0.2, 0.25, 9, 0.55), (0.5, 0.5, 2, 0.18)))
        >>> fit.choose(0.05)
        Choice(rule='cut', lost=1, n=40, saved=0.3, level=None, at=0.3, keep=0.375)
        >>> fit.choose(0.03).rule, fit.choose(0.03).level
        ('bayes', 0.01)
        """
        options = []
        level = self.level(risk)
        if level is not None and self.saved:
            i = [lv for lv, _ in self.lost].index(level)
            options.append(Choice("bayes", self.lost[i][1], self.n, self.saved[i], level=level))
        options += [Choice("cut", lost, self.n, saved, at=at, keep=keep) for at, keep, lost, saved in self.cuts
                    if (lost + 1) / (self.n + 1) <= risk]
        return max(options, key=lambda c: c.saved, default=None)

    @property
    def sweeps_text(self) -> str:
        """Where its level was chosen, as a decision and the dashboard say it."""
        return f"the {self.n} complete finished sweep{'s' if self.n != 1 else ''} of this project"


@dataclass(frozen=True)
class Choice:
    """What ``auto`` runs: ``bayes`` at model loss ``level``, or the ``cut`` at fraction ``at`` keeping the share
    ``keep``; with what it did on the ``n`` calibration sweeps (``lost`` of them lost every near-best seed, it
    saved the share ``saved`` of their steps)."""

    rule: str
    lost: int
    n: int
    saved: float
    level: Optional[float] = None
    at: Optional[float] = None
    keep: Optional[float] = None

    @property
    def text(self) -> str:
        """E.g. "the cut at 30 % keeping the top 38 % (on the 40 complete finished sweeps of this project it lost
        every near-best seed in 1 and saved 30 % of the steps)"."""
        what = (f"bayes at model loss {self.level:.3g}" if self.rule == "bayes" else
                f"the cut at {self.at:.0%} of the run keeping the top {self.keep:.0%}")
        return (f"{what} (on the {self.n} complete finished sweeps of this project it lost every near-best seed in "
                f"{self.lost} and saved {self.saved:.0%} of the steps)")


def complete(sweep: Sweep) -> bool:
    """Every run of the sweep (two or more) reached its horizon (``prior.horizon``)."""
    end = prior.horizon(sweep)
    curves = [c for c in sweep.values() if c]
    return end >= 4 and len(curves) >= 2 and all(int(c[-1][0]) >= end for c in curves)


FINAL_SHARE = 0.2
"""A recorded run's final is the robust mean of its last ``FINAL_SHARE`` of points (``final_level``)."""


def final_level(values: Sequence[float]) -> float:
    """The final of a recorded curve: the mean of its last 20 % of points (at least one) that lie within 2.5
    robust standard deviations (1.4826 x their median absolute deviation) of their median.

    On the tuning splits of both synthetic corpora (400 sweeps each) a seed so judged near-best matches its
    noise-free worth better than by the plain mean of the last 10 %: that mean names 1.57 seeds near-best a sweep
    where the worth names 2.08 (noise lifts the best final above its worth: fewer seeds lie within tolerance of
    it), so every cut of ``CUT_AT`` x ``CUT_KEEP`` whose loss judged on the worth is below 25 % looked riskier by
    3.4 points on average (up to 9.5); the robust 20 % mean by 1.3 (up to 6.0; as liberal as the plain mean, 0.5
    at most). A wider window (25-30 %) judged late risers by where they were, and some cuts looked up to 4 points
    safer than they are.

    >>> final_level([0.1] * 16 + [0.5, 0.52, 0.98, 0.48])
    0.5
    """
    tail = list(values)[-max(1, math.ceil(FINAL_SHARE * len(values))):]
    middle = statistics.median(tail)
    spread = 2.5 * 1.4826 * statistics.median(abs(v - middle) for v in tail)
    return statistics.fmean(v for v in tail if abs(v - middle) <= spread)


def near_best(sweep: Sweep, tolerance: float, sign: float = 1.0) -> set:
    """The runs whose final (``final_level``, in the policy's sign) is within ``tolerance`` of the best final:
    what bayes promises, judged on the recorded finals. (Counting also the runs within two standard errors of the
    best, as the bench judges its recorded corpus, made every level look safe on noisy synthetic sweeps: a replay
    at model loss 0.1 lost 2 of 120 sweeps so judged, 14 judged on the noise-free worth, 11 judged so.)

    >>> sorted(near_best({"a": [(s, 0.5) for s in range(1, 21)], "b": [(s, 0.49) for s in range(1, 21)],
    ...                   "c": [(s, 0.3) for s in range(1, 21)]}, 0.02))
    ['a', 'b']
    """
    finals = {run_id: final_level([sign * float(v) for _, v in curve]) for run_id, curve in sweep.items()}
    top = max(finals.values())
    return {run_id for run_id, final in finals.items() if final >= top - tolerance}


def _replay_config(config: dict, sweep: Sweep, level: float) -> tuple[dict, int]:
    """The policy's config for a replay of ``sweep`` at model loss ``level``, and the width its points are means of
    (its steps over its longest run's points): the horizon its own, the steps-valued keys at their defaults."""
    end = prior.horizon(sweep)
    width = max(1, round(end / max(len(c) for c in sweep.values())))
    keep = {k: config[k] for k in ("metric", "mode", "tolerance", "min_peers") if k in config}
    return {**keep, "name": "bayes", "max_steps": end, "risk": level}, width


def fit(history: Sequence[Sweep], config: dict, replay: Callable[..., Any]) -> Optional[RiskFit]:
    """Walk ``GRID`` up: replay every calibration sweep at each level until the bound of the module's formula
    exceeds ``config["risk"]`` (see the module's docstring), and replay every cut of ``CUT_AT`` x ``CUT_KEEP`` on
    the same sweeps; None without ``MIN_SWEEPS`` complete sweeps. ``replay``: ``registry.replay`` (handed in: the
    registry builds the policies that learn this fit)."""
    from . import risk_map

    sweeps = [s for s in history if complete(s)][:MAX_SWEEPS]
    if len(sweeps) < MIN_SWEEPS:
        return None
    halves = [[s for j, s in enumerate(history) if j % 2 != k] for k in range(2)]
    position = {id(s): j for j, s in enumerate(history)}
    sign = 1.0 if config.get("mode", "max") == "max" else -1.0
    risk = float(config.get("risk", 0.05))
    nears = [near_best(s, float(config.get("tolerance", 0.02)), sign) for s in sweeps]
    total = sum(len(c) for s in sweeps for c in s.values())

    def run(cfg: dict, width: int, sweep: Sweep, near: set, prior_history=None) -> tuple[int, int]:
        result = replay(cfg, sweep, width=width, history=prior_history)
        return int(near <= set(result.stopped_at)), result.total_steps - sum(result.steps_run.values())

    lost, saved = [], []
    with risk_map.uncalibrated():  # the model's own levels (and no risk fit within a replay)
        for level in GRID:
            outcomes = [run(*_replay_config(config, sweep, level), sweep, near, halves[position[id(sweep)] % 2])
                        for sweep, near in zip(sweeps, nears)]
            lost.append((level, sum(o[0] for o in outcomes)))
            saved.append(sum(o[1] for o in outcomes) / total)
            if (lost[-1][1] + 1) / (len(sweeps) + 1) > risk:
                break
    cuts = []
    for at in CUT_AT:
        for keep in CUT_KEEP:
            outcomes = [run(*_cut_config(config, sweep, at, keep), sweep, near) for sweep, near in zip(sweeps, nears)]
            cuts.append((at, keep, sum(o[0] for o in outcomes), sum(o[1] for o in outcomes) / total))
    return RiskFit(tuple(lost), len(sweeps), risk, tuple(saved), tuple(cuts))


def _cut_config(config: dict, sweep: Sweep, at: float, keep: float) -> tuple[dict, int]:
    """The config of a cut's replay on ``sweep`` (as ``_replay_config``'s), and its width."""
    cfg, width = _replay_config(config, sweep, 0.0)
    cfg = {k: v for k, v in cfg.items() if k not in ("risk", "tolerance")}
    return {**cfg, "name": "cut", "at": at, "keep": keep}, width


_CACHE: "OrderedDict[tuple, tuple]" = OrderedDict()


def learn(history: Optional[Sequence[Sweep]], config: dict, replay: Callable[..., Any]) -> Optional[RiskFit]:
    """The risk fit of ``history`` for a bayes policy of ``config`` (see the module's docstring); None without
    ``MIN_SWEEPS`` complete sweeps (or inside ``risk_map.uncalibrated``). Kept per history and parameters."""
    from . import risk_map

    if not history or risk_map.is_uncalibrated():
        return None
    key = _key(history, config)
    known = _CACHE.get(key, ())
    found = next((f for f in known if f is None or f.risk >= float(config.get("risk", 0.05))), False)
    if found is False:
        found = fit(history, config, replay)
        remember(history, config, found)
    _CACHE.move_to_end(key)
    return found


def _key(history: Sequence[Sweep], config: dict) -> tuple:
    return tuple(config.get(k) for k in ("mode", "tolerance", "min_peers")), prior.history_key(history)


def remembered(history: Sequence[Sweep], config: dict) -> bool:
    """Whether ``learn`` already holds an answer for ``history`` at ``config``'s risk (none is computed)."""
    risk = float(config.get("risk", 0.05))
    return any(f is None or f.risk >= risk for f in _CACHE.get(_key(history, config), ()))


def remember(history: Sequence[Sweep], config: dict, found: Optional[RiskFit]) -> None:
    """Keep ``found`` as ``learn``'s answer for ``history`` and every risk up to its own (one computed in another
    process: the bench's)."""
    key = _key(history, config)
    _CACHE[key] = (*_CACHE.get(key, ()), found)
    while len(_CACHE) > 8:
        _CACHE.popitem(last=False)
