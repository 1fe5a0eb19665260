"""Writes to the model library: register a model folder, import a GGUF file (on a worker: a minute of CPU and
about 1 GB of memory for 135 M parameters), all inside the allowed folders (settings.SEEDBED_DATA_ROOTS)."""
from __future__ import annotations

import os
import re

from django.conf import settings
from django.db import transaction

from training.config import outside_roots
from training.fields import FieldErrors
from training.models import check_gguf_file, describe_model
from webapp.projects.models import Role
from webapp.projects.services import audit, project_for_launch, require_role
from webapp.runs.selectors import config_path_error

from .models import ModelEntry, ModelStatus

NAME = re.compile(r"^[\w.-]{1,100}\Z")


def _check_name(name, project) -> str:
    name = (name or "").strip() if isinstance(name, str) else ""
    if not NAME.match(name):
        raise FieldErrors({"name": "1-100 letters, digits, '.', '_' or '-'"})
    if ModelEntry.objects.filter(project=project, name=name).exists():
        raise FieldErrors({"name": f"project {project.name} has a model named {name!r} already"})
    return name


def _check_folder(path, user) -> str:
    if not isinstance(path, str) or not path.strip():
        raise FieldErrors({"path": "give the model folder"})
    path = path.strip()
    problem = outside_roots(path, settings.SEEDBED_DATA_ROOTS) or config_path_error(user=user, path=path)
    if problem:
        raise FieldErrors({"path": problem})
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise FieldErrors({"path": f"not a model folder (no config.json): {path}"})
    return os.path.realpath(path)


@transaction.atomic
def model_register(*, user, name, path, project=None) -> ModelEntry:
    """Register a Hugging Face model folder that is already on the server, described from its files."""
    project = project_for_launch(user=user, project=project)
    name = _check_name(name, project)
    folder = _check_folder(path, user)
    entry = ModelEntry.objects.create(project=project, name=name, path=folder, description=describe_model(folder),
                                      created_by=user)
    audit(project=project, user=user, action="model.register", target_type="model", target_id=entry.pk, path=folder)
    return entry


def imported_folder(project, name: str) -> str:
    """$SEEDBED_HOME/library/<project>/<name>: only the project's members may name it in a config."""
    return os.path.join(str(settings.SEEDBED_LIBRARY_DIR), project.name, name)


@transaction.atomic
def model_import_gguf(*, user, name, gguf, project=None) -> ModelEntry:
    """Queue the import of a GGUF file (inside the allowed folders) into $SEEDBED_HOME/models/<project>/<name>."""
    project = project_for_launch(user=user, project=project)
    name = _check_name(name, project)
    if not isinstance(gguf, str) or not gguf.strip():
        raise FieldErrors({"gguf": "give the .gguf file to import"})
    gguf = gguf.strip()
    problem = outside_roots(gguf, settings.SEEDBED_DATA_ROOTS) or config_path_error(user=user, path=gguf)
    if problem:
        raise FieldErrors({"gguf": problem})
    check_gguf_file(gguf)
    entry = ModelEntry.objects.create(project=project, name=name, path=imported_folder(project, name),
                                      source=os.path.realpath(gguf), status=ModelStatus.IMPORTING, created_by=user)
    audit(project=project, user=user, action="model.import", target_type="model", target_id=entry.pk, source=gguf)
    entry_id = entry.pk

    def send() -> None:
        from workers.tasks import import_model

        import_model.apply_async(args=[entry_id], queue="cpu")

    transaction.on_commit(send)
    return entry


def model_import_run(*, entry_id: int, log=print) -> ModelEntry:
    """The worker's side of an import: convert, describe, mark ready (or failed with the reason)."""
    from training.models import import_gguf

    entry = ModelEntry.objects.get(pk=entry_id)
    if entry.status != ModelStatus.IMPORTING:
        return entry
    try:
        import_gguf(entry.source, entry.path, log=log)
        entry.description, entry.status, entry.error = describe_model(entry.path), ModelStatus.READY, ""
    except Exception as exc:  # the entry says why; nothing half-written stays (atomic_folder)
        entry.status, entry.error = ModelStatus.FAILED, f"{type(exc).__name__}: {exc}"[:2000]
    entry.save(update_fields=["description", "status", "error"])
    return entry


def model_delete(*, user, entry: ModelEntry) -> None:
    require_role(user, entry.project_id, Role.MEMBER)
    audit(project=entry.project_id, user=user, action="model.remove", target_type="model", target_id=entry.pk,
          name=entry.name)
    entry.delete()  # the folder stays: runs and checkpoints may still use it
