"""The built-in tiny model's state on every page: a fresh install builds it in the first run that needs it
(training.tiny.ensure_tiny_model), and until then every page says so, with the build's progress.

A context processor puts ``builtin_model`` into every template; ``state_view`` answers the banner's htmx poll
with the banner itself (templates/_builtin_model.html), and 286 (stop polling) once the model is ready.
"""
from django.shortcuts import render
from django.views.decorators.http import require_GET

from training.config import default_tiny_model_dir
from training.tiny import tiny_build_state


def builtin_model(request) -> dict:
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    state = tiny_build_state(default_tiny_model_dir())
    return {"builtin_model": state} if state["state"] != "ready" else {}


@require_GET
def state_view(request):
    state = tiny_build_state(default_tiny_model_dir())
    return render(request, "_builtin_model.html", {"builtin_model": state},
                  status=286 if state["state"] == "ready" else 200)
