"""Making, checking and revoking API tokens."""
from __future__ import annotations

import hashlib
import logging
import secrets
from datetime import timedelta

from django.db import DatabaseError, transaction
from django.http import Http404
from django.utils import timezone

from training.fields import FieldErrors

from .models import ApiToken

log = logging.getLogger("seedbed.api")
TOKEN_PREFIX = "sb_"
LAST_USED_RESOLUTION = timedelta(minutes=1)  # last_used_at is written at most once a minute per token


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@transaction.atomic
def token_create(*, user, name: str = "") -> tuple[ApiToken, str]:
    """A new token for ``user``: returns the row and the token itself (shown once, never stored)."""
    name = (name or "").strip()
    if len(name) > 100:
        raise FieldErrors({"name": f"at most 100 characters; got {len(name)}"})
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken.objects.create(user=user, name=name, prefix=token[:10], digest=_digest(token))
    return row, token


def user_for_token(token: str):
    """The active user a live token belongs to, or None (unknown, revoked, or its user deactivated). Its last use
    is recorded (``LAST_USED_RESOLUTION`` apart), unless the database refuses the write: a full disk must not
    refuse a read."""
    if not token or len(token) > 200 or not token.startswith(TOKEN_PREFIX):
        return None
    row = ApiToken.objects.select_related("user").filter(digest=_digest(token), revoked_at__isnull=True).first()
    if row is None or not row.user.is_active:
        return None
    now = timezone.now()
    if row.last_used_at is None or now - row.last_used_at > LAST_USED_RESOLUTION:
        try:  # (in a savepoint of its own: the request's work goes on after a refused write)
            with transaction.atomic():
                ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
        except DatabaseError as exc:  # a database that refuses writes (its disk full) still answers reads
            log.warning("token %s: last use not recorded (%s)", row.pk, exc)
    return row.user


@transaction.atomic
def token_revoke(*, user, token_id: int) -> ApiToken:
    """Revoke one of the user's own tokens (staff may revoke anyone's); 404 for another user's token."""
    qs = ApiToken.objects.select_for_update()
    if not user.is_staff:
        qs = qs.filter(user=user)
    row = qs.filter(pk=token_id).first()
    if row is None:
        raise Http404("no such token among yours")
    if row.revoked_at is None:
        row.revoked_at = timezone.now()
        row.save(update_fields=["revoked_at"])
    return row
