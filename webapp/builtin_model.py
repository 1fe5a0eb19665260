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


def build_eta_s(*, step: int, best: float, target: float, max_steps: int, elapsed_s: float) -> float | None:
    """Seconds the build has left, extrapolated from its pace so far: pass@1 taken to grow linearly from 0 at
    step 0 to ``best`` (its best check) at ``step``, the build ends at ``step * target / best`` steps, or at
    ``max_steps`` if sooner (training.tiny.bootstrap_tiny), each step taking ``elapsed_s / step``. None before
    its first check.

    >>> build_eta_s(step=100, best=0.05, target=0.15, max_steps=4000, elapsed_s=50.0)
    100.0
    >>> build_eta_s(step=100, best=0.0, target=0.15, max_steps=400, elapsed_s=50.0)
    150.0
    >>> build_eta_s(step=0, best=0.0, target=0.15, max_steps=4000, elapsed_s=3.0) is None
    True
    """
    if step <= 0:
        return None
    end = max_steps if best <= 0 else min(max_steps, step * target / best)
    return max(0.0, end - step) * elapsed_s / step


def with_eta(state: dict, now: float) -> dict:
    """``state`` (tiny_build_state's) with ``eta_s`` (``build_eta_s``) and ``dipped`` (this check is below the
    best so far: the banner says pass@1 is noisy instead of silently going backwards)."""
    if state.get("state") != "building" or "step" not in state or "started_at" not in state:
        return state
    best = max(float(state.get("best", 0.0)), float(state.get("pass1", 0.0)))
    eta = build_eta_s(step=int(state["step"]), best=best, target=float(state.get("target", 0.15)),
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
