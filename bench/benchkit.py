"""What the benchmark scripts share: Django set up on a database of their own.

``python bench/<script>.py`` puts bench/ first on sys.path, so the scripts import this module as ``benchkit``.
"""
from __future__ import annotations

import os
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)


def setup_django(*, fresh_home: bool = True, collect_static: bool = False) -> None:
    """Set Django up and migrate. ``fresh_home``: unless ``DATABASE_URL`` names a database, a new temporary
    ``SEEDBED_HOME`` (an empty SQLite database). ``collect_static``: also the hashed, gzipped static files that
    ``./seedbed setup app`` collects (else pages name the finders' plain files)."""
    if fresh_home and not os.environ.get("DATABASE_URL"):
        os.environ["SEEDBED_HOME"] = tempfile.mkdtemp(prefix="seedbed-bench-")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    if collect_static:
        call_command("collectstatic", verbosity=0, interactive=False)
