"""The POST view of a user's transition on a job (kill, cancel, resume; docs/architecture.md#extension-points):
the job must be visible to the user, the service does the move, and a refusal is shown, loudly, on the job's page."""
from __future__ import annotations

from typing import Callable

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from training.fields import FieldErrors

from .states import TransitionError


def transition_view(*, visible: Callable[[HttpRequest, int], object], act: Callable[[HttpRequest, int], str],
                    page: str, pk_name: str) -> Callable[..., HttpResponse]:
    """A view for ``POST <page>/<pk>/<action>/``: ``visible(request, pk)`` (404 for a job the user may not read),
    then ``act(request, pk)``, the transition's service, whose return is the message shown; a TransitionError's
    text is shown as an error instead. Either way back to the job's ``page`` (a URL name taking ``pk_name``)."""
    @require_POST
    def view(request: HttpRequest, **kwargs) -> HttpResponse:
        pk = kwargs[pk_name]
        visible(request, pk)
        try:
            messages.info(request, act(request, pk))
        except (TransitionError, FieldErrors) as exc:  # e.g. a kill reason with a control character
            messages.error(request, str(exc))
        return redirect(page, **{pk_name: pk})
    return view
