"""The stopping rules: each a pure function over the sweep's smoothed curves, ``(sweep, params, memo) -> stops``,
its formula in its docstring, declared by its module of ``policies.rules`` (docs/architecture.md, "Early stopping").

``sweep`` is a ``curves.SweepCurves`` (every run's smoothed curve, the runs out of the race, the horizons);
``params`` the rule's params dataclass (``parameters``); ``memo`` a dict the rule keeps between the decisions of
one feed (ASHA's rung records, the threshold rule's best value so far), empty at the feed's start. A rule returns
its new stops and never changes a curve; the policy (``rules.Policy``) records them. No Django.

Notation: x_r(s) is run r's smoothed value at its last point at or before step s; P_r(s) the other runs that reached
s (finished, stopped and killed ones too, with their curve as it was there); g the grace step; "worse by more than
δ" means x < y − δ with ``mode: max`` and x > y + δ with ``mode: min``.
"""
from __future__ import annotations

import statistics
from bisect import bisect_right
from typing import Any, Hashable, Optional

from .curves import RunCurve, SweepCurves, too_few_peers
from .decision import STOP, Decision
from .parameters import AshaParams, CutParams, MedianParams, ThresholdParams

__all__ = ["no_stops", "no_waiting", "peers_waiting", "median_waiting", "asha_waiting", "median_stops", "asha_stops", "cut_stops", "cut_waiting", "threshold_stops", "best_so_far"]


def no_stops(sweep: SweepCurves, params: Any, memo: dict) -> list[Decision]:
    """``manual``: never stops a run (its guards may; the policy applies those)."""
    return []


def median_stops(sweep: SweepCurves, p: MedianParams, memo: dict) -> list[Decision]:
    """``median`` (Golovin et al., "Google Vizier", KDD 2017): a run is judged at its last step s when s lies on the
    grid s = g + k·``eval_every``; it stops when

        |P_r(s)| >= min_peers   and   x_r(s) worse than median{x_j(s) : j in P_r(s)} by more than ``min_delta``.

    Every run is judged against the same curves (stops apply after the pass), so run order does not matter."""
    grace = p.grace()
    stops = []
    for run_id, curve in sweep.judgeable():
        step = curve.last_step
        if (step - grace) % p.eval_every:
            continue
        peers = sweep.peer_values(run_id, step)
        if len(peers) < p.min_peers:
            continue
        median = statistics.median(peers)
        value = curve.last_value
        if sweep.worse(value, median, p.min_delta):
            margin = f" by more than {p.min_delta:g}" if p.min_delta else ""
            stops.append(Decision(
                run_id=run_id, action=STOP, rule="median", step=step, value=value, threshold=median,
                n_peers=len(peers),
                reason=(f"median rule: smoothed {sweep.format_value(value)} at step {step} is "
                        f"{'below' if p.mode == 'max' else 'above'} the median {median:.4g} of "
                        f"{len(peers)} peers at that step{margin}")))
    return stops


def asha_stops(sweep: SweepCurves, p: AshaParams, memo: dict) -> list[Decision]:
    """``asha`` (Li et al., "A System for Massively Parallel Hyperparameter Tuning", MLSys 2020): rungs at
    s_k = ``min_steps``·eta^k below ``max_steps``. R_k is every run with a value at s_k, recorded once, in arrival
    order (runs that ended or were stopped count at the rungs they reached). With n = |R_k| > ``min_peers`` a
    pending run r in R_k (not passed at k, live, before its horizon)

        continues (passes rung k) when x_r(s_k) is not worse than c_k,  else stops,
        c_k = the keep-th best value of R_k,  keep = max(1, floor(n / eta)).

    ``memo``: the rung records (``rung_values``) and the runs that passed each rung (``passed``)."""
    rungs = p.rungs()
    values: list[dict[Hashable, float]] = memo.setdefault("rung_values", [{} for _ in rungs])
    passed: list[set] = memo.setdefault("passed", [set() for _ in rungs])
    _record_rungs(sweep, rungs, values)  # 1. every run's value at each rung it reached
    # 2. judge pending runs, lowest rung first, each against everything recorded at its rung
    stops: dict[Hashable, Decision] = {}
    for k, rung in enumerate(rungs):
        n = len(values[k])
        if n - 1 < p.min_peers:
            continue
        keep = max(1, n // p.eta)
        _judge_rung(sweep, values[k], passed[k], keep, stops, "asha", lambda value, rank, cutoff: (
            f"asha rung {k} (step {rung}): smoothed {value} ranks {rank} of {n}; only the top {keep} (1/{p.eta}) "
            f"continue, cut-off {cutoff:.4g}"))
    return list(stops.values())


def _record_rungs(sweep: SweepCurves, rungs: list[int], values: list[dict[Hashable, float]]) -> None:
    """Record every run's smoothed value at each rung it reached, once: a finished, killed or stopped peer's curve
    (up to its last step, or the step it was stopped at) counts at the rungs it reached, so a sweep that runs its
    seeds a few at a time compares a seed with the seeds before it."""
    for run_id, curve in sweep.curves.items():
        for k, rung in enumerate(rungs):
            value = curve.value_at(rung)
            if run_id not in values[k] and value is not None:
                values[k][run_id] = value


def _judge_rung(sweep: SweepCurves, recorded: dict[Hashable, float], passed: set, keep: int,
                stops: dict[Hashable, Decision], rule: str, reason) -> None:
    """Each pending run of a rung (recorded there, not passed, live, before its horizon) continues when its value
    is not worse than the ``keep``-th best recorded there (c), else it is stopped (added to ``stops``, its reason
    ``reason(the smoothed value in words, its rank, c)``)."""
    cutoff = sorted(recorded.values(), key=sweep.sort_key)[keep - 1]
    for run_id, value in recorded.items():
        if run_id in passed or run_id in sweep.stopped or run_id in stops:
            continue
        curve = sweep.curves[run_id]
        if curve.last_step >= sweep.horizon(run_id):
            continue  # already at its final step: stopping saves nothing
        if sweep.worse(value, cutoff):
            rank = 1 + sum(1 for v in recorded.values() if sweep.sort_key(v) < sweep.sort_key(value))
            stops[run_id] = Decision(run_id=run_id, action=STOP, rule=rule, step=curve.last_step, value=value,
                                     threshold=cutoff, n_peers=len(recorded) - 1,
                                     reason=reason(sweep.format_value(value), rank, cutoff))
        else:
            passed.add(run_id)


def cut_stops(sweep: SweepCurves, p: CutParams, memo: dict) -> list[Decision]:
    """``cut`` (the one-shot rule of thumb: "at fraction f of the run keep the top share q"): one rung at
    s = max(ceil(``at``·``max_steps``), g). R is every run with a value at s, recorded once, in arrival order. With
    n = |R| > ``min_peers`` a pending run r in R (not passed, live, before its horizon)

        continues when x_r(s) is not worse than c,  else stops,
        c = the keep-th best value of R,  keep = max(1, round(``keep``·n)).

    With every seed running at once this is the offline cut: the top round(q·n) of the sweep at s go on. A seed
    that reaches s later is judged against every value recorded there (as ``asha`` judges a rung). ``memo``: the
    rung's record (``rung_values``) and the runs that passed (``passed``)."""
    step = p.cut_step()
    values: list[dict[Hashable, float]] = memo.setdefault("rung_values", [{}])
    passed: set = memo.setdefault("passed", set())
    _record_rungs(sweep, [step], values)
    n = len(values[0])
    if n - 1 < p.min_peers:
        return []
    keep = max(1, round(p.keep * n))
    stops: dict[Hashable, Decision] = {}
    _judge_rung(sweep, values[0], passed, keep, stops, "cut", lambda value, rank, cutoff: (
        f"cut at step {step} ({p.at:.0%} of the run): smoothed {value} ranks {rank} of {n}; only the top {keep} "
        f"({p.keep:.0%}) go on, cut-off {cutoff:.4g}"))
    return list(stops.values())


def best_so_far(sweep: SweepCurves, curve: RunCurve, p: ThresholdParams,
                previous: tuple[int, float] | None) -> tuple[int, float]:
    """The best smoothed value of ``curve`` so far and its step, a fold over its points: b_0 = x(s_0), and
    b_i = x(s_i) when x(s_i) improves on b_(i−1) by more than ``min_delta``, else b_(i−1). It goes on from
    ``previous`` (the fold up to some earlier point), so it comes out the same whenever it is updated."""
    best_step, best = previous if previous is not None else (curve.steps[0], curve.smoothed[0])
    for i in range(bisect_right(curve.steps, best_step), len(curve.steps)):
        if sweep.worse(best, curve.smoothed[i], p.min_delta):  # improves on best by more than min_delta
            best_step, best = curve.steps[i], curve.smoothed[i]
    return best_step, best


def threshold_stops(sweep: SweepCurves, p: ThresholdParams, memo: dict) -> list[Decision]:
    """``threshold``: a live run r at its last step s with |P_r(s)| >= ``min_peers`` stops when

        x_r(s) < ``lower_bound``,   or   x_r(s) > ``upper_bound``,   or   s − s_b >= ``patience``,

    (rule "threshold" for a bound, "patience" for the last), b = ``best_so_far`` of r's curve, reached at s_b.
    ``memo["best"]``: run -> (s_b, b), the fold so far."""
    best_of: dict[Hashable, tuple[int, float]] = memo.setdefault("best", {})
    stops = []
    for run_id, curve in sweep.judgeable():
        best_step, best = best_of[run_id] = best_so_far(sweep, curve, p, best_of.get(run_id))
        step, value = curve.last_step, curve.last_value
        n_peers = sweep.peer_count(run_id, step)
        if n_peers < p.min_peers:
            continue
        decision = None
        if p.lower_bound is not None and value < p.lower_bound:
            decision = (f"threshold: smoothed {sweep.format_value(value)} at step {step} fell below the lower bound "
                        f"{p.lower_bound:g}", p.lower_bound, "threshold")
        elif p.upper_bound is not None and value > p.upper_bound:
            decision = (f"threshold: smoothed {sweep.format_value(value)} at step {step} rose above the upper bound "
                        f"{p.upper_bound:g}", p.upper_bound, "threshold")
        elif p.patience is not None and step - best_step >= p.patience:
            decision = (f"patience: smoothed {sweep.format_value(value)} at step {step} has not improved on the best "
                        f"{best:.4g} (step {best_step}) by more than {p.min_delta:g} for {step - best_step} "
                        f"steps (patience {p.patience})", best, "patience")
        if decision:
            reason, threshold, rule = decision
            stops.append(Decision(run_id=run_id, action=STOP, rule=rule, step=step, value=value,
                                  threshold=threshold, n_peers=n_peers, reason=reason))
    return stops


# What a rule says of a live run past its first judged step that it cannot decide about yet: one signature,
# (params, the run's last step, every other started run as (the step its curve counts up to, out of the race))
# -> the words, or None when it is judged now (``Policy.waiting``; the first line is what the rule list shows).

def no_waiting(params: Any, last_step: int, others: list[tuple[int, bool]]) -> Optional[str]:
    """never waits: runs are stopped from the dashboard (and by its guards)"""
    return None


def peers_waiting(p: Any, last_step: int, others: list[tuple[int, bool]]) -> Optional[str]:
    """waiting for peers at its last step: k of min_peers (a peer counts at step s when its curve reaches s)"""
    return too_few_peers(last_step, others, p.min_peers)


def median_waiting(p: MedianParams, last_step: int, others: list[tuple[int, bool]]) -> Optional[str]:
    """waiting for peers at its last step of the eval_every grid from the grace step: k of min_peers"""
    step = p.grace() + (last_step - p.grace()) // p.eval_every * p.eval_every
    return too_few_peers(step, others, p.min_peers)


def asha_waiting(p: AshaParams, last_step: int, others: list[tuple[int, bool]]) -> Optional[str]:
    """waiting for peers at the first rung it reached that fewer than min_peers other runs reached: k of min_peers"""
    return next((why for rung in p.rungs() if rung <= last_step
                 and (why := too_few_peers(rung, others, p.min_peers))), None)


def cut_waiting(p: CutParams, last_step: int, others: list[tuple[int, bool]]) -> Optional[str]:
    """waiting for peers at the cut step: k of min_peers (a run past the cut is judged once enough reached it)"""
    return too_few_peers(p.cut_step(), others, p.min_peers, "peers at the cut")
