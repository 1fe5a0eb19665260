"""A request body past Django's in-memory limit for form fields and JSON (DATA_UPLOAD_MAX_MEMORY_SIZE), answered
413 with the limit in plain words instead of Django's bare "Bad Request (400)".

Django raises RequestDataTooBig (a SuspiciousOperation) when the body is read, from the CSRF check or the view,
and answers it through ``handler400`` (webapp/urls.py names ``bad_request``): a page's form gets a page that says
the limit and that nothing was saved, the API (/api/) its one error shape in JSON. Every other bad request keeps
Django's own answer. The forms check their size before sending (static/seedbed/body_size.js, the limit rendered
into the page by ``body_limit``); this is the answer for a client that skips that check.

The limit in words, as both say it:

>>> limit_words(2_621_440)
'2.5 MB (2,621,440 bytes)'
"""
from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse
from django.shortcuts import render
from django.views import defaults


def limit_words(limit: int) -> str:
    """``limit`` bytes as a person reads it: MB as Django's documentation counts them (2**20 bytes), and exact."""
    return f"{limit / 2**20:.1f} MB ({limit:,} bytes)"


def body_limit(request) -> dict:
    """Context processor: the limit a form's fields may take together, for the page's own check before sending."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return {"body_limit": {"bytes": limit, "words": limit_words(limit)}} if limit else {}


def bad_request(request, exception, template_name=defaults.ERROR_400_TEMPLATE_NAME):
    """``handler400``: 413 naming the limit for a body past it, Django's own 400 for anything else."""
    if not isinstance(exception, RequestDataTooBig):
        return defaults.bad_request(request, exception, template_name)
    words = limit_words(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
    if request.path.startswith("/api/"):
        message = f"the request body is larger than the server reads: at most {words}; nothing was done"
        return JsonResponse({"errors": {"body": message}, "limit_bytes": settings.DATA_UPLOAD_MAX_MEMORY_SIZE},
                            status=413)
    return render(request, "too_big.html", {"limit": words}, status=413)
