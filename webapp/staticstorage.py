"""Static files with hashed names, precompressed (gzip), cached for a year by browsers: WhiteNoise's compressed
manifest storage, filled by ``manage.py collectstatic`` (``./seedbed setup app`` and the Docker image run it).

Why the fallback: a process whose ``$SEEDBED_HOME`` has not been collected into yet (a fresh home given to a test,
a benchmark's temporary home, a developer who skipped set-up) still renders every page, with plain names served
by the finders (WHITENOISE_USE_FINDERS), uncompressed and uncached, instead of failing on a missing manifest."""
from __future__ import annotations

import os

from django.apps import apps
from django.conf import settings
from django.contrib.staticfiles.apps import StaticFilesConfig as DjangoStaticFilesConfig
from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticFilesConfig(DjangoStaticFilesConfig):
    """django.contrib.staticfiles, whose collectstatic leaves out what the npm packages ship besides their
    scripts (read-mes, licences, package.json) and source maps."""

    ignore_patterns = [*DjangoStaticFilesConfig.ignore_patterns, "*.map", "README.md", "package.json", "*.ts"]


class StaticStorage(CompressedManifestStaticFilesStorage):
    manifest_strict = False
    _stale: bool | None = None

    def url(self, name, force=False):
        if self.collected_is_stale():
            return self._plain(name)
        try:
            return super().url(name, force)
        except ValueError:  # not collected: the plain name, which the finders serve
            return self._plain(name)

    @staticmethod
    def _plain(name: str) -> str:
        return settings.STATIC_URL + name.lstrip("/")

    def collected_is_stale(self) -> bool:
        """Whether a source file changed after the last collectstatic (a developer edited a script and did not set
        up again): then pages name the sources, so nobody is served yesterday's script under a hashed name.
        Checked once per process (about 170 files' mtimes)."""
        if self._stale is None:
            from django.contrib.staticfiles.finders import get_finders

            try:
                collected = os.path.getmtime(self.path(self.manifest_name))
            except OSError:
                self._stale = False  # nothing collected: the fallback above serves plain names anyway
                return False
            ignore = apps.get_app_config("staticfiles").ignore_patterns
            newest = max((os.path.getmtime(storage.path(path)) for finder in get_finders()
                          for path, storage in finder.list(ignore)), default=0.0)
            self._stale = newest > collected
        return self._stale
