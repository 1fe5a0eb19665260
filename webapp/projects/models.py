"""Projects, their members and what they did (docs/architecture.md#projects-and-trust).

Every run, sweep and evaluation belongs to one project. A member's role says what they may do there:
viewers read, members launch and stop the project's work, admins also manage its members. Staff see and may
do everything. A user who is not a member of a project gets 404 for its objects: they do not learn they exist.

Below every app that takes a launch also lives each user's launch keys (``IdempotencyKey``,
webapp.projects.idempotency), so the run, sweep and evaluation forms and the API share them.
"""
from __future__ import annotations

import unicodedata

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models


DISK_BUDGET_MAX_MB = 100_000_000  # 100 TB: a bound on what staff type, far above any one disk


class Role(models.TextChoices):
    VIEWER = "viewer"
    MEMBER = "member"
    ADMIN = "admin"


# a role may do what every lower role may
ROLE_RANK = {Role.VIEWER: 1, Role.MEMBER: 2, Role.ADMIN: 3}

# A project's name is what the API, the CLI and the URLs say; a personal project is named after its user, so
# the characters Django allows in usernames are allowed here.
PROJECT_NAME_MAX = 150
project_name_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9_.@+-]*\Z",
    "a project name starts with a letter or digit and holds only letters, digits and _ . @ + -")

# Projects the app makes and names itself (a data migration makes them): no user may take one of these names, in
# any case, by making, renaming or being named after it. "default" holds work made without a user (staff only).
DEFAULT_PROJECT = "default"
RESERVED_PROJECT_NAMES = frozenset({DEFAULT_PROJECT})


def is_reserved_project_name(name) -> bool:
    """``name`` is one of RESERVED_PROJECT_NAMES, ignoring case, surrounding spaces and NFKC look-alikes."""
    return isinstance(name, str) and unicodedata.normalize("NFKC", name).strip().casefold() in RESERVED_PROJECT_NAMES


class Project(models.Model):
    name = models.CharField(max_length=PROJECT_NAME_MAX, unique=True, validators=[project_name_validator])
    personal_for = models.OneToOneField(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="personal_project",
                                        help_text="The user this personal project was made with.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    # disk budgets (webapp.runs.disk_budget), set by staff in the admin; empty: the defaults from the runs disk
    run_disk_budget_mb = models.PositiveBigIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(DISK_BUDGET_MAX_MB)],
        help_text="What one run's folder may take on disk, in MB (1 MB to 100 TB); a run past it fails. Empty: "
                  "SEEDBED_RUN_DISK_FRACTION of the runs folder's disk.")
    disk_budget_mb = models.PositiveBigIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(DISK_BUDGET_MAX_MB)],
        help_text="What all the project's runs may take on disk together, in MB (1 MB to 100 TB); the run that "
                  "finds it reached fails. Empty: SEEDBED_PROJECT_DISK_FRACTION of the runs folder's disk.")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """The admin's check: a reserved name stays on the project the app made with it (it is neither given to
        another project nor renamed away from its own)."""
        before = type(self).objects.filter(pk=self.pk).values_list("name", flat=True).first() if self.pk else None
        if before is not None and is_reserved_project_name(before) and self.name != before:
            raise ValidationError({"name": f"{before!r} is a name the app uses itself; it keeps it"})
        if is_reserved_project_name(self.name) and self.name != before:
            raise ValidationError({"name": f"{self.name.strip()!r} is reserved (the app uses it itself)"})


class Membership(models.Model):
    project = models.ForeignKey(Project, related_name="memberships", on_delete=models.CASCADE)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, related_name="project_memberships", on_delete=models.CASCADE)
    role = models.CharField(max_length=10, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="membership_unique_project_user")]
        ordering = ["project", "user"]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"


class AuditEvent(models.Model):
    """Who did what to which object: every user action (launch, kill, resume, cancel, policy change, members)
    and what the system did in their stead (a policy's kill)."""

    project = models.ForeignKey(Project, related_name="audit_events", on_delete=models.CASCADE)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    actor_name = models.CharField(max_length=200, help_text='The username, or "policy:<rule>" / "system".')
    action = models.CharField(max_length=40, help_text="e.g. run.launch, run.kill, sweep.policy, eval.cancel")
    target_type = models.CharField(max_length=20, help_text="run, sweep, eval or project")
    target_id = models.BigIntegerField()
    detail = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["target_type", "target_id"], name="audit_target")]

    def __str__(self) -> str:
        return f"{self.actor_name} {self.action} {self.target_type} {self.target_id}"


class IdempotencyKey(models.Model):
    """A launch's client-chosen key (the API's ``Idempotency-Key`` header, a launch form's one-time token) and the
    answer it got: stored in the transaction that created the object, so a crash keeps both or neither, and a
    retry with the same key by the same user is answered from here instead of launching again
    (webapp.projects.idempotency). Kept 24 h; the maintenance pass removes older ones. It lives below every app
    that takes a launch (the API, the run, sweep and evaluation forms); its table keeps the name it was made with."""
    user = models.ForeignKey(settings.AUTH_USER_MODEL, related_name="idempotency_keys", on_delete=models.CASCADE)
    key = models.CharField(max_length=210)
    request_hash = models.CharField(max_length=64, help_text="SHA-256 of the method, path and body it came with.")
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        db_table = "api_idempotencykey"  # made by the api app (migrations api 0002, moved by 0003 and projects 0004)
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_once_per_user")]

    def __str__(self) -> str:
        return f"{self.key} ({self.user})"
