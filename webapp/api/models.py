"""API tokens: a user's bearer credentials for /api/v1/ and the command-line client. Only a SHA-256 digest of
each token is stored (the token itself is shown once, when it is made); a revoked or expired token stays listed.

A token has a scope (what it may do) and an expiry (when it stops working), both chosen when it is made and never
changed: a token that should do more is a new token. A scope is one value of ``Scope``, checked by
``ApiToken.refusal_for``; a later scope bound to one object (a run's logging token) adds a nullable foreign key
beside ``scope`` and widens the check constraint to say which scope needs it, never a string to parse."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

#: the methods that read: a ``read`` token may send only these (everything else, known or not, is a write)
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class ApiToken(models.Model):
    class Scope(models.TextChoices):
        READ = "read", "read (GET only)"
        READ_WRITE = "read-write", "read-write"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, related_name="api_tokens", on_delete=models.CASCADE)
    name = models.CharField(max_length=100, blank=True, help_text="What it is for, e.g. 'laptop CLI'.")
    prefix = models.CharField(max_length=16, help_text="The token's first characters, to recognise it.")
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the token (hex).")
    scope = models.CharField(max_length=16, choices=Scope.choices,
                             help_text="read: GET only; read-write: everything its user may do.")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Refused from then on; empty: never expires.")
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.CheckConstraint(condition=models.Q(scope__in=["read", "read-write"]),
                                              name="api_token_scope_known")]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and not self.is_expired

    @property
    def state(self) -> str:
        """What the tokens page shows: revoked (first: a revoked token stays revoked), expired, or active."""
        if self.revoked_at is not None:
            return "revoked"
        return "expired" if self.is_expired else "active"

    def refusal_for(self, method: str) -> str | None:
        """Why this token's scope refuses a request with this HTTP method, or None when it allows it: a ``read``
        token only reads (``READ_METHODS``), a ``read-write`` token may send anything (its user's role in each
        project still decides)."""
        if self.scope == self.Scope.READ and method.upper() not in READ_METHODS:
            return (f"this token's scope is read: it may only read (GET), not {method.upper()}; make a read-write "
                    f"token on the API tokens page (/account/tokens/) to change anything")
        return None
