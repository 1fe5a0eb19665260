"""The API tokens page: make a token (its scope and expiry chosen; shown once), see each one's scope, expiry, last use
and state, revoke one."""
from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from training.fields import FieldErrors

from . import services
from .models import ApiToken


def _create(request: HttpRequest) -> str:
    """The token the form asks for (its fields: name, scope, run for scope run, expires_days); FieldErrors names
    a bad field, as a run the user may not log to does (``run``)."""
    expires_days = services.parse_expiry_days(request.POST.get("expires_days", services.DEFAULT_EXPIRY_DAYS))
    try:
        _, token = services.token_create(user=request.user, name=request.POST.get("name", ""),
                                         scope=request.POST.get("scope", ApiToken.Scope.READ_WRITE),
                                         expires_days=expires_days, run=request.POST.get("run", "").strip() or None)
    except (Http404, PermissionDenied) as exc:
        raise FieldErrors({"run": f"not a run you may log to ({exc})"}) from None
    return token


@never_cache  # Cache-Control: no-store: a new token is shown once, and a kept copy would show it again
def token_list(request: HttpRequest) -> HttpResponse:
    new_token = None
    status = 200
    if request.method == "POST":
        try:
            new_token = _create(request)
        except FieldErrors as exc:
            messages.error(request, str(exc))
            status = 400
    return render(request, "api/tokens.html", {
        "tokens": ApiToken.objects.filter(user=request.user).select_related("run"), "new_token": new_token,
        "api_url": request.build_absolute_uri("/api/v1/"), "scopes": ApiToken.Scope.choices,
        "expiry_choices": services.EXPIRY_CHOICES_DAYS, "default_expiry": services.DEFAULT_EXPIRY_DAYS,
        "may_never_expire": request.user.is_staff, "rate_per_min": settings.SEEDBED_API_RATE_PER_MIN,
        "rate_burst": settings.SEEDBED_API_RATE_BURST}, status=status)


@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    row = services.token_revoke(user=request.user, token_id=token_id)
    messages.info(request, f"Token {row.prefix}… revoked.")
    return redirect("api-tokens")
