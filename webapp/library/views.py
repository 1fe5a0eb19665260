"""The models page: the library (built-in models, registered folders, imported GGUF files) and checkpoints of
runs as models; register a folder or import a GGUF file; a model's description and the runs that used it."""
from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from training.fields import FieldErrors
from webapp.projects.models import Role
from webapp.projects.selectors import get_visible, project_by_name, projects_where

from . import selectors, services
from .models import ModelEntry


def _project(request: HttpRequest):
    name = request.POST.get("project") or None
    if name is None:
        return None
    try:
        return project_by_name(request.user, name)
    except Exception:
        raise FieldErrors({"project": f"no project {name!r} among yours"}) from None


def model_list(request: HttpRequest) -> HttpResponse:
    errors, form = {}, ""
    if request.method == "POST":
        form = request.POST.get("form", "")
        try:
            project = _project(request)
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


@require_GET
def model_detail(request: HttpRequest, entry_id: int) -> HttpResponse:
    entry = get_visible(ModelEntry.objects.select_related("project"), request.user, pk=entry_id)
    response = render(request, "library/model_detail.html", {
        "entry": entry, "d": entry.description, "runs": selectors.runs_using(user=request.user, path=entry.path)})
    if entry.status == ModelEntry.Status.IMPORTING:
        response["Refresh"] = "3"  # plain reload while the import runs (no script needed)
    return response
