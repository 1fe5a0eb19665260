"""Seedbed's JSON API, version 1 (/api/v1/; OpenAPI schema at /api/v1/schema).

Every request carries ``Authorization: Bearer <token>`` (``python manage.py api_token USERNAME`` or the API
tokens page). This module holds the API object, its token authentication, its body parser and the one shape of
its errors; the endpoints are :mod:`webapp.api.endpoints`, one module per resource. The endpoints are thin: they
call the same services and selectors as the forms, so the API and the forms cannot disagree and the same checks
apply (docs/architecture.md#projects-and-trust). Errors:
- 400 ``{"errors": {"<field>": "<message>"}}`` for bad input (nothing is created);
- 401 without a valid token (an expired or revoked one says so), 403 when the token's scope or the caller's role
  in the project is too low, 404 for what is not in the caller's projects (missing and not-yours look the same),
  409 when the object's state forbids the action, 429 past the token's rate (``Retry-After`` in seconds;
  webapp.api.ratelimit).
"""
from __future__ import annotations

import json
import logging
import math

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser
from ninja.security import HttpBearer

from training.fields import FieldErrors

from . import ratelimit
from .services import TokenRefused, token_authenticate

log = logging.getLogger("seedbed.api")


class RateLimited(Exception):
    """429: the token's bucket is empty for ``wait_s`` more seconds."""

    def __init__(self, wait_s: float):
        self.wait_s = wait_s
        super().__init__(wait_s)


class TokenNotAccepted(AuthenticationError):
    """401 with the reason the holder of a known token is told (it expired, it was revoked)."""


class BearerToken(HttpBearer):
    """The request's token, in this order: it must be live (401 unknown, revoked or expired), within its rate
    (429), and its scope must allow the request's method (403); then the request acts as its user."""

    def authenticate(self, request, token: str):
        try:
            row = token_authenticate(token)
        except TokenRefused as exc:
            raise TokenNotAccepted(401, str(exc)) from None
        wait_s = ratelimit.take(row.digest, rate_per_min=settings.SEEDBED_API_RATE_PER_MIN,
                                burst=settings.SEEDBED_API_RATE_BURST)
        if wait_s > 0:
            raise RateLimited(wait_s)
        refusal = row.refusal_for(request.method, request.path_info)
        if refusal:
            raise PermissionDenied(refusal)
        request.user = row.user  # the services and selectors act for this user
        request.api_token = row
        return row.user


class JsonObjectParser(Parser):
    """Every request body is a JSON object: an array, a string or null is refused before any field is read."""

    def parse_body(self, request):
        data = json.loads(request.body)
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object {{...}}; got {type(data).__name__}")
        return data


class SeedbedAPI(NinjaAPI):
    def get_openapi_operation_id(self, operation) -> str:
        """An operation's id in the schema is its function's name (``runs_create``), whichever module of
        :mod:`webapp.api.endpoints` holds it (ninja's default prefixes the module path)."""
        return operation.view_func.__name__


api = SeedbedAPI(title="Seedbed API", version="1", urls_namespace="api-v1", openapi_url="/schema", docs_url=None,
                 auth=BearerToken(), parser=JsonObjectParser(),
                 description="Launch, watch and stop RLVR runs, seed sweeps and pass@k evaluations. "
                             "Authorization: Bearer <token>.")


# --- errors: one shape for every bad input ----------------------------------------------------------------------

def _field_of(loc: list) -> str:
    """ninja's error location -> the field name the caller sent: ("body", "payload", "seeds", 0) -> "seeds"."""
    parts = [str(p) for p in loc if p not in ("body", "payload", "query", "path")]
    return parts[0] if parts else "body"


@api.exception_handler(ValidationError)
def _schema_errors(request, exc: ValidationError):
    errors: dict[str, str] = {}
    for error in exc.errors:
        errors.setdefault(_field_of(list(error.get("loc", []))), str(error.get("msg", "invalid")))
    return api.create_response(request, {"errors": errors}, status=400)


@api.exception_handler(FieldErrors)
def _field_errors(request, exc: FieldErrors):
    return api.create_response(request, {"errors": exc.errors}, status=400)


@api.exception_handler(HttpError)
def _http_errors(request, exc: HttpError):
    # ninja answers a body its parser (JsonObjectParser) refuses with HttpError(400) raised from the parser's
    # error: say what is wrong on the field "body", in the one shape of bad input
    if exc.status_code == 400 and exc.__cause__ is not None:
        cause = exc.__cause__
        message = str(cause) if type(cause) is ValueError else f"not valid JSON: {cause}"
        return api.create_response(request, {"errors": {"body": message}}, status=400)
    return api.create_response(request, {"detail": str(exc)}, status=exc.status_code)


@api.exception_handler(Http404)
def _not_found(request, exc):
    return api.create_response(request, {"detail": str(exc) or "not found"}, status=404)


@api.exception_handler(PermissionDenied)
def _forbidden(request, exc):
    return api.create_response(request, {"detail": str(exc) or "forbidden"}, status=403)


@api.exception_handler(AuthenticationError)
def _unauthorized(request, exc):
    why = exc.message if isinstance(exc, TokenNotAccepted) else ""
    return api.create_response(request, {"detail": why or "give a valid token: Authorization: Bearer <token> (make "
                                                          "one on the API tokens page, /account/tokens/, or with "
                                                          "`python manage.py api_token USERNAME`)"}, status=401)


@api.exception_handler(RateLimited)
def _rate_limited(request, exc: RateLimited):
    retry_after = max(1, math.ceil(exc.wait_s))  # Retry-After is whole seconds (RFC 9110)
    response = api.create_response(request, {
        "detail": f"too many requests with this token: at most {settings.SEEDBED_API_RATE_BURST:g} at once and "
                  f"{settings.SEEDBED_API_RATE_PER_MIN:g} a minute (SEEDBED_API_RATE_BURST, SEEDBED_API_RATE_PER_MIN);"
                  f" retry in {retry_after} s", "retry_after_s": retry_after}, status=429)
    response["Retry-After"] = str(retry_after)
    return response


def conflict(exc: Exception) -> HttpError:
    """409: the object's state forbids the action (a service's transition error)."""
    return HttpError(409, str(exc))
