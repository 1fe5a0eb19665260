"""/api/v1/me and /api/v1/projects: who the token is, the projects it sees, their members
(docs/architecture.md#projects-and-trust)."""
from __future__ import annotations

from ninja import Schema, Status
from pydantic import Field

from webapp.api import selectors
from webapp.api.v1 import api
from webapp.projects import selectors as project_selectors
from webapp.projects import services as project_services


class ProjectIn(Schema):
    name: str = Field(max_length=150)


class MemberIn(Schema):
    username: str = Field(max_length=150)
    role: str = Field(max_length=10)


@api.get("/me", tags=["projects"])
def me(request):
    """Who the token belongs to and the projects they see, with their role in each."""
    return {"username": request.user.get_username(), "is_staff": request.user.is_staff,
            "projects": selectors.projects_of(request.user)}


@api.get("/projects", tags=["projects"])
def projects_list(request):
    return {"projects": selectors.projects_of(request.user)}


@api.post("/projects", response={201: dict}, tags=["projects"])
def projects_create(request, payload: ProjectIn):
    project = project_services.project_create(user=request.user, name=payload.name)
    return Status(201, {"name": project.name, "role": "admin"})


@api.get("/projects/{name}/members", tags=["projects"])
def members_list(request, name: str):
    project = project_selectors.project_by_name(request.user, name)
    return {"members": [{"username": m.user.get_username(), "role": m.role}
                        for m in project_selectors.project_members(project)]}


@api.post("/projects/{name}/members", response={201: dict}, tags=["projects"])
def members_add(request, name: str, payload: MemberIn):
    project = project_selectors.project_by_name(request.user, name)
    membership = project_services.member_set(user=request.user, project=project, username=payload.username,
                                             role=payload.role)
    return Status(201, {"project": project.name, "username": membership.user.get_username(), "role": membership.role})
