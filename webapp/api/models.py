"""API tokens: a user's bearer credentials for /api/v1/ and the command-line client. Only a SHA-256 digest of
each token is stored (the token itself is shown once, when it is made); a revoked or expired token stays listed.

A token has a scope (what it may do) and an expiry (when it stops working), both chosen when it is made and never
changed: a token that should do more is a new token. A scope is one value of ``Scope``, checked by
``ApiToken.refusal_for``. The ``run`` scope is bound to one run by a nullable foreign key beside ``scope`` (a
check constraint: the run is set exactly when the scope is ``run``), never a string to parse: such a token (a
training or logging process's) may only append that run's metrics and samples and read that run (its status and
stop flag), ``RUN_SCOPE_ROUTES``."""
from __future__ import annotations

import re

from django.conf import settings
from django.db import models
from django.utils import timezone

#: the methods that read: a ``read`` token may send only these (everything else, known or not, is a write)
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: what a ``run`` token may send, below /api/v1/: (method, path after runs/<id>) -> what it does
RUN_SCOPE_ROUTES = {("GET", ""): "read the run (its status and stop flag)",
                    ("POST", "/metrics"): "append its metrics", ("POST", "/samples"): "append its samples"}
_RUN_PATH = re.compile(r"/api/v1/runs/(?P<run>[0-9]{1,19})(?P<rest>/[a-z]+)?/?\Z")


class ApiToken(models.Model):
    class Scope(models.TextChoices):
        READ = "read", "read (GET only)"
        READ_WRITE = "read-write", "read-write"
        RUN = "run", "one run (append its metrics and samples, read it)"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, related_name="api_tokens", on_delete=models.CASCADE)
    name = models.CharField(max_length=100, blank=True, help_text="What it is for, e.g. 'laptop CLI'.")
    prefix = models.CharField(max_length=16, help_text="The token's first characters, to recognise it.")
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the token (hex).")
    scope = models.CharField(max_length=16, choices=Scope.choices,
                             help_text="read: GET only; read-write: everything its user may do; run: one run's "
                                       "metrics and samples appended, that run read.")
    run = models.ForeignKey("runs.Run", null=True, blank=True, related_name="api_tokens", on_delete=models.CASCADE,
                            help_text="The one run a run-scoped token may log to (set exactly for scope run).")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Refused from then on; empty: never expires.")
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.CheckConstraint(condition=models.Q(scope__in=["read", "read-write", "run"]),
                                              name="api_token_scope_known"),
                       models.CheckConstraint(condition=models.Q(scope="run", run__isnull=False)
                                              | (~models.Q(scope="run") & models.Q(run__isnull=True)),
                                              name="api_token_run_iff_run_scope")]

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

    def refusal_for(self, method: str, path: str = "") -> str | None:
        """Why this token's scope refuses a request with this HTTP method to this path, or None when it allows
        it: a ``read`` token only reads (``READ_METHODS``), a ``run`` token only sends ``RUN_SCOPE_ROUTES`` for its
        own run, a ``read-write`` token may send anything (its user's role in each project still decides)."""
        if self.scope == self.Scope.RUN:
            return self._run_refusal(method.upper(), path)
        if self.scope == self.Scope.READ and method.upper() not in READ_METHODS:
            return (f"this token's scope is read: it may only read (GET), not {method.upper()}; make a read-write "
                    f"token on the API tokens page (/account/tokens/) to change anything")
        return None

    def _run_refusal(self, method: str, path: str) -> str | None:
        found = _RUN_PATH.match(path)
        if found and int(found["run"]) == self.run_id and (method, found["rest"] or "") in RUN_SCOPE_ROUTES:
            return None
        allowed = "; ".join(f"{m} /api/v1/runs/{self.run_id}{rest}: {what}"
                            for (m, rest), what in RUN_SCOPE_ROUTES.items())
        return f"this token's scope is run {self.run_id}: it may only {allowed}; not {method} {path[:200]}"
