"""The runs app's services are a package of one module per concern, each under 400 lines, every public service
re-exported from the package (docs/architecture.md#layers): callers keep ``from webapp.runs import services``."""
from __future__ import annotations

import ast
from pathlib import Path

from webapp.runs import services

PACKAGE = Path(services.__file__).parent
MAX_LINES = 400


def test_every_module_of_the_package_is_under_400_lines():
    sizes = {p.name: len(p.read_text().splitlines()) for p in PACKAGE.glob("*.py")}
    assert len(sizes) >= 10, sizes
    assert {name: n for name, n in sizes.items() if n >= MAX_LINES} == {}


def test_every_public_service_of_a_module_is_reexported_by_the_package():
    missing = []
    for path in PACKAGE.glob("*.py"):
        if path.name == "__init__.py":
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                if getattr(services, node.name, None) is None:
                    missing.append(f"{path.stem}.{node.name}")
    assert missing == []
