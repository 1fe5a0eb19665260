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


#: the expiries the tokens page offers (days); any whole number of days from 1 to MAX_EXPIRY_DAYS is accepted
EXPIRY_CHOICES_DAYS = (7, 30, 90, 365)
DEFAULT_EXPIRY_DAYS = 30
MAX_EXPIRY_DAYS = 365
NEVER = "never"


def parse_expiry_days(text) -> int | None:
    """The expiry a form or the command line gives: a whole number of days, or "never" (None).

    >>> parse_expiry_days("90"), parse_expiry_days("never")
    (90, None)
    >>> parse_expiry_days("soon")
    Traceback (most recent call last):
    ...
    training.fields.FieldErrors: expires_days: a whole number of days from 1 to 365, or never; got 'soon'
    """
    text = str(text if text is not None else "").strip().lower()
    if text == NEVER:
        return None
    if not text.isdigit():
        raise FieldErrors({"expires_days": f"a whole number of days from 1 to {MAX_EXPIRY_DAYS}, or never; "
                                           f"got {text!r}"})
    return int(text)


@transaction.atomic
def token_create(*, user, name: str = "", scope: str = ApiToken.Scope.READ_WRITE,
                 expires_days: int | None = DEFAULT_EXPIRY_DAYS, allow_never: bool = False,
                 run=None) -> tuple[ApiToken, str]:
    """A new token for ``user``: returns the row and the token itself (shown once, never stored). It expires
    ``expires_days`` days from now (1 to ``MAX_EXPIRY_DAYS``); a token that never expires (``None``) is for staff
    accounts, or made by the operator (``allow_never``: ``manage.py api_token``). Scope ``run`` needs ``run`` (a
    Run or its id), one the user may write (a member of its project: 404 outside it, 403 below member); the other
    scopes take none."""
    name = (name or "").strip()
    errors = {}
    run = _token_run(user, scope, run, errors)
    if len(name) > 100:
        errors["name"] = f"at most 100 characters; got {len(name)}"
    if scope not in ApiToken.Scope.values:
        errors["scope"] = f"one of {', '.join(ApiToken.Scope.values)}; got {str(scope)[:40]!r}"
    if expires_days is None and not (allow_never or user.is_staff):
        errors["expires_days"] = (f"a token that never expires is for staff accounts; choose 1 to "
                                  f"{MAX_EXPIRY_DAYS} days")
    elif expires_days is not None and not (type(expires_days) is int and 1 <= expires_days <= MAX_EXPIRY_DAYS):
        errors["expires_days"] = f"a whole number of days from 1 to {MAX_EXPIRY_DAYS}, or never; got {expires_days!r}"
    if errors:
        raise FieldErrors(errors)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    expires_at = None if expires_days is None else timezone.now() + timedelta(days=expires_days)
    row = ApiToken.objects.create(user=user, name=name, prefix=token[:10], digest=_digest(token), scope=scope,
                                  expires_at=expires_at, run=run)
    return row, token


def _token_run(user, scope: str, run, errors: dict):
    """The run a ``run`` token is bound to, checked for the user; an error on ``run`` for any other case."""
    if scope != ApiToken.Scope.RUN:
        if run not in (None, ""):
            errors["run"] = f"only a token of scope run is bound to a run; this one's scope is {str(scope)[:40]}"
        return None
    from webapp.projects.models import Role
    from webapp.projects.services import require_role
    from webapp.runs.models import Run

    run_id = run.pk if isinstance(run, Run) else run
    if isinstance(run_id, str) and run_id.strip().isascii() and run_id.strip().isdigit():
        run_id = int(run_id)
    if type(run_id) is not int or not 0 < run_id < 2**63:
        errors["run"] = f"a token of scope run needs the run's id; got {str(run)[:40]!r}"
        return None
    found = Run.objects.filter(pk=run_id).first()
    if found is None:
        raise Http404("run: not found in your projects")
    require_role(user, found.project_id, Role.MEMBER)  # one who may write the run (log to it, kill it)
    return found


class TokenRefused(Exception):
    """A bearer token that does not authenticate (401); its message says why, for the token's holder."""


def _when(moment) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def token_authenticate(token: str) -> ApiToken:
    """The live token row for a bearer token, its user loaded; raises TokenRefused for an unknown, revoked or
    expired token or a deactivated user (an unknown one is not told apart from a malformed one). Its last use is
    recorded (``LAST_USED_RESOLUTION`` apart), unless the database refuses the write: a full disk must not refuse
    a read."""
    if not token or len(token) > 200 or not token.startswith(TOKEN_PREFIX):
        raise TokenRefused("")
    row = ApiToken.objects.select_related("user").filter(digest=_digest(token)).first()
    if row is None or not row.user.is_active:
        raise TokenRefused("")
    if row.revoked_at is not None:
        raise TokenRefused(f"this token ({row.prefix}…) was revoked on {_when(row.revoked_at)}; make a new one on "
                           f"the API tokens page (/account/tokens/)")
    if row.is_expired:
        raise TokenRefused(f"this token ({row.prefix}…) expired on {_when(row.expires_at)}; make a new one on the "
                           f"API tokens page (/account/tokens/)")
    now = timezone.now()
    if row.last_used_at is None or now - row.last_used_at > LAST_USED_RESOLUTION:
        try:  # (in a savepoint of its own: the request's work goes on after a refused write)
            with transaction.atomic():
                ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
        except DatabaseError as exc:  # a database that refuses writes (its disk full) still answers reads
            log.warning("token %s: last use not recorded (%s)", row.pk, exc)
    return row


def user_for_token(token: str):
    """The active user a live token belongs to, or None (unknown, revoked, expired, or its user deactivated)."""
    try:
        return token_authenticate(token).user
    except TokenRefused:
        return None


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
