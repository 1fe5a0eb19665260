"""Writes to the model library: register a model folder, import a GGUF file (on a worker: a minute of CPU and
about 1 GB of memory for 135 M parameters), all inside the allowed folders (settings.SEEDBED_DATA_ROOTS)."""
from __future__ import annotations

import logging
import os
import re
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from training.fields import FieldErrors, coerce, range_error, range_text
from training.models import check_gguf_file, describe_model
from training.names import child_path, path_component_error, require_path_component
from webapp.projects.models import Role
from webapp.projects.services import audit, project_for_launch, require_role
from webapp.projects.paths import allowed_path

from .models import TRIAL_ACTIVE, ModelEntry, ModelStatus, ModelTrial, TrialStatus

log = logging.getLogger("seedbed.library")
# An imported model's name is its folder in the project's library: one plain name, first a letter or digit (no
# ".", "..", hidden or staging folders), and not the folder the project's datasets live in.
NAME = re.compile(r"^\w[\w.-]{0,99}\Z")
RESERVED_NAMES = frozenset({"datasets"})


def _check_name(name, project) -> str:
    name = (name or "").strip() if isinstance(name, str) else ""
    if not NAME.match(name):
        raise FieldErrors({"name": "1-100 letters, digits, '.', '_' or '-', the first a letter or digit"})
    problem = path_component_error(name)  # the name is the imported model's folder
    if problem:
        raise FieldErrors({"name": problem})
    if name.casefold() in RESERVED_NAMES:
        raise FieldErrors({"name": f"{name!r} is the project's datasets folder; choose another name"})
    if ModelEntry.objects.filter(project=project, name=name).exists():
        raise FieldErrors({"name": f"project {project.name} has a model named {name!r} already"})
    return name


def _check_folder(path, user) -> str:
    path = allowed_path(user=user, value=path, field="path", missing="give the model folder")
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
    """$SEEDBED_HOME/library/<project>/<name>: only the project's members may name it in a config. Both names are
    checked to be one plain path component, the folder to resolve inside the project's (FieldErrors otherwise)."""
    require_path_component(project.name, "project")
    return child_path(os.path.join(str(settings.SEEDBED_LIBRARY_DIR), project.name), name, "name")


@transaction.atomic
def model_import_gguf(*, user, name, gguf, project=None) -> ModelEntry:
    """Queue the import of a GGUF file (inside the allowed folders) into $SEEDBED_HOME/models/<project>/<name>."""
    project = project_for_launch(user=user, project=project)
    name = _check_name(name, project)
    gguf = allowed_path(user=user, value=gguf, field="gguf", missing="give the .gguf file to import")
    check_gguf_file(gguf)
    entry = ModelEntry.objects.create(project=project, name=name, path=imported_folder(project, name),
                                      source=os.path.realpath(gguf), status=ModelStatus.IMPORTING, created_by=user)
    audit(project=project, user=user, action="model.import", target_type="model", target_id=entry.pk, source=gguf)
    entry_id = entry.pk

    from workers.port import send_on_commit

    send_on_commit("workers.tasks.import_model", args=[entry_id], queue="cpu")
    return entry


def model_import_run(*, entry_id: int, log=print) -> ModelEntry:
    """The worker's side of an import: convert, describe, mark ready (or failed with the reason)."""
    from training.models import import_gguf

    entry = ModelEntry.objects.get(pk=entry_id)
    if entry.status != ModelStatus.IMPORTING:
        return entry
    try:
        # an entry queued before names were checked: refused here, before a minute of work (atomic_folder would too)
        child_path(os.path.dirname(entry.path), os.path.basename(entry.path), "name")
        import_gguf(entry.source, entry.path, log=log)
        entry.description, entry.status, entry.error = describe_model(entry.path), ModelStatus.READY, ""
    except Exception as exc:  # the entry says why; nothing half-written stays (atomic_folder)
        entry.status, entry.error = ModelStatus.FAILED, f"{type(exc).__name__}: {exc}"[:2000]
    entry.save(update_fields=["description", "status", "error"])
    return entry


# --- "try it": one reply from a model, generated on a worker slot ------------------------------------------

TRIAL_PROMPT_MAX_CHARS = 4000
# (type, range) of each setting: the form's help text and the checks read the same numbers
TRIAL_SETTINGS = {"max_new_tokens": (int, {"min": 1, "max": 256}), "temperature": (float, {"min": 0.0, "max": 2.0})}
TRIAL_DEFAULTS = {"max_new_tokens": 64, "temperature": 0.7, "chat": True}
# A trial still queued or running after this long is given up (failed, saying why), so its user may try again:
# its worker died, or the cpu slots were busy with long runs all that time.
TRIAL_EXPIRE_S = 600


def trial_help() -> dict[str, str]:
    """Each setting's range as text, for the form."""
    return {name: range_text(meta) for name, (_, meta) in TRIAL_SETTINGS.items()}


def _trial_inputs(prompt, max_new_tokens, temperature, chat) -> dict:
    """The trial's inputs, checked and typed; FieldErrors naming every bad field."""
    errors, values = {}, {}
    if not isinstance(prompt, str) or not prompt.strip():
        errors["prompt"] = "give a prompt"
    elif len(prompt) > TRIAL_PROMPT_MAX_CHARS:
        errors["prompt"] = f"at most {TRIAL_PROMPT_MAX_CHARS} characters; got {len(prompt)}"
    else:
        values["prompt"] = prompt
    for name, value in (("max_new_tokens", max_new_tokens), ("temperature", temperature)):
        kind, meta = TRIAL_SETTINGS[name]
        try:
            values[name] = coerce(value, kind)
        except ValueError as exc:
            errors[name] = str(exc)
            continue
        problem = range_error(values[name], meta)
        if problem:
            errors[name] = problem
    try:
        values["chat"] = coerce(chat, bool)
    except ValueError as exc:
        errors["chat"] = str(exc)
    if errors:
        raise FieldErrors(errors)
    return values


def _trials_expire(*, user) -> int:
    """Give up the user's trials that have been queued or running longer than TRIAL_EXPIRE_S."""
    now = timezone.now()
    return ModelTrial.objects.filter(
        created_by=user, status__in=TRIAL_ACTIVE, created_at__lt=now - timedelta(seconds=TRIAL_EXPIRE_S)).update(
        status=TrialStatus.FAILED, ended_at=now,
        error=f"no worker answered within {TRIAL_EXPIRE_S} s (the cpu slots were busy, or the worker stopped)")


def _busy_message(active: ModelTrial | None) -> str:
    what = f"trial {active.pk} of {active.entry.name if active.entry_id else active.builtin}" if active else "other trial"
    return (f"your {what} is still {active.status if active else 'running'}: one trial at a time; "
            f"try again once it has answered")


@transaction.atomic
def model_try(*, user, prompt, max_new_tokens=TRIAL_DEFAULTS["max_new_tokens"],
              temperature=TRIAL_DEFAULTS["temperature"], chat=TRIAL_DEFAULTS["chat"], entry: ModelEntry | None = None,
              builtin: dict | None = None) -> ModelTrial:
    """Queue one reply from a library ``entry`` (or a ``builtin`` model, a selectors.builtin_models row) to
    ``prompt``; the worker's side is ``model_try_run``. One active trial per user.

    Trying a model needs the member role, as launching a run does, not just read access: a trial takes a cpu
    worker slot (the one runs and evaluations queue for) for up to a minute, and viewers may not spend a
    project's compute. A built-in model's trial goes to the user's personal project (where they are admin).

    An entry's folder is checked again for ``user`` on every trial (``_still_readable``), as a launch checks a
    config's ``model_path``: an entry registered from a run's checkpoint is tried only while the user may read
    that run (removed from its project, they may not, though the entry lives in a project of their own)."""
    if (entry is None) == (builtin is None):
        raise TypeError("model_try: give exactly one of entry and builtin")
    if entry is not None:
        require_role(user, entry.project_id, Role.MEMBER)  # a non-member: 404; a viewer: 403
        project, folder = entry.project, _still_readable(user, entry)
    else:
        project, folder = project_for_launch(user=user, project=None), builtin["folder"]
    values = _trial_inputs(prompt, max_new_tokens, temperature, chat)
    if entry is not None and entry.status != ModelStatus.READY:
        raise FieldErrors({"model": f"{entry.name} is {entry.status}; it can be tried once it is ready"})
    _trials_expire(user=user)
    active = ModelTrial.objects.filter(created_by=user, status__in=TRIAL_ACTIVE).select_related("entry").first()
    if active is not None:
        raise FieldErrors({"trial": _busy_message(active)})
    try:
        with transaction.atomic():  # the database's one-active-trial constraint decides a race between two requests
            trial = ModelTrial.objects.create(project=project, entry=entry, builtin="" if entry else builtin["key"],
                                              model_path=folder, created_by=user, **values)
    except IntegrityError:
        raise FieldErrors({"trial": _busy_message(None)}) from None
    audit(project=project, user=user, action="model.try", target_type="trial", target_id=trial.pk,
          model=entry.name if entry else builtin["key"], entry=entry.pk if entry else None,
          max_new_tokens=values["max_new_tokens"], temperature=values["temperature"], chat=values["chat"],
          prompt_chars=len(values["prompt"]))
    trial_id = trial.pk

    from workers.port import send_on_commit

    send_on_commit("workers.tasks.try_model", args=[trial_id], queue="cpu")
    return trial


def _still_readable(user, entry: ModelEntry) -> str:
    """``entry``'s folder if ``user`` may name it now (inside the allowed folders, and a run's or a library
    folder only while they may read that run or project: ``allowed_path``); FieldErrors on ``model`` otherwise."""
    try:
        return allowed_path(user=user, value=entry.path, field="model", missing="the model has no folder")
    except FieldErrors as exc:
        raise FieldErrors({"model": f"{entry.name}: its folder is {exc.errors['model']}"}) from None


def model_try_run(*, trial_id: int) -> ModelTrial | None:
    """The worker's side of a trial: claim it (only a queued trial: a second delivery, or a trial given up
    meanwhile, is left alone), generate, record the reply (or why it failed). None when the trial is gone."""
    from training.reply import generate_reply

    claimed = ModelTrial.objects.filter(pk=trial_id, status=TrialStatus.QUEUED).update(
        status=TrialStatus.RUNNING, started_at=timezone.now())
    trial = ModelTrial.objects.filter(pk=trial_id).first()
    if trial is None or not claimed:
        return trial
    try:
        if trial.entry_id is not None:  # queued before the user lost the folder: not run (the same check)
            _still_readable(trial.created_by, trial.entry)
        result = generate_reply(trial.model_path, trial.prompt, max_new_tokens=trial.max_new_tokens,
                                temperature=trial.temperature, chat=trial.chat)
        fields = {"status": TrialStatus.DONE, "error": "", **result}
    except Exception as exc:  # a broken or removed folder, a prompt too long for the context: the trial says so
        log.warning("trial %s: %s: %s", trial_id, type(exc).__name__, exc)
        fields = {"status": TrialStatus.FAILED, "error": f"{type(exc).__name__}: {exc}"[:2000]}
    # written only while it is still running: a trial given up meanwhile (_trials_expire) stays failed
    ModelTrial.objects.filter(pk=trial_id, status=TrialStatus.RUNNING).update(ended_at=timezone.now(), **fields)
    trial.refresh_from_db()
    return trial
