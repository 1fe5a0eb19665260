"""What the API's launches share (runs, sweeps, evaluations, dataset uploads): the project and checkpoint a
launch names, and the ``Idempotency-Key`` that makes a retried launch answer the first one
(docs/architecture.md#projects-and-trust)."""
from __future__ import annotations

from typing import Optional

from ninja.errors import HttpError

from training.fields import FieldErrors
from webapp.api import selectors
from webapp.api.v1 import api
from webapp.projects import idempotency
from webapp.projects import selectors as project_selectors
from webapp.projects.models import Project


def launch_project(request, name: Optional[str]) -> Optional[Project]:
    """The project a launch names (None: the caller's personal one)."""
    return project_selectors.launch_project_named(request.user, name)


def launch_checkpoint(request, checkpoint_id: Optional[int]):
    """The checkpoint a launch starts from (None: none), or a field error when the caller cannot see it."""
    if checkpoint_id is None:
        return None
    checkpoint = selectors.visible_checkpoint(request.user, checkpoint_id)
    if checkpoint is None:
        raise FieldErrors({"from_checkpoint": f"no checkpoint {checkpoint_id} in your projects"})
    return checkpoint


def launch_inputs(request, payload):
    """A launch's project (by name), the checkpoint it starts from (its folder the config's default model_path)
    and the config; field errors for a project or checkpoint outside the caller's projects."""
    project = launch_project(request, payload.project)
    parent = launch_checkpoint(request, payload.from_checkpoint)
    config = dict(payload.config)
    if parent is not None:
        config.setdefault("model_path", parent.path)
    return project, parent, config


# the launches' optional header, in the OpenAPI schema (read by launched_once, not by ninja)
IDEMPOTENT = {"parameters": [{
    "in": "header", "name": idempotency.HEADER, "required": False,
    "schema": {"type": "string", "minLength": 1, "maxLength": idempotency.MAX_KEY_LENGTH},
    "description": "A unique string you choose per launch (e.g. a UUID; printable ASCII): a retry with it by the same "
                   "user answers the first request and launches nothing (422 with another body; kept 24 h)."}]}


def launched_once(request, make):
    """A launch, once per ``Idempotency-Key`` (webapp.projects.idempotency): without the header ``make()`` launches;
    with it, a retry by the same user with the same key and request gets the first answer (status and body, with
    ``Idempotent-Replayed: true``) and launches nothing. 400 for a malformed key, 422 for the key with another
    request, 409 while the key's first request has not finished."""
    key = request.headers.get(idempotency.HEADER)
    if key is None:
        return make()
    problem = idempotency.key_error(key)
    if problem is not None:
        raise FieldErrors({idempotency.HEADER: f"{problem} (a unique string you choose per launch, e.g. a UUID)"})

    def launch() -> tuple[int, dict]:
        answer = make()
        return answer.status_code, answer.value

    digest = idempotency.request_digest(request.method, request.path, request.body)
    try:
        status, body, replayed = idempotency.once(user=request.user, key=key, digest=digest, make=launch)
    except idempotency.KeyReused:
        raise HttpError(422, f"this {idempotency.HEADER} was already used for another request (another body or "
                             "endpoint); use a new key for a new launch") from None
    except idempotency.KeyInProgress:
        raise HttpError(409, f"a request with this {idempotency.HEADER} is still in progress; retry in a "
                             "moment") from None
    response = api.create_response(request, body, status=status)
    if replayed:
        response["Idempotent-Replayed"] = "true"
    return response
