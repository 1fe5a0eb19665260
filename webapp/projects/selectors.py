"""Who may see what (docs/architecture.md#projects-and-trust): every read of a run, sweep or evaluation goes through ``visible`` or
``get_visible`` with the acting user; a non-member gets 404, not the data."""
from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from .models import ROLE_RANK, AuditEvent, Membership, Project, Role


def role_in(user, project_id: int | None) -> str | None:
    """The user's role in the project: staff are admins everywhere; None for a non-member (or no user)."""
    if user is None or not user.is_authenticated or not user.is_active or project_id is None:
        return None
    if user.is_staff:
        return Role.ADMIN
    return Membership.objects.filter(project_id=project_id, user=user).values_list("role", flat=True).first()


def has_role(user, project_id: int | None, role: str) -> bool:
    current = role_in(user, project_id)
    return current is not None and ROLE_RANK[current] >= ROLE_RANK[role]


def visible_projects(user) -> QuerySet[Project]:
    """Projects whose objects the user may read: all for staff, those they are a member of otherwise."""
    if user is None or not user.is_authenticated or not user.is_active:
        return Project.objects.none()
    if user.is_staff:
        return Project.objects.all()
    return Project.objects.filter(memberships__user=user)


def projects_where(user, role: str) -> QuerySet[Project]:
    """Projects where the user holds at least ``role`` (where they may launch, for Role.MEMBER)."""
    if user is not None and user.is_authenticated and user.is_active and user.is_staff:
        return Project.objects.all()
    roles = [r for r, rank in ROLE_RANK.items() if rank >= ROLE_RANK[role]]
    return visible_projects(user).filter(memberships__user=user, memberships__role__in=roles)


def visible(qs: QuerySet, user, *, field: str = "project") -> QuerySet:
    """``qs`` restricted to objects (with a ``field`` foreign key to Project) the user may read."""
    if user is not None and user.is_authenticated and user.is_active and user.is_staff:
        return qs
    return qs.filter(**{f"{field}__in": visible_projects(user).values("pk")})


def get_visible(qs: QuerySet, user, **lookup):
    """The one object of ``qs`` matching ``lookup`` that the user may read; Http404 otherwise (a missing object
    and another project's object look the same)."""
    try:
        return visible(qs, user).get(**lookup)
    except (qs.model.DoesNotExist, ValueError, TypeError):
        what = " ".join(str(v) for v in lookup.values())
        raise Http404(f"not found: no {qs.model._meta.verbose_name} {what} in your projects") from None


def project_by_name(user, name: str) -> Project:
    """The project called ``name`` if the user may read it; Http404 otherwise."""
    try:
        return visible_projects(user).distinct().get(name=name)
    except Project.DoesNotExist:
        raise Http404(f"no project {name!r} among your projects") from None


def launch_project_named(user, name) -> Project | None:
    """The project a request names (None when it names none: the caller's default), among the user's;
    FieldErrors on ``project`` otherwise (whether it exists elsewhere is not said)."""
    from training.fields import FieldErrors

    if not name:
        return None
    try:
        return project_by_name(user, name)
    except Http404:
        raise FieldErrors({"project": f"no project {name!r} among yours"}) from None


def project_members(project: Project) -> QuerySet[Membership]:
    return Membership.objects.filter(project=project).select_related("user").order_by("user__username")


def audit_trail(*, targets: list[tuple[str, int]], limit: int = 200) -> list[AuditEvent]:
    """The newest events about any of ``targets`` ((type, id) pairs), newest first."""
    if not targets:
        return []
    from django.db.models import Q

    query = Q()
    for target_type, ids in _group(targets).items():
        query |= Q(target_type=target_type, target_id__in=ids)
    return list(AuditEvent.objects.filter(query).order_by("-at", "-id")[:limit])


def _group(targets: list[tuple[str, int]]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for target_type, target_id in targets:
        grouped.setdefault(target_type, []).append(target_id)
    return grouped
