"""Static files with hashed names, precompressed (gzip), cached for a year by browsers: WhiteNoise's compressed
manifest storage, filled by ``manage.py collectstatic`` (``./seedbed setup app`` and the Docker image run it).

Why the fallback: a process whose ``$SEEDBED_HOME`` has not been collected into yet (a fresh home given to a test,
a benchmark's temporary home, a developer who skipped set-up) still renders every page, with plain names served
by the finders (WHITENOISE_USE_FINDERS), uncompressed and uncached, instead of failing on a missing manifest."""
from __future__ import annotations

from django.conf import settings
from django.contrib.staticfiles.apps import StaticFilesConfig as DjangoStaticFilesConfig
from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticFilesConfig(DjangoStaticFilesConfig):
    """django.contrib.staticfiles, whose collectstatic leaves out what Plotly's package_data holds besides
    plotly.min.js (a 5 MB widget bundle, datasets, templates) and source maps."""

    ignore_patterns = [*DjangoStaticFilesConfig.ignore_patterns, "widgetbundle.js", "datasets", "templates", "*.map"]


class StaticStorage(CompressedManifestStaticFilesStorage):
    manifest_strict = False

    def url(self, name, force=False):
        try:
            return super().url(name, force)
        except ValueError:  # not collected: the plain name, which the finders serve
            return settings.STATIC_URL + name.lstrip("/")
