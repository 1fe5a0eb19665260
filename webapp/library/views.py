"""The models page: the library (built-in models, registered folders, imported GGUF files) and checkpoints of
runs as models; register a folder or import a GGUF file; a model's description, the runs that used it, and a
"try it" box (a prompt, a reply generated on a worker, polled by htmx until it is there)."""
from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from training.fields import FieldErrors
from webapp.projects.models import Role
from webapp.projects.selectors import get_visible, has_role, launch_project_named, projects_where

from . import selectors, services
from .models import ModelEntry


def model_list(request: HttpRequest) -> HttpResponse:
    errors, form = {}, ""
    if request.method == "POST":
        form = request.POST.get("form", "")
        try:
            project = launch_project_named(request.user, request.POST.get("project"))
            if form == "import":
                entry = services.model_import_gguf(user=request.user, project=project, name=request.POST.get("name"),
                                                   gguf=request.POST.get("gguf"))
                messages.success(request, f"Importing {entry.name}: about a minute per 100 M parameters.")
            else:
                entry = services.model_register(user=request.user, project=project, name=request.POST.get("name"),
                                                path=request.POST.get("path"))
                messages.success(request, f"Model {entry.name} registered.")
            return redirect("library:model", entry_id=entry.pk)
        except FieldErrors as exc:
            errors = exc.errors
    projects = projects_where(request.user, Role.MEMBER).distinct()
    return render(request, "library/model_list.html", {
        "entries": selectors.model_entries(user=request.user), "builtin": selectors.builtin_models(),
        "checkpoints": selectors.checkpoint_models(user=request.user), "errors": errors, "form": form,
        "posted": request.POST, "projects": projects}, status=400 if errors else 200)


def _try_box(request: HttpRequest, *, entry: ModelEntry | None = None, builtin: dict | None = None,
             errors: dict | None = None) -> dict:
    """The "try it" box's context: the form (only for who may try: members and admins of the entry's project;
    anyone for a built-in model, tried in their personal project) and the user's last trials of this model."""
    if entry is not None:
        can_try = has_role(request.user, entry.project_id, Role.MEMBER)
        url = reverse("library:model-try", args=[entry.pk])
        trials = selectors.trials_of(user=request.user, entry=entry)
    else:
        can_try, url = True, reverse("library:builtin-try", args=[builtin["key"]])
        trials = selectors.trials_of(user=request.user, builtin=builtin["key"])
    posted = request.POST if request.method == "POST" else {}
    description = entry.description if entry is not None else builtin["description"]
    return {"can_try": can_try, "has_chat_template": bool((description or {}).get("chat_template")),
            "try_url": url, "trials": trials, "try_errors": errors or {},
            "ready": entry is None or entry.status == ModelEntry.Status.READY, "posted": posted,
            "defaults": services.TRIAL_DEFAULTS, "ranges": services.trial_help(),
            "chat_checked": "chat" in posted if posted else services.TRIAL_DEFAULTS["chat"]}


def _detail(request: HttpRequest, *, entry: ModelEntry | None = None, builtin: dict | None = None,
            errors: dict | None = None) -> HttpResponse:
    path = entry.path if entry is not None else builtin["path"]
    response = render(request, "library/model_detail.html", {
        "entry": entry, "builtin": builtin, "d": entry.description if entry is not None else builtin["description"],
        "runs": selectors.runs_using(user=request.user, path=path),
        **_try_box(request, entry=entry, builtin=builtin, errors=errors)}, status=400 if errors else 200)
    if entry is not None and entry.status == ModelEntry.Status.IMPORTING:
        response["Refresh"] = "3"  # plain reload while the import runs (no script needed)
    return response


def _entry(request: HttpRequest, entry_id: int) -> ModelEntry:
    return get_visible(ModelEntry.objects.select_related("project"), request.user, pk=entry_id)


@require_GET
def model_detail(request: HttpRequest, entry_id: int) -> HttpResponse:
    return _detail(request, entry=_entry(request, entry_id))


@require_GET
def builtin_detail(request: HttpRequest, key: str) -> HttpResponse:
    return _detail(request, builtin=selectors.builtin_model(key))


def _try(request: HttpRequest, *, entry: ModelEntry | None = None, builtin: dict | None = None) -> HttpResponse:
    """Queue a trial. From htmx: the try box again (the new trial polling in its list; errors in the form, with
    status 200 because htmx swaps only successful answers). Without script: back to the page, or the page
    with the errors (400)."""
    errors = {}
    try:
        services.model_try(user=request.user, entry=entry, builtin=builtin, prompt=request.POST.get("prompt"),
                           max_new_tokens=request.POST.get("max_new_tokens"),
                           temperature=request.POST.get("temperature"), chat="chat" in request.POST)
    except FieldErrors as exc:
        errors = exc.errors
    if request.headers.get("HX-Request"):
        return render(request, "library/_try.html", _try_box(request, entry=entry, builtin=builtin, errors=errors))
    if errors:
        return _detail(request, entry=entry, builtin=builtin, errors=errors)
    return redirect("library:model", entry_id=entry.pk) if entry is not None else \
        redirect("library:builtin", key=builtin["key"])


@require_POST
def model_try(request: HttpRequest, entry_id: int) -> HttpResponse:
    return _try(request, entry=_entry(request, entry_id))


@require_POST
def builtin_try(request: HttpRequest, key: str) -> HttpResponse:
    return _try(request, builtin=selectors.builtin_model(key))


@require_GET
def trial_state(request: HttpRequest, trial_id: int) -> HttpResponse:
    """One of the user's trials (templates/library/_trial.html), polled every second while it is queued or
    running; 286 (htmx: stop polling) once it has ended."""
    trial = selectors.get_trial(user=request.user, trial_id=trial_id)
    return render(request, "library/_trial.html", {"t": trial}, status=286 if trial.is_ended else 200)
