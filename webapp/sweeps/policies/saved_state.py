"""A policy's curves saved between checks (the live check, ``webapp.sweeps.policy_check``): ``save_state`` gives
them as JSON, keeping of each run's past only what a later judgment can read (the rule's ``_history_steps``: where
the runs stand for the median rule, the rungs for ASHA), and ``load_state`` puts them into a fresh policy, which then
goes on observing from each run's last point as if it had observed every point. A value of the past it does not
keep raises ``HistoryMissing`` unless ``refill`` put it back (``missing_history`` says which). What ``decide`` sets
up is not saved (docs/architecture.md, "Early stopping")."""
from __future__ import annotations

from typing import Any, Callable, Hashable, Iterable, Iterator

from .curves import RunCurve
from .guards import GuardFold
from .rules import Policy

__all__ = ["keep_history_at", "history_steps", "save_state", "load_state", "last_steps", "order_runs",
           "missing_history", "refill"]


def history_steps(policy: Policy) -> set[int]:
    """Steps, besides each run's last one, at which a later ``decide`` may read a run's smoothed value."""
    return policy._history_steps()


def keep_history_at(policy: Policy, steps: Iterable[int]) -> None:
    """Make every curve built from now on record a checkpoint at each of ``steps`` as it passes it (call it before
    the first ``observe``; ``load_state`` does)."""
    policy._kept = frozenset(steps)


def save_state(policy: Policy) -> dict:
    """The curves as JSON, in their order: each run's ``RunCurve.to_state`` (checkpoints at the steps of
    ``history_steps``) and what the policy itself carries per run from one point to the next (``_run_state``).
    What ``decide`` changes (stops, rung records, extensions) is not in it."""
    kept = sorted(history_steps(policy))
    state = {"kept": kept, "runs": [[run_id, {**curve.to_state(kept), **policy._run_state(run_id, curve)}]
                                    for run_id, curve in policy.curves.items()]}
    if policy.guard_folds:
        state["guards"] = [[run_id, [fold.state() for fold in folds]] for run_id, folds in policy.guard_folds.items()]
    return state


def load_state(policy: Policy, state: dict) -> None:
    """Put back the curves ``save_state`` saved, into a fresh policy: observing the points after each run's last
    one then leaves the curves as observing every point would have."""
    keep_history_at(policy, set(state["kept"]) | history_steps(policy))
    for run_id, saved in state["runs"]:
        policy.curves[run_id] = RunCurve.from_state(policy._new_smoother, saved, policy._kept)
        policy._load_run_state(run_id, saved)
    for run_id, saved in state.get("guards", ()):
        folds = policy.guard_folds[run_id] = [GuardFold(g) for g in policy.guards]
        if len(saved) != len(folds):
            raise ValueError(f"run {run_id}: {len(saved)} guard states saved for {len(folds)} guards")
        for fold, fold_state in zip(folds, saved):
            fold.load(fold_state)


def last_steps(policy: Policy) -> dict[Hashable, int]:
    """Each run's last observed step (a restored curve's: the last one it was fed before it was saved); with guards,
    the earliest of its curve's and its guards' (a feed from there repeats no point any of them takes: each ignores
    steps it has seen)."""
    steps = {run_id: curve.last_step for run_id, curve in policy.curves.items()}
    for run_id, folds in policy.guard_folds.items():
        fed = [fold.last_step for fold in folds if fold.last_step >= 0]
        if fed:
            steps[run_id] = min(fed + ([steps[run_id]] if run_id in steps else []))
    return steps


def order_runs(policy: Policy, key: Callable[[Hashable, RunCurve], Any]) -> None:
    """Put the curves in the order of ``key(run_id, curve)``: runs are judged in curve order, and of equally good
    candidates for an extension the first wins, so a layer that restores curves and adds new ones puts them back in
    the order its feed would have created them in."""
    policy.curves = dict(sorted(policy.curves.items(), key=lambda item: key(*item)))


def missing_history(policy: Policy) -> Iterator[tuple[int, dict[Hashable, int]]]:
    """Each step of ``history_steps`` (in order) some restored curve does not know its value at, with run -> the
    step after which that run's points must be read again (``refill``). A generator: what is refilled at one step is
    a nearer start for the next."""
    for step in sorted(history_steps(policy)):
        missing = {run_id: curve.refill_from(step) for run_id, curve in policy.curves.items()
                   if not curve.knows(step)}
        if missing:
            yield step, missing


def refill(policy: Policy, run_id: Hashable, step: int, values: list[float]) -> None:
    """Give a restored curve back its value at ``step``: ``values`` are the run's points after the step
    ``missing_history`` named up to ``step``, in step order."""
    policy.curves[run_id].refill(step, values)
