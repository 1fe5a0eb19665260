"""What would policy X have done? A policy replayed on a finished sweep's stored curves (``policies.replay``), read
only: no run, decision or plan is touched.

The policy config is checked as the sweep form checks it (``services.policy_config_for``: FieldErrors keyed
``policy.<key>``, its horizon the sweep's ``total_steps``). The curves are the chart tier's (``rollups.bucketed``): at
most ``REPLAY_POINTS`` points per run (a bucket's mean at its last step: exact up to that many steps, coarser
beyond), fed in run order with the sweep's concurrency, so a freed slot goes to the next run as it did. A replay
that still runs past ``REPLAY_SECONDS`` stops with an error instead of holding a web worker (measured: a bayes
replay of 32 runs x 1,000 steps takes under 1 s at 200 points per run; see the README).

The answer: the steps the policy would have run of those stored and the share saved, the runs it stops (at which
step, why), the run it keeps (the best final among the survivors that ran to their end) and whether that is the
sweep's best final, or within ``NEAR_BEST`` of it (bench/early_stopping.py's near-best).
"""
from __future__ import annotations

import time
from typing import Optional

from training.fields import FieldErrors
from webapp.runs import rollups
from webapp.runs.models import ENDED_STATUSES, Run

from .models import FreeSlotUse, Sweep
from .policies import STOP, make_policy, replay
from .policies.metric_ranges import metric_range

REPLAY_POINTS = 200     # per run: the replay decides after each tick, and bayes compares every pair of runs
REPLAY_SECONDS = 5.0    # a replay past this is refused rather than hold a web worker
NEAR_BEST = 0.02        # a kept final within this of the best counts as near-best (bench/early_stopping.py)


class ReplayTooLong(Exception):
    """The replay ran past its time budget."""


class _Deadline(list):
    """A run's points that raise ReplayTooLong once ``deadline`` (time.monotonic) has passed: ``replay`` reads one
    point per running run per tick, so the check runs throughout without a hook of its own in the loop."""

    def __init__(self, points, deadline: float):
        super().__init__(points)
        self.deadline = deadline

    def __getitem__(self, index):
        if time.monotonic() > self.deadline:
            raise ReplayTooLong(f"the replay took longer than {REPLAY_SECONDS:g} s")
        return super().__getitem__(index)


def replay_policy_config(*, sweep: Sweep, policy: dict) -> dict:
    """``policy`` (name, metric, mode and its keys, as the sweep form sends them) checked as the sweep form checks it;
    raises FieldErrors keyed ``policy.<key>``."""
    from .services import policy_config_for

    total = int(sweep.config.get("total_steps") or 0)
    return policy_config_for(policy, total_steps=total, free_slot_use=FreeSlotUse.NOTHING, extend_steps=0)


def sweep_replay(*, sweep: Sweep, policy: dict, finals: Optional[dict] = None) -> dict:
    """Replay ``policy`` on ``sweep``'s stored curves (see the module's docstring). Raises FieldErrors for a bad config
    (``policy.<key>``) or a sweep that has not ended (``sweep``), ReplayTooLong past the budget."""
    from .selectors import metric_mode, run_finals

    config = replay_policy_config(sweep=sweep, policy=policy)
    built = make_policy(config)
    runs = list(Run.objects.filter(sweep=sweep).order_by("pk"))
    if not runs or any(r.status not in ENDED_STATUSES for r in runs):
        raise FieldErrors({"sweep": "replay a sweep once every run of it has ended"})
    metric = config.get("metric") or policy.get("metric") or "reward/mean"
    mode = config.get("mode") or metric_mode(metric, sweep)
    longest = max(r.last_step for r in runs)
    width = rollups.display_width(longest, REPLAY_POINTS)
    guarded = [m for m in built.metrics() if m != metric]  # its guards' metrics, fed alongside
    rows = rollups.bucketed(run_ids=[r.pk for r in runs if r.last_step], keys=[metric, *guarded], width=width)
    deadline = time.monotonic() + REPLAY_SECONDS

    def points(run_id: int, key: str) -> list:
        return [(b[2], b[4] / b[3]) for b in rows.get((run_id, key), [])]

    curves = {r.pk: _Deadline(points(r.pk, metric), deadline) for r in runs}
    curves = {run_id: run_points for run_id, run_points in curves.items() if run_points}
    others = {key: {run_id: points(run_id, key) for run_id in curves} for key in guarded}
    started = time.monotonic()
    result = (replay(config, curves, concurrency=sweep.concurrency, other_metrics=others, width=width,
                     bounds=metric_range(metric, sweep.config))
              if built.reads_curves and curves else None)
    seconds = time.monotonic() - started
    stopped_at = result.stopped_at if result else {}
    reasons = {d.run_id: d.reason for d in (result.decisions if result else []) if d.action == STOP}
    by_id = {r.pk: r for r in runs}
    stored = sum(r.last_step for r in runs)
    planned = sum(max(r.total_steps, r.last_step) for r in runs)
    ran = sum(min(stopped_at.get(r.pk, r.last_step), r.last_step) for r in runs)
    finals = finals if finals is not None else run_finals(
        runs={r.pk: (str(r.uid), r.attempts, r.last_step, True) for r in runs}, metric=metric)
    sign = 1.0 if mode == "max" else -1.0
    complete = [r.pk for r in runs if r.last_step >= r.total_steps and finals.get(r.pk) is not None]
    best = max(complete, key=lambda pk: sign * finals[pk], default=None)
    survivors = [pk for pk in curves if pk not in stopped_at]
    kept = max((pk for pk in survivors if pk in complete), key=lambda pk: sign * finals[pk], default=None)
    unknown = [pk for pk in survivors if pk not in complete]  # it survives here, but the sweep stopped it early
    return {
        "policy": built.describe(), "config": config, "metric": metric, "mode": mode, "width": width,
        "seconds": round(seconds, 3),
        "stored_steps": stored, "run_steps": ran, "saved": round(1 - ran / stored, 4) if stored else 0.0,
        # what the sweep itself did not run of its runs' planned steps (its own stops), to compare with
        "planned_steps": planned, "actual_saved": round(1 - stored / planned, 4) if planned else 0.0,
        "stops": sorted(({"run_id": pk, "seed": by_id[pk].seed, "step": step, "of": by_id[pk].total_steps,
                          "reason": reasons.get(pk, "")} for pk, step in stopped_at.items()),
                        key=lambda s: (s["step"], s["run_id"])),
        "survivors": [{"run_id": pk, "seed": by_id[pk].seed, "final": finals.get(pk) if pk in complete else None}
                      for pk in survivors],
        "unknown": [{"run_id": pk, "seed": by_id[pk].seed, "last_step": by_id[pk].last_step} for pk in unknown],
        "kept": None if kept is None else {"run_id": kept, "seed": by_id[kept].seed, "final": finals[kept]},
        "best": None if best is None else {"run_id": best, "seed": by_id[best].seed, "final": finals[best]},
        "kept_is_best": kept is not None and kept == best,
        "kept_near_best": kept is not None and best is not None
                          and sign * (finals[best] - finals[kept]) <= NEAR_BEST + 1e-12,
        "near_best": NEAR_BEST,
    }
