"""Imports go one way (docs/architecture.md#layers): ``training`` imports no web code, the apps only the apps to
their left (projects ← datasets/library ← runs ← sweeps ← evals ← api), and no module of ``training`` imports
itself back through another.

The graph is read from the source with ``ast``: every ``import`` and ``from … import``, at module level and inside
functions (a function-level import is a dependency too, only a later one). ``from a import b`` where ``a.b`` is a
module is an edge to ``a.b``; importing ``a.b.c`` also runs ``a/__init__.py`` and ``a/b/__init__.py``, which are
edges of their own. Each failing test prints the offending edges as ``importer -> imported (file:line)``.
"""
from __future__ import annotations

import ast
import copy
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("training", "webapp", "workers", "seedbed_client")

#: the apps, left to right: an app may import only the apps of a lower layer
APP_LAYERS = {"projects": 0, "datasets": 1, "library": 1, "runs": 2, "sweeps": 3, "evals": 4, "api": 5}
WEB_CODE = ("webapp", "workers", "django", "celery", "rest_framework", "ninja")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.lru_cache(maxsize=None)
def project_modules() -> dict[str, Path]:
    """Every module of the project's packages (migrations included: they are code the apps run)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[module_name(path)] = path
    return found


def without_type_checking(tree: ast.AST) -> ast.AST:
    """The tree without its ``if TYPE_CHECKING:`` blocks: imports for annotations only, never run."""
    class Drop(ast.NodeTransformer):
        def visit_If(self, node: ast.If):
            test = node.test
            if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                    isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"):
                return node.orelse or None
            return self.generic_visit(node)

    return Drop().visit(copy.deepcopy(tree))


def imported_names(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, int]]:
    """(dotted name, line) of every import in the tree, relative ones resolved; ``from a import b`` gives
    ``a.b`` (the caller keeps it only if it is a module, else falls back to ``a``)."""
    out = []
    for node in ast.walk(without_type_checking(tree)):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            out.append((source, node.lineno))
            out += [(f"{source}.{alias.name}", node.lineno) for alias in node.names]
        elif isinstance(node, ast.Call) and node.args:
            out += [(name, node.lineno) for name in imported_by_call(node, module)]
    return out


WALKS = {"declared", "import_all"}
"""training.extensions' walks: a call with a literal package (or ``__name__``) imports every module of it
(``modules`` only lists their names: the Celery app's task modules, which Celery imports once it is configured)."""


def imported_by_call(node: ast.Call, module: str) -> list[str]:
    """What a call imports at run time: ``importlib.import_module("a.b")`` imports a.b; ``declared(package, ...)``
    and ``import_all(package)`` of ``training.extensions`` import every module of the package they walk."""
    func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    first = node.args[0]
    name = (first.value if isinstance(first, ast.Constant) and isinstance(first.value, str)
            else module if isinstance(first, ast.Name) and first.id == "__name__" else None)
    if name is None or func not in {"import_module", *WALKS}:
        return []
    if func == "import_module":
        return [name]
    from training.extensions import modules

    return modules(name)


def with_parents(name: str) -> list[str]:
    """``a.b.c`` -> ``a``, ``a.b``, ``a.b.c``: importing a module runs its packages' ``__init__`` first."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


@functools.lru_cache(maxsize=None)
def import_graph() -> dict[str, dict[str, int]]:
    """module -> {imported project module or external top-level name: first line}."""
    modules = project_modules()
    graph: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        edges: dict[str, int] = {}
        for name, line in imported_names(tree, module, path.name == "__init__.py"):
            for target in with_parents(name):
                if target in modules:
                    if target != module and not module.startswith(target + "."):
                        edges.setdefault(target, line)
                elif target == name.split(".")[0]:  # an outside package, by its top-level name
                    edges.setdefault(target, line)
        graph[module] = edges
    return graph


def where(module: str, line: int) -> str:
    return f"{project_modules()[module].relative_to(ROOT)}:{line}"


def edge_text(importer: str, imported: str) -> str:
    return f"{importer} -> {imported} ({where(importer, import_graph()[importer][imported])})"


def app_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "webapp" and len(parts) > 1 and parts[1] in APP_LAYERS else None


def test_the_graph_sees_module_and_function_level_imports():
    graph = import_graph()
    assert "training.engines.seedbed" in graph["training.engines"]  # through the registry's walk
    assert "webapp.sweeps.policies.rules.median" in graph["webapp.sweeps.policies.registry"]  # the rules' walk
    assert "training.verifiers.code" in graph["training.verifiers.registry"]
    assert "training.data" in graph["training.loop"]  # module level
    assert "training.config" not in graph["training.loop"]  # under TYPE_CHECKING: for annotations, never run
    assert "training.engines" in graph["workers.runner"]  # inside main()
    assert "torch" in graph["training.loop"] and "django" in graph["webapp.runs.models"]


def test_training_imports_no_web_code():
    bad = [edge_text(m, t) for m, edges in import_graph().items() if m.split(".")[0] == "training"
           for t in edges if t.split(".")[0] in WEB_CODE]
    assert bad == [], "training imports web code:\n" + "\n".join(bad)


#: Imports against the app order that are still there, each with the reason it is not removed yet. The test fails
#: on any other, and on one of these once it is gone (take it off the list: the list only shrinks). None now: an
#: app to the right contributes to a page of one to its left through a hook it fills at ``ready()``
#: (``webapp.library.selectors.register_model_section``, ``webapp.projects.paths.register_folder_owner``).
KNOWN_APP_DEBTS: set[tuple[str, str]] = set()


def app_order_violations() -> set[tuple[str, str]]:
    """(importer, imported module) of every import from an app to an app of its own layer or one to its right;
    only the deepest module of an import (``webapp.runs.models``, not also the package ``webapp.runs``)."""
    found = set()
    for module, edges in import_graph().items():
        app = app_of(module)
        targets = [t for t in edges if app and app_of(t) and app_of(t) != app and APP_LAYERS[app_of(t)] >= APP_LAYERS[app]]
        found |= {(module, t) for t in targets if not any(o.startswith(t + ".") for o in targets)}
    return found


def test_apps_import_only_the_apps_to_their_left():
    found = app_order_violations()
    bad = sorted(edge_text(m, t) for m, t in found - KNOWN_APP_DEBTS)
    assert bad == [], "imports against the app order (projects <- datasets/library <- runs <- sweeps <- evals <- api):\n" \
        + "\n".join(bad)
    assert sorted(KNOWN_APP_DEBTS - found) == [], "no longer imported: take these off KNOWN_APP_DEBTS"


def cycles(graph: dict[str, dict[str, int]], within: str) -> list[list[str]]:
    """The strongly connected components of more than one module among the modules under ``within`` (Tarjan)."""
    nodes = [m for m in graph if m == within or m.startswith(within + ".")]
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in nodes:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in nodes:
        if v not in index:
            visit(v)
    return found


#: Circles still there, each with why (the test fails on any other, and once one is gone: the list only shrinks).
#: None: across the packages the web app reaches the workers only through ``workers.port``, whose modules import no
#: web code; inside ``training`` a module that must reach back up does so through a module above both
#: (``training.verifiers.registry``, ``training.first_prompt``, ``training.rollout_engines``; the engine registry's
#: walk imports no rank process: they are the subpackage ``training.engines.entry``); inside ``webapp`` the rule
#: registry hands the risk fit its ``replay`` (``history_risk.fit``), and the chart tier is a module of its own
#: (``webapp.sweeps.chart_tier``) below the live check, the history and the dashboard's queries.
KNOWN_CIRCLES: list[list[str]] = []


def project_circles() -> list[list[str]]:
    """Every circle among the project's own modules (``training``, ``webapp``, ``workers``, ``seedbed_client``)."""
    graph = {f"all.{m}": {f"all.{t}": line for t, line in edges.items() if t in project_modules()}
             for m, edges in import_graph().items()}
    return [[name[4:] for name in component] for component in cycles(graph, "all")]


def test_no_import_circles_but_the_known_ones():
    graph, found = import_graph(), project_circles()
    lines = []
    for component in found:
        if component in KNOWN_CIRCLES:
            continue
        lines.append("circle: " + ", ".join(component))
        lines += ["  " + edge_text(m, t) for m in component for t in graph[m] if t in component]
    assert lines == [], "\n".join(lines)
    assert [c for c in KNOWN_CIRCLES if c not in found] == [], "gone: take these off KNOWN_CIRCLES"
    assert not [c for c in KNOWN_CIRCLES if not all(m.startswith("webapp.") for m in c)]


def test_the_web_app_imports_the_workers_only_through_their_port():
    bad = [edge_text(m, t) for m, edges in import_graph().items() if m.split(".")[0] == "webapp"
           for t in edges if t.split(".")[0] == "workers" and t not in ("workers", "workers.port")]
    assert bad == [], "the web app imports the workers beside workers.port:\n" + "\n".join(bad)
    port = import_graph()["workers.port"]
    assert not [t for t in port if t.split(".")[0] == "webapp"]
    reached = {t for t in port if t.startswith("workers.")}
    assert reached and not [edge_text(m, t) for m in reached for t in import_graph()[m] if t.startswith("webapp")]


def test_the_circle_finder_finds_a_circle():
    graph = {"training.a": {"training.b": 1}, "training.b": {"training.c": 1}, "training.c": {"training.a": 1},
             "training.d": {"training.a": 1}}
    assert cycles(graph, "training") == [["training.a", "training.b", "training.c"]]


def private_imports() -> list[str]:
    """Every ``from <project module> import _name`` in production code (the name private to its module)."""
    modules = project_modules()
    found = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                source = ".".join(base[:len(base) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] not in PACKAGES:
                continue
            found += [f"{where(module, node.lineno)}: {alias.name} from {source}" for alias in node.names
                      if alias.name.startswith("_") and not alias.name.startswith("__")]
    return found


def test_no_private_name_is_imported_across_production_modules():
    """A name with a leading underscore is its module's own: a caller elsewhere means it is public (rename it) or
    belongs where it is used (move it)."""
    assert not private_imports(), "\n".join(private_imports())
