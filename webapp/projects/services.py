"""Projects' writes and the one permission check every acting service makes (docs/architecture.md#projects-and-trust).

``require_role`` is called by the services that act for a user (launch, kill, resume, cancel, policy change,
members): a non-member gets Http404 (as for a read), a member whose role is too low gets PermissionDenied
(403). ``audit`` records who did it. A service acting for the system (a policy, a worker) passes no user.
"""
from __future__ import annotations

import logging
import re

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.http import Http404

from training.fields import FieldErrors
from training.names import path_component_error

from .models import (DEFAULT_PROJECT, ROLE_RANK, AuditEvent, Membership, Project, Role, is_reserved_project_name,
                     project_name_validator)
from .selectors import role_in, visible_projects

log = logging.getLogger("seedbed.projects")

# DEFAULT_PROJECT (from .models) owns objects made without a user (a script, a test, rows from before projects
# existed): staff only. A data migration makes it; no user may take its name.

# A personal project takes its user's name when that name is a safe project name (it becomes the project's
# library folder): a word character first, then the characters Django allows in usernames.
_PERSONAL_NAME = re.compile(r"^\w[\w.@+-]*\Z")


def require_role(user, project: Project | int, role: str) -> None:
    project_id = project if isinstance(project, int) else project.pk
    current = role_in(user, project_id)
    if current is None:
        raise Http404("not found in your projects")
    if ROLE_RANK[current] < ROLE_RANK[role]:
        raise PermissionDenied(f"you are a {current} of this project; this needs a {role}")


def actor_name(user) -> str:
    return user.get_username() if user is not None else "system"


def audit(*, project: Project | int, user=None, actor: str = "", action: str, target_type: str, target_id: int,
          **detail) -> AuditEvent:
    """Record an action: ``user`` acted (or the system, named by ``actor``, e.g. "policy:asha")."""
    project_id = project if isinstance(project, int) else project.pk
    return AuditEvent.objects.create(project_id=project_id, actor=user, actor_name=actor or actor_name(user),
                                     action=action, target_type=target_type, target_id=target_id, detail=detail)


def default_project() -> Project:
    """The staff-only project for work made without a user. The migrations make it; a database emptied since (a
    test's flush) gets it again here, with no members: the name is reserved, so no user can hold it first."""
    project, _ = Project.objects.get_or_create(name=DEFAULT_PROJECT)
    return project


def personal_project(user) -> Project:
    """The user's personal project (made on first need for a user from before projects existed)."""
    project = Project.objects.filter(personal_for=user).first()
    return project if project is not None else _make_personal(user)


def project_for_launch(*, user, project: Project | None) -> Project:
    """Where new work goes: the project named, else the user's personal project (the default project for work
    made without a user); the user must be at least a member there."""
    if project is None:
        project = personal_project(user) if user is not None else default_project()
    if user is not None:
        require_role(user, project, Role.MEMBER)
    return project


@transaction.atomic
def _make_personal(user) -> Project:
    # a project that already carries the name stays its owners' (the new user never inherits it)
    project = Project.objects.create(name=_free_name(_personal_name(user)), personal_for=user, created_by=user)
    Membership.objects.get_or_create(project=project, user=user, defaults={"role": Role.ADMIN})
    return project


def _personal_name(user) -> str:
    """The username, or "user-<id>" when the username would not be a safe project name (".", "..", a leading
    dot, a reserved name such as "default")."""
    name = user.get_username()
    if path_component_error(name) or not _PERSONAL_NAME.match(name) or is_reserved_project_name(name):
        return f"user-{user.pk}"
    return name


def _free_name(name: str) -> str:
    candidate, n = name, 1
    while is_reserved_project_name(candidate) or Project.objects.filter(name=candidate).exists():
        n += 1
        candidate = f"{name}-{n}"
    return candidate


def on_user_saved(sender, instance, created: bool, raw: bool = False, **_) -> None:
    if created and not raw:
        _make_personal(instance)


def _check_name(name) -> str:
    if not isinstance(name, str) or not name.strip():
        raise FieldErrors({"name": "give the project a name"})
    name = name.strip()
    if len(name) > 150:
        raise FieldErrors({"name": f"at most 150 characters; got {len(name)}"})
    try:
        project_name_validator(name)
    except ValidationError as exc:
        raise FieldErrors({"name": exc.messages[0]}) from None
    problem = path_component_error(name)  # the name is also the project's library folder
    if problem:
        raise FieldErrors({"name": problem})
    return name


def _unavailable(name: str) -> FieldErrors:
    # The same words for a reserved name and for a project the caller cannot see: project names are unique across
    # the site (they are URLs and folders), so a refusal must say the name is taken, but not that a project of
    # someone else's is behind it.
    return FieldErrors({"name": f"{name!r} is taken or reserved; choose another name"})


@transaction.atomic
def project_create(*, user, name) -> Project:
    """A new project with ``user`` as its admin. Reserved names (any case) are refused: the app makes those
    projects itself, so asking for the name first never makes a user their admin."""
    name = _check_name(name)
    if is_reserved_project_name(name):
        raise _unavailable(name)
    if Project.objects.filter(name=name).exists():
        if visible_projects(user).filter(name=name).exists():
            raise FieldErrors({"name": f"you have a project named {name!r} already"})
        raise _unavailable(name)
    try:
        with transaction.atomic():
            project = Project.objects.create(name=name, created_by=user)
    except IntegrityError:  # created concurrently
        raise _unavailable(name) from None
    Membership.objects.create(project=project, user=user, role=Role.ADMIN)
    audit(project=project, user=user, action="project.create", target_type="project", target_id=project.pk)
    return project


@transaction.atomic
def member_set(*, user, project: Project, username, role) -> Membership:
    """Add ``username`` to the project with ``role`` (or change their role); project admins only."""
    require_role(user, project, Role.ADMIN)
    errors = {}
    if role not in Role.values:
        errors["role"] = f"one of {', '.join(Role.values)}; got {role!r}"
    member = None
    if not isinstance(username, str) or not username.strip():
        errors["username"] = "give the username of the user to add"
    else:
        member = get_user_model().objects.filter(username=username.strip(), is_active=True).first()
        if member is None:
            errors["username"] = f"no active user {username.strip()!r}"
    if errors:
        raise FieldErrors(errors)
    current = Membership.objects.filter(project=project, user=member).first()
    if current is not None and current.role == Role.ADMIN and role != Role.ADMIN \
            and not Membership.objects.filter(project=project, role=Role.ADMIN).exclude(pk=current.pk).exists():
        raise FieldErrors({"role": f"{member.get_username()} is this project's last admin; make another admin first"})
    membership, _ = Membership.objects.update_or_create(project=project, user=member, defaults={"role": role})
    audit(project=project, user=user, action="project.member", target_type="project", target_id=project.pk,
          username=member.get_username(), role=role)
    return membership
