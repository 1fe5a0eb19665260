"""Functions that read top to bottom on one screen (docs/architecture.md#the-training-core): the config check, the
step's rollout collection and the external-engine supervisor each at most 60 lines, their steps named helpers."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 60

# (file, dotted name inside it)
FUNCTIONS = [
    ("training/config.py", "TrainConfig.validate"),
    ("training/step_rollouts.py", "collect_group_rollouts"),
    ("training/engines/process.py", "run_process"),
]


def function_node(path: Path, dotted: str) -> ast.FunctionDef:
    scope = ast.parse(path.read_text(encoding="utf-8"))
    for name in dotted.split("."):
        scope = next(n for n in scope.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == name)
    return scope


@pytest.mark.parametrize("file, name", FUNCTIONS)
def test_the_function_fits_a_screen(file, name):
    node = function_node(ROOT / file, name)
    lines = node.end_lineno - node.lineno + 1
    assert lines <= MAX_LINES, f"{file}: {name} is {lines} lines (at most {MAX_LINES}): split it into named helpers"
