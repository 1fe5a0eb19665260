"""Launches safe to retry: an idempotency key (the API's ``Idempotency-Key`` header, a launch form's one-time
token) makes a retried launch answer what the first one answered instead of launching again.

The key's row and the launched object are written in one transaction: a web process that dies mid-launch
leaves both or neither, so a client that never heard the answer retries with the same key and either gets the
first answer (the object exists) or launches now (nothing was made). Keys are per user (unique on user and key:
another user's same key is theirs, never an answer to someone else). Two retries at once with one key: the
unique constraint decides; the loser's insert waits for the winner's transaction and is then answered from the
winner's row. Only a launch that succeeded is kept: one that failed (bad input) rolls back with its key, so a
corrected retry with the same key is a new attempt. A key with another request (method, path or body) is
refused. Keys expire after ``KEY_TTL``; ``keys_expire`` (the maintenance pass) removes them.
"""
from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Callable

from django.db import IntegrityError, transaction
from django.utils import timezone

from .models import IdempotencyKey

HEADER = "Idempotency-Key"
FORM_FIELD = "launch_token"
MAX_KEY_LENGTH = 200
KEY_TTL = timedelta(hours=24)


class KeyReused(Exception):
    """The key was used by this user for another request (other method, path or body)."""


class KeyInProgress(Exception):
    """The key's first request has not finished (its row is there without an answer)."""


def key_error(key: str) -> str | None:
    """Why ``key`` cannot be an idempotency key, or None: 1 to 200 printable ASCII characters."""
    if not key:
        return "must not be empty"
    if len(key) > MAX_KEY_LENGTH:
        return f"at most {MAX_KEY_LENGTH} characters; got {len(key)}"
    if not all(" " <= ch <= "~" for ch in key):
        return "printable ASCII characters only"
    return None


def request_digest(method: str, path: str, body: bytes | str | dict) -> str:
    """SHA-256 of a request: its method, path and body (a JSON body canonically: key order and spacing aside)."""
    if isinstance(body, (bytes, str)):
        try:
            body = json.loads(body or b"{}")
        except (ValueError, UnicodeDecodeError):
            body = body.decode("latin-1") if isinstance(body, bytes) else body
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{method.upper()} {path}\n{canonical}".encode()).hexdigest()


def once(*, user, key: str, digest: str, make: Callable[[], tuple[int, dict]]) -> tuple[int, dict, bool]:
    """Run ``make`` (which launches and returns its answer: status and body) once per (user, key): returns
    (status, body, replayed). A first call runs ``make`` in the transaction that stores the key and its answer;
    a retry returns the stored answer with replayed True. Raises KeyReused for the key with another request,
    KeyInProgress when the first request has no answer yet; what ``make`` raises rolls the key back too."""
    with transaction.atomic():
        IdempotencyKey.objects.filter(user=user, key=key, created_at__lt=timezone.now() - KEY_TTL).delete()
        try:
            with transaction.atomic():
                row = IdempotencyKey.objects.create(user=user, key=key, request_hash=digest)
        except IntegrityError:  # a first request holds it, committed (or this waited for it to commit)
            row = IdempotencyKey.objects.filter(user=user, key=key).first()
            if row is None or row.response_status is None:
                raise KeyInProgress(key) from None
            if row.request_hash != digest:
                raise KeyReused(key) from None
            return row.response_status, row.response_body, True
        status, body = make()
        row.response_status, row.response_body = status, body
        row.save(update_fields=["response_status", "response_body"])
        return status, body, False


def keys_expire(*, older_than: timedelta = KEY_TTL) -> int:
    """Remove keys older than ``older_than`` (the maintenance pass); returns how many."""
    return IdempotencyKey.objects.filter(created_at__lt=timezone.now() - older_than).delete()[0]


def form_digest(request) -> str:
    """The digest of a launch form's POST: its fields (the CSRF token aside) and the page's query (its origin)."""
    fields = {name: request.POST.getlist(name) for name in sorted(request.POST) if name != "csrfmiddlewaretoken"}
    return request_digest("POST", request.get_full_path(), fields)


def form_launch(request, make: Callable[[], str]) -> tuple[str, bool]:
    """A launch form's POST: ``make`` launches and returns the URL of what it made. With the form's one-time token
    (``FORM_FIELD``, set when the form was rendered) a second submit of the same form (a double click, a POST
    resent after a crash) makes nothing and returns the first one's URL: (url, replayed). The same token with
    other values (the form edited after going back) launches anew."""
    token = request.POST.get(FORM_FIELD, "")
    if key_error(token) is not None:
        return make(), False
    try:
        _, body, replayed = once(user=request.user, key=f"form:{token}", digest=form_digest(request),
                                 make=lambda: (302, {"url": make()}))
    except KeyReused:
        return make(), False
    return body["url"], replayed


def new_form_token(request) -> str:
    """The one-time token a launch form carries: a new one for a new form, the submitted one when a form with
    errors is shown again (so its corrected submit is still once)."""
    import uuid

    submitted = request.POST.get(FORM_FIELD, "") if request.method == "POST" else ""
    return submitted if submitted and key_error(submitted) is None else uuid.uuid4().hex
