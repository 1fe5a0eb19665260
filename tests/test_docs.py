"""docs/architecture.md stays true to the tree: every repository path it names exists, every section a docstring
cites exists, and no file cites a document outside the repository."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
TOP = ("training/", "webapp/", "workers/", "templates/", "static/", "bench/", "tests/", "seedbed_client/", "docs/")


def _anchors(text: str) -> set[str]:
    """GitHub's anchors: heading text lower-cased, punctuation dropped, spaces as hyphens."""
    return {re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#{2,3} (.+)$", text, flags=re.M)}


def test_every_path_the_architecture_doc_names_exists():
    text = DOC.read_text()
    named = {m.split(":")[0].rstrip("/") for m in re.findall(r"`([\w./-]+(?::\s?\w+)?)`", text) if m.startswith(TOP)}
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert named and not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_the_contents_line_links_only_existing_sections():
    text = DOC.read_text()
    anchors = _anchors(text)
    linked = set(re.findall(r"\]\(#([\w-]+)\)", text))
    assert len(linked) >= 10 and linked <= anchors, sorted(linked - anchors)


def test_cited_sections_exist():
    anchors = _anchors(DOC.read_text())
    cited = {}
    for path in ROOT.glob("**/*.py"):
        if ".venv" in path.parts or "node_modules" in path.parts:
            continue
        for anchor in re.findall(r"docs/architecture\.md#([\w-]+)", path.read_text(errors="ignore")):
            cited.setdefault(anchor, []).append(str(path.relative_to(ROOT)))
    unknown = {a: files for a, files in cited.items() if a not in anchors}
    assert not unknown, f"docstrings cite sections docs/architecture.md does not have: {unknown}"


def test_no_file_cites_a_document_outside_the_repository_or_an_issue_number():
    """Citations point into docs/architecture.md; an issue tracker's numbers mean nothing to a reader of the code."""
    # (this pattern names what it forbids; this file is the one exempt from it)
    pattern = re.compile(r"DESIGN §|\.\./shared|\b[Ii]ssues? #?\d+")
    found = []
    for path in ROOT.rglob("*"):
        if (not path.is_file() or path.suffix not in {".py", ".md", ".html", ".js", ".css", ".toml", ".yml", ".sh"}
                or {".venv", "node_modules", "var", ".git"} & set(path.parts)):
            continue
        for n, line in enumerate(path.read_text(errors="ignore").splitlines(), 1):
            if pattern.search(line) and path != Path(__file__):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:80]}")
    assert not found, "\n".join(found)


def _top_names(path: Path) -> set[str]:
    """What a module defines or imports at any level: functions, classes, assigned names, imported names."""
    import ast

    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
        elif isinstance(node, ast.ImportFrom):
            out |= {a.asname or a.name for a in node.names}
    return out


def test_every_name_the_architecture_doc_places_in_a_module_is_there():
    """`file.py: name` and `package.module.name` in docs/architecture.md: the module exists and defines the name."""
    text = DOC.read_text()
    claims = [(ROOT / path, name.split(".")[0]) for path, name in
              re.findall(r"`([\w./-]+\.py): ([A-Za-z_][\w.]*)(?:\([^`]*\))?`", text)]
    for dotted in set(re.findall(r"`((?:training|webapp|workers|seedbed_client)(?:\.\w+)+)(?:\([^`]*\))?`", text)):
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):  # the longest prefix that is a module
            base = ROOT.joinpath(*parts[:i])
            module = base.with_suffix(".py") if base.with_suffix(".py").exists() else base / "__init__.py"
            if module.exists():
                break
        else:
            claims.append((ROOT / dotted, ""))
            continue
        if parts[i:]:
            claims.append((module, parts[i]))
    wrong = sorted(f"{p.relative_to(ROOT)}: {name}" for p, name in claims if not p.exists() or name not in _top_names(p))
    assert len(claims) >= 20 and not wrong, f"docs/architecture.md places names where they are not: {wrong}"
