"""The built-in tiny model's state on every page: a fresh install builds it in the first run that needs it
(training.tiny.ensure_tiny_model), and until then every page says so, with the build's progress and about how long
it has left.

A context processor puts ``builtin_model`` into every template; ``state_view`` answers the banner's htmx poll
with the banner itself (templates/_builtin_model.html), and 286 (stop polling) once the model is ready: that last
banner asks once more a few seconds later (``?gone=1``) and is answered with nothing, so a page left open does not
keep saying "ready".
"""
from __future__ import annotations

import time

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from training.config import default_tiny_model_dir
from training.tiny import tiny_build_state


GROWTH_POWER = 2.5
"""pass@1 of the build grows about as step ** 2.5 (convex: flat at first, then rising), read off six recorded
builds (bench/curves/tiny_builds_2026-12-03.json: 275-775 steps, on a loaded 2-core machine)."""
PRIOR_STEPS = 400
"""Where a build with no correct answer yet is taken to end: the median of those builds' steps."""


def build_eta_s(*, step: int, recent: list, target: float, max_steps: int, elapsed_s: float) -> float | None:
    """Seconds the build has left at its pace so far (``elapsed_s / step`` a step): it ends where pass@1, growing
    as step ** GROWTH_POWER through the mean of its ``recent`` checks (``[step, pass1]``, the last 3), reaches
    ``target``: ``end = s_mean (target / p_mean) ** (1 / GROWTH_POWER)``, at ``PRIOR_STEPS`` while no check has
    scored yet, never before ``step`` nor past ``max_steps`` (training.tiny.bootstrap_tiny). None before its
    first check. (A straight line through the best check, the estimate before, overshot the recorded builds'
    ends up to 7 x at a quarter of the way: tests/test_build_eta.py.)

    >>> build_eta_s(step=100, recent=[[50, 0.0], [75, 0.0], [100, 0.0]], target=0.15, max_steps=4000, elapsed_s=50.0)
    150.0
    >>> round(build_eta_s(step=200, recent=[[150, 0.02], [175, 0.03], [200, 0.04]], target=0.15, max_steps=4000,
    ...                   elapsed_s=100.0))
    67
    >>> build_eta_s(step=0, recent=[], target=0.15, max_steps=4000, elapsed_s=3.0) is None
    True
    """
    if step <= 0:
        return None
    checks = [(float(s), float(p)) for s, p in recent] or [(float(step), 0.0)]
    mean_step = sum(s for s, _ in checks) / len(checks)
    mean_pass = sum(p for _, p in checks) / len(checks)
    end = PRIOR_STEPS if mean_pass <= 0 else mean_step * (target / mean_pass) ** (1.0 / GROWTH_POWER)
    return max(0.0, min(max_steps, max(step, end)) - step) * elapsed_s / step


def with_eta(state: dict, now: float) -> dict:
    """``state`` (tiny_build_state's) with ``eta_s`` (``build_eta_s``) and ``dipped`` (this check is below the
    best so far: the banner says pass@1 is noisy instead of silently going backwards)."""
    if state.get("state") != "building" or "step" not in state or "started_at" not in state:
        return state
    best = max(float(state.get("best", 0.0)), float(state.get("pass1", 0.0)))
    recent = state.get("recent") or [[int(state["step"]), float(state.get("pass1", 0.0))]]
    eta = build_eta_s(step=int(state["step"]), recent=recent, target=float(state.get("target", 0.15)),
                      max_steps=int(state.get("max_steps", 4000)),
                      elapsed_s=now - float(state.get("started_at", now)))
    return {**state, "best": best, "dipped": float(state.get("pass1", 0.0)) < best,
            "eta_min": None if eta is None else max(1, round(eta / 60))}


def builtin_model(request) -> dict:
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    state = tiny_build_state(default_tiny_model_dir())
    return {"builtin_model": with_eta(state, time.time())} if state["state"] != "ready" else {}


@require_GET
def state_view(request):
    state = tiny_build_state(default_tiny_model_dir())
    if state["state"] == "ready" and request.GET.get("gone"):
        return HttpResponse("", status=286)  # the "ready" banner's last ask: it goes
    return render(request, "_builtin_model.html", {"builtin_model": with_eta(state, time.time())},
                  status=286 if state["state"] == "ready" else 200)
