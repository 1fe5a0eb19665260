"""The ``code`` verifier: run the completion's last ```python block against the example's tests, sandboxed.

Two kinds of example:

* tests mode, ``{"tests": "assert f(1) == 2\\nassert f(2) == 4"}``;
* call/IO mode, ``{"entry_point": "f", "inputs": [[1], [2]], "outputs": [2, 4]}``.

The verdict is decided here, on the trusted side, never from the program's exit code or output. The tests
are split in the parent (``ast``): every top-level ``assert A == <literal>`` becomes "evaluate A and report
its value" with the literal kept here; ``assert A == B`` reports both sides; other asserts report their
truth value; other statements just run. In IO mode only the inputs go in. So expected values never enter
the sandbox: a program cannot print a pass marker, exit early, patch builtins or return an object whose
``__eq__`` is always true and pass: values come back as plain JSON data (exact builtin types only) and
are compared here with Python's ``==``. A report stream that is out of order, duplicated or truncated fails.

Either kind may carry ``setup_code`` (a string): trusted set-up such as imports and helper functions (e.g. a
HumanEval prompt), run before the completion's program in the same execution and namespace. The program is
compiled on its own, so its line numbers and a leading ``from __future__`` import stay valid.

All of a completion's tests run in one execution; results are cached by the hash of (the code run, tests,
limits).
"""
from __future__ import annotations

import ast
import hashlib
import json
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from training.verifiers.base import Param, VerifierError, VerifierResult, register_verifier
from training.verifiers.sandbox import SANDBOX_USER, shared_sandbox
from training.verifiers.sandbox_server import _to_wire
from training.verifiers.workers import TaskFailed, TaskTimeout

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_TAGGED_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_program(completion: str) -> str | None:
    """The last ```python block (an untagged ``` block when there is no tagged one), or None.

    >>> extract_program("First:\\n```python\\nx = 1\\n```\\nBetter:\\n```python\\nx = 2\\n```")
    'x = 2\\n'
    >>> extract_program("no code here") is None
    True
    """
    blocks = _TAGGED_FENCE.findall(completion) or _FENCE.findall(completion)
    return blocks[-1] if blocks else None


def from_wire(value):
    """Inverse of the sandbox's ``_to_wire``: plain JSON back to Python values (tuples, sets, dicts, big ints)."""
    if isinstance(value, list):
        return [from_wire(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {"$tuple"}:
            return tuple(from_wire(v) for v in value["$tuple"])
        if set(value) == {"$set"}:
            return frozenset(from_wire(v) for v in value["$set"])
        if set(value) == {"$dict"}:
            return {from_wire(k): from_wire(v) for k, v in value["$dict"]}
        if set(value) == {"$bigint"}:
            return int(value["$bigint"])
        if set(value) == {"$float"}:
            return float(value["$float"])
        raise ValueError(f"unknown wire object with keys {sorted(value)}")
    return value


def _as_lists(value):
    """JSON has no tuples: in IO mode a returned tuple is compared as a list."""
    if isinstance(value, (list, tuple)):
        return [_as_lists(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_lists(v) for k, v in value.items()}
    return value


@dataclass
class Check:
    """How the trusted side judges the report(s) of a test: ``kind`` is ok | true | equal | equal_steps."""

    kind: str
    source: str
    expected: object = None   # equal: the expected Python value (never sent to the sandbox)
    other_step: int = -1      # equal_steps: the step holding the right-hand side
    negate: bool = False      # for ``!=``
    tuples_as_lists: bool = False  # IO mode: JSON outputs have no tuples


def _literal(node: ast.AST):
    """(True, value) when ``node`` is a plain-data literal; (False, None) otherwise."""
    try:
        value = ast.literal_eval(node)
        _to_wire(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None
    return True, value


def plan_tests(tests: str) -> tuple[list[dict], list[tuple[int, Check]]]:
    """Split test source into sandbox steps and trusted checks.

    >>> steps, checks = plan_tests("assert f(2) == 4\\nassert g()")
    >>> steps
    [{'kind': 'eval', 'src': 'f(2)'}, {'kind': 'eval', 'src': 'True if (g()) else False'}]
    >>> [(i, c.kind, c.expected) for i, c in checks]
    [(0, 'equal', 4), (1, 'true', None)]
    """
    try:
        tree = ast.parse(tests)
    except SyntaxError as exc:
        raise VerifierError(f"code: the example's tests do not parse: {exc}") from None
    steps: list[dict] = []
    checks: list[tuple[int, Check]] = []
    for stmt in tree.body:
        source = ast.unparse(stmt)
        test = stmt.test if isinstance(stmt, ast.Assert) else None
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq)):
            negate = isinstance(test.ops[0], ast.NotEq)
            left, right = test.left, test.comparators[0]
            right_is_literal, right_value = _literal(right)
            left_is_literal, left_value = _literal(left)
            if right_is_literal or left_is_literal:
                computed, expected = (left, right_value) if right_is_literal else (right, left_value)
                steps.append({"kind": "eval", "src": ast.unparse(computed)})
                checks.append((len(steps) - 1, Check("equal", source, expected=expected, negate=negate)))
            else:
                steps.append({"kind": "eval", "src": ast.unparse(left)})
                steps.append({"kind": "eval", "src": ast.unparse(right)})
                checks.append((len(steps) - 2, Check("equal_steps", source, other_step=len(steps) - 1,
                                                     negate=negate)))
        elif test is not None:
            steps.append({"kind": "eval", "src": f"True if ({ast.unparse(test)}) else False"})
            checks.append((len(steps) - 1, Check("true", source)))
        else:
            steps.append({"kind": "exec", "src": source})
            checks.append((len(steps) - 1, Check("ok", source)))
    if not checks:
        raise VerifierError("code: the example's tests are empty")
    return steps, checks


def plan_io(example: dict) -> tuple[list[dict], list[tuple[int, Check]]]:
    """Call mode: one call per input; the outputs stay here."""
    entry, inputs, outputs = example.get("entry_point"), example.get("inputs"), example.get("outputs")
    if not isinstance(entry, str) or not entry.isidentifier():
        raise VerifierError(f"code: example field 'entry_point' must be a function name; got {entry!r}")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs) or not inputs:
        raise VerifierError("code: example fields 'inputs' and 'outputs' must be non-empty lists of equal length")
    steps, checks = [], []
    for i, (args, expected) in enumerate(zip(inputs, outputs)):
        if not isinstance(args, list):
            raise VerifierError(f"code: example field 'inputs'[{i}] must be a list of arguments")
        steps.append({"kind": "call", "entry": entry, "args": args})
        checks.append((i, Check("equal", f"{entry}(*{json.dumps(args)[:80]}) == {json.dumps(expected)[:80]}",
                                expected=_as_lists(expected), tuples_as_lists=True)))
    return steps, checks


def with_setup(program: str, example: dict) -> str:
    """The code the sandbox runs: the example's ``setup_code``, then the program (compiled on its own).

    >>> with_setup("x = 1\\n", {})
    'x = 1\\n'
    >>> print(with_setup("x = y\\n", {"setup_code": "y = 2"}))
    y = 2
    exec(compile('x = y\\n', '<program>', 'exec', dont_inherit=True))
    <BLANKLINE>
    """
    setup = example.get("setup_code")
    if setup is None:
        return program
    if not isinstance(setup, str):
        raise VerifierError(f"code: example field 'setup_code' must be a string; got {type(setup).__name__}")
    return f"{setup}\nexec(compile({program!r}, '<program>', 'exec', dont_inherit=True))\n"


def parse_reports(text: str, n_steps: int) -> tuple[str, list[dict]]:
    """Validate the report stream strictly. Returns (problem or "", per-step reports)."""
    lines = text.splitlines()
    try:
        records = [json.loads(line) for line in lines]
    except ValueError:
        return "report stream is not valid JSON lines", []
    if not records or records[0] != {"setup_ok": True}:
        return "no setup report", []
    if len(records) < 2:
        return "the program never finished running", []
    if "program_error" in records[1]:
        return f"program raised {str(records[1]['program_error'])[:300]}", []
    if records[1] != {"program_ok": True}:
        return "report stream tampered with (program line)", []
    steps = records[2:]
    for i, rec in enumerate(steps):
        if not isinstance(rec, dict) or rec.get("i") != i or not (set(rec) in ({"i", "value"}, {"i", "error"})):
            return f"report stream tampered with (entry {i})", []
    if len(steps) > n_steps:
        return "report stream tampered with (extra entries)", []
    return "", steps


@register_verifier("code")
class CodeVerifier:
    """1.0 when the program passes every test (``partial_credit=True``: the fraction passed).

    >>> v = CodeVerifier(processes=1)
    >>> v("```python\\ndef add(a, b):\\n    return a + b\\n```", {"tests": "assert add(1, 2) == 3"}).score
    1.0
    >>> v("```python\\ndef add(a, b):\\n    return a - b\\n```", {"entry_point": "add", "inputs": [[1, 2]],
    ...   "outputs": [3]}).details["first_failure"]
    'add(*[1, 2]) == 3: got -1'
    """

    # What a reward spec may set, with bounds (checked at submit time; base.Param). Which user the programs run
    # as and whether bubblewrap is used are the operator's (the worker's set-up), never a config's.
    PARAMS = {"timeout_s": Param(float, 0.1, 300), "memory_mb": Param(int, 64, 16_384),
              "max_output_kb": Param(int, 1, 65_536), "max_processes": Param(int, 1, 1024),
              "processes": Param(int, 1, 64, optional=True), "partial_credit": Param(bool),
              "cache_size": Param(int, 0, 1_000_000)}

    def __init__(self, *, timeout_s: float = 5.0, memory_mb: int = 1024, max_output_kb: int = 1024,
                 max_processes: int = 32, processes: int | None = None, partial_credit: bool = False,
                 user: str = SANDBOX_USER, use_bwrap: str = "auto", cache_size: int = 50_000):
        if not 0 < timeout_s <= 300:
            raise ValueError(f"code: timeout_s must lie in (0, 300]; got {timeout_s}")
        if memory_mb < 64:
            raise ValueError(f"code: memory_mb must be at least 64; got {memory_mb}")
        self.limits = {"timeout_s": float(timeout_s), "memory_mb": int(memory_mb),
                       "max_output_kb": int(max_output_kb), "max_processes": int(max_processes),
                       "max_report_kb": 4096}
        self.partial_credit = partial_credit
        self.sandbox = shared_sandbox(processes, user, use_bwrap, max_wall_s=timeout_s + 30.0)
        self.cache_size = cache_size
        self._cache: OrderedDict[str, VerifierResult] = OrderedDict()
        self._cache_lock = threading.Lock()

    def __call__(self, completion: str, example: dict) -> VerifierResult:
        result = self.batch([completion], [example])[0]
        if isinstance(result, VerifierError):
            raise result
        return result

    def _plan(self, example: dict):
        if "tests" in example:
            if not isinstance(example["tests"], str):
                raise VerifierError("code: example field 'tests' must be a string of Python asserts")
            return plan_tests(example["tests"])
        if "entry_point" in example:
            return plan_io(example)
        raise VerifierError("code: example needs 'tests' or 'entry_point'/'inputs'/'outputs'")

    def batch(self, completions: list[str], examples: list[dict]) -> list:
        out: list = [None] * len(completions)
        jobs: dict[str, list[int]] = {}
        plans: dict[str, tuple] = {}
        for i, (completion, example) in enumerate(zip(completions, examples)):
            try:
                steps, checks = self._plan(example)
                program = extract_program(completion)
                code = with_setup(program or "", example)
            except VerifierError as exc:
                out[i] = exc
                continue
            if program is None:
                out[i] = VerifierResult(0.0, {"reason": "no ```python block", "passed": 0, "total": len(checks)})
                continue
            key = hashlib.sha256(json.dumps([code, steps, repr(checks), self.limits, self.partial_credit],
                                            sort_keys=True, default=str).encode()).hexdigest()
            with self._cache_lock:
                hit = self._cache.get(key)
            if hit is not None:
                out[i] = VerifierResult(hit.score, dict(hit.details, cached=True))
                continue
            jobs.setdefault(key, []).append(i)
            plans[key] = (code, steps, checks)
        if jobs:
            keys = list(jobs)
            requests = [{"code": plans[k][0], "steps": plans[k][1], **self.limits} for k in keys]
            replies = self.sandbox.run_many(requests)
            layers = self.sandbox.layers
            for key, reply in zip(keys, replies):
                result = self._judge(reply, plans[key][1], plans[key][2], layers)
                if isinstance(result, VerifierResult) and self.cache_size:
                    with self._cache_lock:
                        self._cache[key] = result
                        if len(self._cache) > self.cache_size:
                            self._cache.popitem(last=False)
                for i in jobs[key]:
                    out[i] = result
        return out

    def _judge(self, reply, steps: list, checks: list, layers: dict):
        if isinstance(reply, (TaskTimeout, TaskFailed)):
            return VerifierError(f"code: sandbox failed: {reply}")
        details = {"layers": layers, "status": reply["status"], "exit_code": reply.get("exit_code"),
                   "signal": reply.get("signal"), "wall_s": reply["wall_s"], "total": len(checks), "passed": 0,
                   "output_tail": reply.get("output_tail", "")[-500:], "cached": False,
                   "killed_processes": reply.get("killed_processes", 0)}
        problem, reports = parse_reports(reply["reports"], len(steps))
        if problem == "no setup report" and reply["status"] == "exited":
            return VerifierError(f"code: sandbox set-up failed (exit code {reply.get('exit_code')}, "
                                 f"signal {reply.get('signal')})")
        failures = [] if not problem else [problem]
        passed = 0
        if not problem:
            for step_index, check in checks:
                why = self._check(check, step_index, reports)
                if why:
                    failures.append(f"{check.source[:200]}: {why}")
                else:
                    passed += 1
        if reply["status"] == "timeout":
            failures.insert(0, f"timed out after {self.limits['timeout_s']:g}s")
        elif reply["status"] == "report_overflow":
            failures.insert(0, "report stream too large")
        details["passed"] = passed
        details["first_failure"] = failures[0] if failures else None
        if self.partial_credit:
            score = passed / len(checks)
        else:
            score = 1.0 if passed == len(checks) and not failures else 0.0
        return VerifierResult(score, details)

    @staticmethod
    def _check(check: Check, step_index: int, reports: list[dict]) -> str:
        """Empty string when the check passes, else why it failed."""
        needed = [step_index] + ([check.other_step] if check.kind == "equal_steps" else [])
        for j in needed:
            if j >= len(reports):
                return "not reached (the program stopped before this test)"
            if "error" in reports[j]:
                return f"raised {reports[j]['error'][:200]}"
        try:
            value = from_wire(reports[step_index]["value"])
            other = from_wire(reports[check.other_step]["value"]) if check.kind == "equal_steps" else None
        except (ValueError, TypeError, KeyError):
            return "malformed value in report"
        if check.kind == "ok":
            return ""
        if check.kind == "true":
            return "" if value is True else "assertion false"
        if check.kind == "equal":
            got = _as_lists(value) if check.tuples_as_lists else value
            equal = got == check.expected
        else:
            equal = value == other
        if equal != check.negate:
            return ""
        return f"got {json.dumps(reports[step_index]['value'])[:200]}"
