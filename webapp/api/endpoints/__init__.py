"""The /api/v1/ endpoints, one module per resource, each registering its operations on the one API object
(:mod:`webapp.api.v1`: token authentication, body parser, error shape) when imported; in this order, the
schema's (/api/v1/schema). See docs/architecture.md#layers."""
# isort: skip_file
from webapp.api.endpoints import projects  # noqa: F401
from webapp.api.endpoints import runs  # noqa: F401
from webapp.api.endpoints import sweeps  # noqa: F401
from webapp.api.endpoints import evals  # noqa: F401
from webapp.api.endpoints import datasets  # noqa: F401
from webapp.api.v1 import api

__all__ = ["api"]
