"""Which paths a user may name in a request or a config (docs/architecture.md#projects-and-trust).

A path must lie inside the allowed folders (``settings.SEEDBED_DATA_ROOTS``, checked by the config schema,
``training.config.outside_roots``), and a folder that belongs to something in a project (a library entry's, a
run's) only when the user may read that. Each app that owns such folders says how to tell: this module knows the
library's folders (one per project name) and the runs app registers its own (``register_folder_owner``, from its
``AppConfig.ready``), so the apps below runs (datasets, library) check paths without importing runs.
"""
from __future__ import annotations

import os
from typing import Callable

#: settings attribute naming a folder -> readable(user, the first path component under it) -> bool
_FOLDER_OWNERS: dict[str, Callable[[object, str], bool]] = {}


def register_folder_owner(setting: str, readable: Callable[[object, str], bool]) -> None:
    """Paths under ``settings.<setting>`` are readable by a user when ``readable(user, owner)`` is true, ``owner``
    being the path's first component under that folder."""
    _FOLDER_OWNERS[setting] = readable


def library_folder_readable(user, owner: str) -> bool:
    """A library folder (library/<project name>/...): readable by a reader of that project."""
    from .selectors import visible_projects

    return visible_projects(user).filter(name=owner).exists()


register_folder_owner("SEEDBED_LIBRARY_DIR", library_folder_readable)


def config_path_error(*, user, path: str) -> str:
    """"" when ``user`` may name ``path`` in a config: a folder some app owns (a run's, with its checkpoints; a
    library entry's) only when that app says they may read it; other allowed folders are shared."""
    from django.conf import settings

    from training.config import nul_error

    if not path or user is None:
        return ""
    if nul_error(path):  # os.path.realpath raises on one
        return nul_error(path)
    real = os.path.realpath(path)
    for setting, readable in _FOLDER_OWNERS.items():
        base = os.path.realpath(getattr(settings, setting))
        if real.startswith(base.rstrip(os.sep) + os.sep):
            owner = os.path.relpath(real, base).split(os.sep)[0]
            if not readable(user, owner):
                return f"not found in your projects: {path}"
    return ""


def allowed_path(*, user, value, field: str, missing: str) -> str:
    """A path a user names in a request (a model folder, a data file): stripped, inside the allowed folders
    (settings.SEEDBED_DATA_ROOTS) and readable by the user (``config_path_error``); FieldErrors on ``field``
    otherwise (``missing`` when it is empty)."""
    from django.conf import settings

    from training.config import outside_roots
    from training.fields import FieldErrors

    if not isinstance(value, str) or not value.strip():
        raise FieldErrors({field: missing})
    value = value.strip()
    problem = outside_roots(value, settings.SEEDBED_DATA_ROOTS) or config_path_error(user=user, path=value)
    if problem:
        raise FieldErrors({field: problem})
    return value
