"""User-chosen names that become parts of paths (a project's library folder, an imported model's folder, an
uploaded dataset's file): one check for all of them, and a join that stays inside its parent folder.

Nothing here imports Django, so the training CLI and every web app use the same rule.

>>> path_component_error("gsm8k-v2.1")
''
>>> path_component_error("..")
"must be a name, not '..'"
>>> path_component_error("a/b")
"must be one name, without '/'"
>>> path_component_error("\\uff0e\\uff0e")  # fullwidth dots: NFKC makes them '..'
"must be written in plain characters: NFKC normalisation makes it '..'"
"""
from __future__ import annotations

import os
import unicodedata

from training.fields import FieldErrors

__all__ = ["path_component_error", "require_path_component", "child_path"]

_SEPARATORS = {"/", "\\", os.sep, *([os.altsep] if os.altsep else [])}


def path_component_error(name) -> str:
    """"" when ``name`` is exactly one safe path component, else why not: not empty, not ``.`` or ``..``, no
    separator, no NUL or other control character, and unchanged by NFKC normalisation (a look-alike such as a
    fullwidth ``．．`` or ``／`` that some layer could fold into ``..`` or ``/`` is refused, not translated)."""
    if not isinstance(name, str) or not name:
        return "give a name"
    if name in (".", ".."):
        return f"must be a name, not {name!r}"
    for sep in sorted(_SEPARATORS):
        if sep in name:
            return f"must be one name, without {sep!r}"
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn") for c in name):
        return "must not hold control or invisible characters"
    normal = unicodedata.normalize("NFKC", name)
    if normal != name:
        return f"must be written in plain characters: NFKC normalisation makes it {normal!r}"
    return ""


def require_path_component(name, field: str) -> str:
    """``name`` when ``path_component_error`` finds nothing; FieldErrors on ``field`` otherwise."""
    problem = path_component_error(name)
    if problem:
        raise FieldErrors({field: problem})
    return name


def child_path(parent: str, name: str, field: str) -> str:
    """``parent``/``name``, checked to resolve (symlinks followed) to an entry directly inside ``parent``: what
    every write that replaces or removes its target checks first. FieldErrors on ``field`` otherwise."""
    require_path_component(name, field)
    path = os.path.join(parent, name)
    if os.path.dirname(os.path.realpath(path)) != os.path.realpath(parent):
        raise FieldErrors({field: f"{name!r} does not stay inside {parent}"})
    return path
