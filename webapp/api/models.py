"""API tokens: a user's bearer credentials for /api/v1/ and the command-line client. Only a SHA-256 digest of
each token is stored (the token itself is shown once, when it is made); a revoked token stays listed."""
from __future__ import annotations

from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, related_name="api_tokens", on_delete=models.CASCADE)
    name = models.CharField(max_length=100, blank=True, help_text="What it is for, e.g. 'laptop CLI'.")
    prefix = models.CharField(max_length=16, help_text="The token's first characters, to recognise it.")
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the token (hex).")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class IdempotencyKey(models.Model):
    """A launch's client-chosen key (the API's ``Idempotency-Key`` header, a launch form's one-time token) and the
    answer it got: stored in the transaction that created the object, so a crash keeps both or neither, and a
    retry with the same key by the same user is answered from here instead of launching again
    (webapp.api.idempotency). Kept 24 h; the maintenance pass removes older ones."""
    user = models.ForeignKey(settings.AUTH_USER_MODEL, related_name="idempotency_keys", on_delete=models.CASCADE)
    key = models.CharField(max_length=210)
    request_hash = models.CharField(max_length=64, help_text="SHA-256 of the method, path and body it came with.")
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_once_per_user")]

    def __str__(self) -> str:
        return f"{self.key} ({self.user})"
