"""Can a sweep's policy ever stop a run? Checked before the sweep is made: a policy that compares runs with their
peers (median, ASHA, bayes) needs ``min_peers`` runs that reached the same step, and a small sweep, or one run
a few at a time, may never give it that many. Such a policy would watch every run to its end and say nothing.

``policy_cannot_act`` replays an idealised sweep of the same shape through the policy (``replay``: ``n_runs``
noiseless-looking flat curves, one clearly worst, the sweep's concurrency): if even that worst run is never
stopped, no run of the real sweep will be. It then looks for the nearest settings that would act (a lower
``min_peers``, a higher concurrency, more runs) and says so.
"""
from __future__ import annotations

import json
from functools import lru_cache
from typing import Optional

from .decision import STOP
from .registry import make_policy, replay

POINTS = 60  # points each idealised curve logs, spread over max_steps (the policy's steps are real steps)
MORE_RUNS = 8  # how many more runs it tries before it stops looking


def _curves(n_runs: int, max_steps: int, mode: str) -> dict:
    """Flat curves with a small wobble (so noise estimates are not 0), the last run clearly the worst."""
    steps = sorted({max(1, round(max_steps * k / min(POINTS, max_steps))) for k in range(1, min(POINTS, max_steps) + 1)})
    good, bad = (1.0, 0.0) if mode == "max" else (0.0, 1.0)
    return {f"run-{i}": [(s, (bad if i == n_runs - 1 else good) + (0.01 if (s + i) % 2 else -0.01)) for s in steps]
            for i in range(n_runs)}


def stops_a_run(config: dict, n_runs: int, concurrency: int) -> bool:
    """Whether the policy stops the clearly worst run of an idealised sweep of this shape."""
    curves = _curves(n_runs, int(config["max_steps"]), config.get("mode", "max"))
    result = replay(config, curves, concurrency=min(concurrency, n_runs))
    return any(d.action == STOP for d in result.decisions)


def policy_cannot_act(config: dict, n_runs: int, concurrency: int) -> Optional[str]:
    """None when the policy can stop a run of a sweep of ``n_runs`` runs, ``concurrency`` at a time; else why not
    and the nearest settings that would act.

    >>> policy_cannot_act({"name": "median", "metric": "m", "max_steps": 40}, 2, 2)[:66]
    'the median policy can never stop a run of this sweep (2 runs, 2 at'
    >>> policy_cannot_act({"name": "median", "metric": "m", "max_steps": 40}, 8, 4) is None
    True
    """
    policy = make_policy(config)
    if not policy.compares_peers:
        return None
    if stops_a_run(config, n_runs, concurrency):
        return None
    would = []
    peers = getattr(policy.params, "min_peers", None)
    if peers:
        lower = next((p for p in range(peers - 1, -1, -1) if stops_a_run({**config, "min_peers": p}, n_runs,
                                                                           concurrency)), None)
        if lower is not None:
            would.append(f"min_peers {lower}")
    if concurrency < n_runs and stops_a_run(config, n_runs, n_runs):
        higher = next(c for c in range(concurrency + 1, n_runs + 1) if stops_a_run(config, n_runs, c))
        would.append(f"concurrency {higher}")
    more = next((n for n in range(n_runs + 1, n_runs + MORE_RUNS + 1)
                 if stops_a_run(config, n, max(concurrency, 1))), None)
    if more is not None:
        would.append(f"{more} runs (seeds × grid points)")
    name = config.get("name")
    return (f"the {name} policy can never stop a run of this sweep ({n_runs} runs, {concurrency} at a time): "
            f"no run ever has the {peers if peers is not None else 'needed'} peers at the same step it compares "
            f"with" + (f"; it would act with {' or '.join(would)}" if would else "") +
            " (or choose manual)")


NOTE_MARK = "policy can never stop a run of this sweep"  # in every note policy_cannot_act gives


def policy_cannot_act_cached(config: dict, n_runs: int, concurrency: int) -> Optional[str]:
    """``policy_cannot_act``, remembered per (config, runs, slots) in this process: a sweep's check asks it again
    at every check (the slots free change now and then; the answer for the same ones does not)."""
    return _cannot_act(json.dumps(config, sort_keys=True), n_runs, concurrency)


@lru_cache(maxsize=256)
def _cannot_act(config_json: str, n_runs: int, concurrency: int) -> Optional[str]:
    return policy_cannot_act(json.loads(config_json), n_runs, concurrency)
