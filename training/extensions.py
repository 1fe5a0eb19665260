"""How Seedbed finds its extensions (docs/architecture.md, "Extension points"): one walk for every kind.

An extension is a module of its kind's package that says at its top level what it adds: ``ENGINE = Engine(...)``
in ``training.engines``, ``@register_verifier("name")`` in ``training.verifiers``. ``modules(package)`` lists the
package's modules (``pkgutil.iter_modules`` over its ``__path__``, so a folder a test adds to that path is walked
too; no subpackage, and no module whose name begins with "_"; it imports none of them), ``import_all(package)``
imports each, ``declared(package, name)`` imports each and returns what those that declare ``name`` hold, in the
modules' order. No list of names is kept elsewhere and no file is read as text. This module imports nothing of
Seedbed's; ``tests/test_imports.py`` reads a call of ``import_all`` or ``declared`` with a literal package as
imports of every module of that package (and one of ``modules``, which imports none, as no import).
"""
from __future__ import annotations

import importlib
import pkgutil

__all__ = ["modules", "import_all", "declared"]


def modules(package: str) -> list[str]:
    """The dotted names of ``package``'s modules, sorted (no subpackage, none beginning with "_").

    >>> modules("training.engines")[:2]
    ['training.engines.command', 'training.engines.events']
    """
    found = pkgutil.iter_modules(importlib.import_module(package).__path__)
    return sorted(f"{package}.{m.name}" for m in found if not m.ispkg and not m.name.startswith("_"))


def import_all(package: str) -> list[str]:
    """Import every module of ``package`` (``modules``): for a kind whose modules register themselves where they
    are defined (``@register_verifier``). Returns their names."""
    names = modules(package)
    for module in names:
        importlib.import_module(module)
    return names


def declared(package: str, name: str) -> list[tuple[str, object]]:
    """(module, value) for every module of ``package`` whose top level binds ``name``, each module imported.

    >>> [module for module, _ in declared("training.engines", "ENGINE")]
    ['training.engines.command', 'training.engines.seedbed', 'training.engines.trl', 'training.engines.verl']
    """
    out = []
    for module in modules(package):
        value = getattr(importlib.import_module(module), name, None)
        if value is not None:
            out.append((module, value))
    return out
