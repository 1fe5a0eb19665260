"""The datasets page: a project's datasets (upload a file or register one on the server), the built-in
sources, and one dataset's preview, field mapping and split."""
from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt, csrf_protect

from training.data import MAPPED_FIELDS, MAX_DATASET_BYTES, held_out_size
from training.fields import FieldErrors
from webapp.projects.models import Role
from webapp.projects.selectors import get_visible, has_role, launch_project_named, projects_where

from . import selectors, services
from .models import DatasetEntry
from .uploads import DatasetUpload


def _fields(post) -> dict:
    return {name: post.get(f"fields.{name}", "") for name in MAPPED_FIELDS if f"fields.{name}" in post}


@csrf_exempt  # the upload handler must be set before the CSRF check reads the body; csrf_protect follows
def dataset_list(request: HttpRequest) -> HttpResponse:
    handler = DatasetUpload(request, limit=MAX_DATASET_BYTES)
    if request.method == "POST":
        request.upload_handlers = [handler]
    return _dataset_list(request, handler)


@csrf_protect
def _dataset_list(request: HttpRequest, handler: DatasetUpload) -> HttpResponse:
    errors, form = {}, ""
    if request.method == "POST":
        form = request.POST.get("form", "")
        try:
            if handler.too_large:  # first: the fields after the file were not read
                raise FieldErrors({"file": handler.message})
            project = launch_project_named(request.user, request.POST.get("project"))
            common = dict(user=request.user, project=project, name=request.POST.get("name"),
                          prompt_field=request.POST.get("prompt_field") or None,
                          answer_field=request.POST.get("answer_field") if "answer_field" in request.POST and
                          request.POST.get("answer_field") != "" else None,
                          held_out_fraction=request.POST.get("held_out_fraction", "0.1"),
                          split_seed=request.POST.get("split_seed", "0"))
            if form == "register":
                entry = services.dataset_register(path=request.POST.get("path"), **common)
            else:
                entry = services.dataset_upload(upload=request.FILES.get("file"), **common)
            messages.success(request, f"Dataset {entry.name}: {entry.rows:,} rows. Check the mapping below.")
            return redirect("datasets:detail", entry_id=entry.pk)
        except FieldErrors as exc:
            errors = exc.errors
    return render(request, "datasets/dataset_list.html", {
        "entries": selectors.dataset_entries(user=request.user), "builtin": selectors.builtin_sources(),
        "errors": errors, "form": form, "posted": request.POST, "max_mb": MAX_DATASET_BYTES // 1_000_000,
        "projects": projects_where(request.user, Role.MEMBER).distinct()}, status=400 if errors else 200)


def dataset_detail(request: HttpRequest, entry_id: int) -> HttpResponse:
    entry = get_visible(DatasetEntry.objects.select_related("project", "created_by"), request.user, pk=entry_id)
    errors = {}
    if request.method == "POST":
        try:
            if request.POST.get("form") == "delete":
                services.dataset_delete(user=request.user, entry=entry)
                messages.success(request, f"Dataset {entry.name} removed (its file stays for the runs that used it).")
                return redirect("datasets:list")
            services.dataset_update(user=request.user, entry=entry, prompt_field=request.POST.get("prompt_field"),
                                    answer_field=request.POST.get("answer_field", ""), fields=_fields(request.POST),
                                    held_out_fraction=request.POST.get("held_out_fraction"),
                                    split_seed=request.POST.get("split_seed"))
            messages.success(request, "Mapping saved: new runs read the dataset this way.")
            return redirect("datasets:detail", entry_id=entry.pk)
        except FieldErrors as exc:
            errors = exc.errors
    held = held_out_size(entry.rows, entry.held_out_fraction)
    return render(request, "datasets/dataset_detail.html", {
        "entry": entry, "errors": errors, "mapped": [(n, entry.fields.get(n, "")) for n in MAPPED_FIELDS],
        "can_edit": has_role(request.user, entry.project_id, Role.MEMBER), "held": held,
        "preview_columns": entry.columns}, status=400 if errors else 200)
