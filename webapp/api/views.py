"""The API tokens page: make a token (shown once), see when each was last used, revoke one."""
from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from training.fields import FieldErrors

from . import services
from .models import ApiToken


@never_cache  # Cache-Control: no-store: a new token is shown once, and a kept copy would show it again
def token_list(request: HttpRequest) -> HttpResponse:
    new_token = None
    status = 200
    if request.method == "POST":
        try:
            _, new_token = services.token_create(user=request.user, name=request.POST.get("name", ""))
        except FieldErrors as exc:
            messages.error(request, str(exc))
            status = 400
    return render(request, "api/tokens.html", {
        "tokens": ApiToken.objects.filter(user=request.user), "new_token": new_token,
        "api_url": request.build_absolute_uri("/api/v1/")}, status=status)


@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    row = services.token_revoke(user=request.user, token_id=token_id)
    messages.info(request, f"Token {row.prefix}… revoked.")
    return redirect("api-tokens")
