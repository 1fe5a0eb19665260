"""Thin views: the user's projects (make one), a project's members (its admins add or change them) and its
activity."""
from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from training.fields import FieldErrors

from . import selectors, services
from .models import AuditEvent, Role


def project_list(request: HttpRequest) -> HttpResponse:
    errors = {}
    if request.method == "POST":
        try:
            project = services.project_create(user=request.user, name=request.POST.get("name", ""))
        except FieldErrors as exc:
            errors = exc.errors
        else:
            messages.success(request, f"Project {project.name} made; you are its admin.")
            return redirect("projects:detail", name=project.name)
    projects = selectors.visible_projects(request.user).distinct().order_by("name")
    rows = [{"project": p, "role": selectors.role_in(request.user, p.pk)} for p in projects]
    return render(request, "projects/project_list.html", {"rows": rows, "errors": errors},
                  status=400 if errors else 200)


def project_detail(request: HttpRequest, name: str) -> HttpResponse:
    project = selectors.project_by_name(request.user, name)
    errors = {}
    if request.method == "POST":
        try:
            membership = services.member_set(user=request.user, project=project,
                                             username=request.POST.get("username", ""),
                                             role=request.POST.get("role", ""))
        except FieldErrors as exc:
            errors = exc.errors
        else:
            messages.success(request, f"{membership.user.get_username()} is now a {membership.role} of {project.name}.")
            return redirect("projects:detail", name=project.name)
    return render(request, "projects/project_detail.html", {
        "project": project, "members": selectors.project_members(project), "errors": errors,
        "is_admin": selectors.has_role(request.user, project.pk, Role.ADMIN), "roles": Role.values,
        "audit": AuditEvent.objects.filter(project=project).order_by("-at", "-id")[:100]},
        status=400 if errors else 200)
