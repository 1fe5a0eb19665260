"""A sweep's summary that can be trusted: each run judged by its final value (the mean of the metric over the last
10 % of its steps, not its noisiest single step), the runs ranked by it with the leader marked, each grid point's
mean final across seeds with its 95 % interval, and the compute its stopped runs did not spend. Pure Python."""
from __future__ import annotations

import math
from typing import Optional


# two-sided 95 % Student t quantiles for df = 1..30 (static/sweeps/sweep_dashboard.js uses the same)
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95 % t interval (0 for one value).

    >>> mean_ci([1.0, 2.0, 3.0])
    (2.0, 2.484338)
    """
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, round((T975[n - 2] if n - 1 <= 30 else 1.96) * sd / math.sqrt(n), 6)


def reached_end(row: dict) -> bool:
    """Whether a run's final is its final: it stored its last step (``last_step >= total_steps``) and did not end
    otherwise (a run killed, failed or lost at its last step is not counted as finished). A running run at its
    last step is finishing: its final no longer moves.

    >>> reached_end({"status": "succeeded", "last_step": 10, "total_steps": 10})
    True
    >>> reached_end({"status": "running", "last_step": 4, "total_steps": 10})
    False
    >>> reached_end({"status": "killed", "last_step": 10, "total_steps": 10})
    False
    """
    return (row["total_steps"] > 0 and row["last_step"] >= row["total_steps"]
            and row["status"] in ("succeeded", "running"))


def in_race(row: dict) -> bool:
    """Whether a run was not stopped early: it ran to its horizon (``reached_end``) or is running (or queued) towards
    it with no stop asked. A run killed, failed or lost before its last step, or one being stopped, is out.

    >>> in_race({"status": "running", "last_step": 4, "total_steps": 10})
    True
    >>> in_race({"status": "killed", "last_step": 4, "total_steps": 10})
    False
    >>> in_race({"status": "running", "last_step": 4, "total_steps": 10, "kill_requested": True})
    False
    """
    if reached_end(row):
        return True
    return row["status"] in ("running", "queued") and not row.get("kill_requested")


def best_run(rows: list[dict], mode: str) -> Optional[dict]:
    """The best seed of ``rows``, the one definition the dashboard uses (its "Best so far" line, the highlighted
    row, each grid point's "Best seed"): the best final among the runs not stopped early (``in_race``); a stopped
    run only where none of them has a final yet. None without any final. Ties: the smaller id.

    >>> rows = [{"id": 9, "final": 0.32, "status": "killed", "last_step": 28, "total_steps": 40},
    ...         {"id": 10, "final": 0.29, "status": "succeeded", "last_step": 40, "total_steps": 40}]
    >>> best_run(rows, "max")["id"], best_run(rows[:1], "max")["id"], best_run([], "max")
    (10, 9, None)
    """
    sign = 1.0 if mode == "max" else -1.0
    judged = [r for r in rows if r.get("final") is not None]
    pool = [r for r in judged if in_race(r)] or judged
    return min(pool, key=lambda r: (-sign * r["final"], r["id"])) if pool else None


def summarize(rows: list[dict], mode: str) -> dict:
    """``rows``: the runs table (each with ``id``, ``seed``, ``final``, ``knobs_text``, ``status``, ``last_step``,
    ``total_steps``, optionally ``kill_requested``). Sorts them best final first (runs without one last), marks the
    leader (``best_run``: a run stopped early is not named best while another has a final), and returns the
    summary: ``leader`` (its row), ``cells`` (per grid point: the best cell first), ``saved`` (share of the sweep's
    steps its killed runs did not run) and ``saved_steps``.

    A cell's ``mean`` and ``ci`` (the 95 % t interval, ``mean_ci``) cover only its runs that reached their last
    step (``reached_end``, ``n`` of its ``total`` runs, queued ones included): a running run's final moves and a stopped run's is taken
    early, so mixing either in changes what the interval means as seeds finish. Those are shown apart:
    ``running`` and ``stopped`` (counts) and ``so_far`` (the mean of their finals so far, None without one). Cells
    rank by their finished mean, then (none finished) by their mean so far.

    >>> rows = [{"id": 1, "seed": 0, "final": 0.5, "knobs_text": "", "status": "succeeded", "last_step": 10,
    ...          "total_steps": 10}, {"id": 2, "seed": 1, "final": 0.7, "knobs_text": "", "status": "killed",
    ...          "last_step": 4, "total_steps": 10}]
    >>> s = summarize(rows, "max")
    >>> [r["id"] for r in rows], s["leader"]["id"], s["saved"]
    ([2, 1], 1, 0.3)
    >>> c = s["cells"][0]
    >>> c["n"], c["total"], c["mean"], c["ci"], c["stopped"], c["running"], c["so_far"]
    (1, 2, 0.5, 0.0, 1, 0, 0.7)
    """
    sign = 1.0 if mode == "max" else -1.0
    rows.sort(key=lambda r: (r.get("final") is None, -sign * (r.get("final") or 0.0), r["id"]))
    leader = best_run(rows, mode)
    for r in rows:
        r["leader"] = r is leader
    cells: dict[str, list[dict]] = {}
    for r in rows:
        cells.setdefault(r.get("knobs_text") or "", []).append(r)
    summary = []
    for cell, everyone in cells.items():
        members = [m for m in everyone if m.get("final") is not None]
        if not members:
            continue
        done = [m for m in members if reached_end(m)]
        early = [m for m in members if not reached_end(m)]
        mean, ci = mean_ci([m["final"] for m in done]) if done else (None, None)
        summary.append({"cell": cell, "n": len(done), "total": len(everyone), "mean": mean, "ci": ci,
                        "best": best_run(members, mode),
                        "running": sum(m["status"] in ("running", "queued") for m in early),
                        "stopped": sum(m["status"] not in ("running", "queued") for m in early),
                        "so_far": sum(m["final"] for m in early) / len(early) if early else None})
    summary.sort(key=lambda c: (c["mean"] is None, -sign * (c["mean"] if c["mean"] is not None else c["so_far"])))
    total = sum(r["total_steps"] for r in rows)
    saved_steps = sum(max(0, r["total_steps"] - r["last_step"]) for r in rows if r["status"] == "killed")
    return {"leader": leader, "cells": summary, "saved_steps": saved_steps,
            "saved": round(saved_steps / total, 4) if total else 0.0}
