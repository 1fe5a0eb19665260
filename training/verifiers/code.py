"""The ``code`` verifier: run the completion's last ```python block against the example's tests, sandboxed.

Two kinds of example:

* tests mode, ``{"tests": "assert f(1) == 2\\nassert f(2) == 4"}`` (with ``entry_point`` optional);
* call/IO mode, ``{"entry_point": "f", "inputs": [[1], [2]], "outputs": [2, 4]}``.

Either kind may carry ``setup_code`` (a string): the dataset's imports and helpers (e.g. a HumanEval prompt).

Where things run, and why. The program runs in one sandboxed process, the tests in a second one it cannot
reach (a separate address space and uid, not dumpable, behind the seccomp filter: no ptrace, no /proc/<pid>/mem,
no signal); the verdict is decided here, outside both. The program process never holds the tests: it is forked
from the sandbox's zygote, which never held a request, and reads only ``code``, ``setup`` and
``program_names`` of the request below (``sandbox_server.zygote``). The program process runs ``setup_code``
then the program, then answers the test process's requests over a pair of pipes, one JSON line each way:
"what is ``name``" (a function, or plain data) and "call ``name`` with these JSON arguments" (a JSON value
back, or the exception it raised).
Only the test process writes the report stream this verifier reads; nothing the program does (its stack,
its fds, files, exit code, signals, printed text) reaches that stream or the test process's memory. An
answer that is not plain data (an object whose ``__eq__``, ``<`` or ``abs`` always say yes) cannot cross: it
fails that check with its reason. Test code is member-controlled (a dataset's), so it is sandboxed too.

In the test process the tests run in their own namespace: ``setup_code`` first (its helpers are the
dataset's, not the program's: HumanEval/38's ``encode_cyclic`` stays the prompt's), then the names the
tests use that neither they, the set-up nor the builtins define are looked up in the program process (a
module it imported is the test process's own import of that module).
Builtins come first, so a program's ``abs = ...`` never reaches the tests; ``entry_point`` and the set-up's
stub functions (a body of only a docstring, ``pass`` or ``...``, which the program is to write) are always
the program's. Values cross in a tagged JSON (``sandbox_server.to_wire``): tuples, sets, frozensets,
non-string keys, big ints and non-finite floats come back as they left, so ``assert f() == (1, 2)`` and
``isinstance(f(), tuple)`` mean what they say; exact builtin types only. Arguments are copies: a test that
checks how the program mutated its argument in place cannot pass. The program's exceptions are re-raised in
the test process under their builtin class (``except ValueError`` in a test works); a broken channel is a
``ProgramFault``, which ``except Exception`` never catches.

Which statements are checks: an assert, or any other statement that is not an assignment, import or
definition, that uses a name the program provides (or a name the tests computed from one). Other
statements (``import math``, ``x = [1, 2]``, ``assert True``) are set-up: they run, they are not counted,
and one that fails fails the completion. A check that names the program itself must also reach it (the test
process reports, per step, whether the program answered anything): ``assert True or f(1)`` or ``assert
helper is not None`` pass for no program. So a program that defines nothing passes no check. Every top-level
``assert A == <literal>`` reports A's value and is compared here with the literal kept here; ``assert A ==
B`` reports both sides; other asserts report their truth value (evaluated in the test process on plain
data). In IO mode only the inputs go in.

Memory: all of the program's counts towards ``memory_mb``: the files a run writes live in the sandbox's
private /tmp, a tmpfs of ``memory_mb // 4`` MB (bubblewrap's ``--size``; a run that fills it fails with
"/tmp full"), and the program process's address space gets the rest (RLIMIT_AS). The test process has an
address space of ``memory_mb`` of its own. Without bubblewrap there is no private /tmp: files are bounded
only one by one (RLIMIT_FSIZE, ``max_output_kb``) and the address space is the whole ``memory_mb``. All of a completion's tests run in one execution; results are cached by the hash of (the code
run, tests, limits).
"""
from __future__ import annotations

import ast
import builtins
import functools
import hashlib
import json
import math
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from training.verifiers.base import Param, VerifierError, VerifierResult, register_verifier
from training.verifiers.sandbox import SANDBOX_USER, shared_sandbox
from training.verifiers.sandbox_server import to_wire, from_wire
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


def _as_lists(value):
    """JSON has no tuples: in IO mode a returned tuple is compared as a list."""
    if isinstance(value, (list, tuple)):
        return [_as_lists(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_lists(v) for k, v in value.items()}
    return value


@dataclass
class Check:
    """How the trusted side judges the report(s) of a test: ``kind`` is ok | true | equal | equal_steps, or
    setup (a statement that runs but is no check: it uses nothing of the program's)."""

    kind: str
    source: str
    expected: object = None   # equal: the expected Python value (never sent to the sandbox)
    other_step: int = -1      # equal_steps: the step holding the right-hand side
    negate: bool = False      # for ``!=``
    tuples_as_lists: bool = False  # IO mode: JSON outputs have no tuples
    needs_reach: bool = True  # it names the program (or a test helper that does): it must reach it to pass


def _literal(node: ast.AST):
    """(True, value) when ``node`` is a plain-data literal; (False, None) otherwise."""
    try:
        value = ast.literal_eval(node)
        to_wire(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None
    return True, value


def _json_faithful(value, depth: int = 0) -> bool:
    """Whether ``value`` comes back from a JSON round trip as itself (no tuple, set, bytes, int key, NaN)."""
    if value is None or type(value) in (bool, int, str):
        return True
    if type(value) is float:
        return math.isfinite(value)
    if depth > 20:
        return False
    if type(value) is list:
        return all(_json_faithful(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _json_faithful(v, depth + 1) for k, v in value.items())
    return False


def _call_shape(node: ast.AST, from_program) -> dict:
    """``{"call": [name, args]}`` when ``node`` is a call of a name the program provides with literal
    positional arguments only, each plain JSON data (``f(2, 'a', [1])``): the test process may send a run of
    such steps to the program at once, each answered in turn, as if it had evaluated them one after the other
    (it does, unless the name is the tests' own when the step comes). ``{}`` otherwise."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and from_program(node.func.id)
            and not node.keywords):
        return {}
    args = []
    for arg in node.args:
        is_literal, value = _literal(arg) if not isinstance(arg, ast.Starred) else (False, None)
        if not is_literal or not _json_faithful(value):
            return {}
        args.append(value)
    return {"call": [node.func.id, args]}


_DEFINITIONS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Import, ast.ImportFrom, ast.FunctionDef,
                ast.AsyncFunctionDef, ast.ClassDef, ast.Delete, ast.Pass, ast.Global, ast.Nonlocal)


def _bound_names(node: ast.AST) -> set[str]:
    """Every name ``node`` binds anywhere: assignment targets, imports, definitions, parameters, handlers."""
    names = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, ast.alias):
            names.add(n.asname or n.name.split(".")[0])
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
        elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            names.add(n.name)
    return names


def _loaded_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def setup_stubs(setup_code: str | None) -> list[str]:
    """The set-up's top-level functions whose body is only a docstring, ``pass`` or ``...``: signatures the
    program is to implement (a HumanEval prompt), so the tests reach the program's, never the stub.

    >>> setup_stubs('def f(x):\\n    "Doc."\\ndef g(x):\\n    return x\\n')
    ['f']
    """
    if not setup_code:
        return []
    try:
        tree = ast.parse(setup_code)
    except SyntaxError as exc:
        raise VerifierError(f"code: the example's setup_code does not parse: {exc}") from None
    return [stmt.name for stmt in tree.body if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
            and all(isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                                and (isinstance(s.value.value, str) or s.value.value is ...))
                    for s in stmt.body)]


def plan_tests(tests: str, setup_code: str | None = None,
               entry_point: str | None = None) -> tuple[list[dict], list[tuple[int, Check]]]:
    """Split test source into test-process steps and trusted checks.

    A statement is a check when it is no assignment, import or definition and uses a name the program
    provides: ``entry_point``, a set-up stub, a name nothing else defines (not the tests, the set-up, the
    builtins), or a name the tests bound from one of those. The rest is set-up (kind ``setup``).

    >>> steps, checks = plan_tests("assert f(2) == 4\\nassert g()\\nassert True")
    >>> steps
    [{'kind': 'eval', 'src': 'f(2)', 'call': ['f', [2]]}, {'kind': 'eval', 'src': 'True if (g()) else False'}, {'kind': 'exec', 'src': 'assert True'}]
    >>> [(i, c.kind, c.expected) for i, c in checks]
    [(0, 'equal', 4), (1, 'true', None), (2, 'setup', None)]
    """
    try:
        tree = ast.parse(tests)
    except SyntaxError as exc:
        raise VerifierError(f"code: the example's tests do not parse: {exc}") from None
    stubs = set(setup_stubs(setup_code))
    setup_bound = _bound_names(ast.parse(setup_code)) - stubs if setup_code else set()
    tests_bound = _bound_names(tree)
    forced = stubs | ({entry_point} if entry_point else set())

    def from_program(name: str) -> bool:
        return name in forced or not (name in tests_bound or name in setup_bound or hasattr(builtins, name))

    # Names the tests compute from the program's (``x = f(1)``, a helper calling ``f``): a fixpoint over
    # the statements, since a helper may be defined before what it uses.
    dependent: set[str] = set()
    dependent_defs: set[str] = set()  # test functions and classes that use the program: calling one reaches it
    changed = True
    while changed:
        changed = False
        for stmt in tree.body:
            if any(from_program(n) or n in dependent for n in _loaded_names(stmt)):
                new = _bound_names(stmt) - dependent
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    dependent_defs.add(stmt.name)
                if new:
                    dependent |= new
                    changed = True

    steps: list[dict] = []
    checks: list[tuple[int, Check]] = []
    for stmt in tree.body:
        source = ast.unparse(stmt)
        loaded = _loaded_names(stmt)
        uses_program = any(from_program(n) or n in dependent for n in loaded)
        if isinstance(stmt, _DEFINITIONS) or not uses_program:
            steps.append({"kind": "exec", "src": source})
            checks.append((len(steps) - 1, Check("setup", source)))
            continue
        # A check on values the tests computed before (``x = f(1)`` then ``assert x == 2``) reached the program
        # in that earlier statement; one that names the program itself must reach it now (``assert True or
        # f(1)`` checks nothing of it).
        reach = any(from_program(n) or n in dependent_defs for n in loaded)
        test = stmt.test if isinstance(stmt, ast.Assert) else None
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq)):
            negate = isinstance(test.ops[0], ast.NotEq)
            left, right = test.left, test.comparators[0]
            right_is_literal, right_value = _literal(right)
            left_is_literal, left_value = _literal(left)
            if right_is_literal or left_is_literal:
                computed, expected = (left, right_value) if right_is_literal else (right, left_value)
                steps.append({"kind": "eval", "src": ast.unparse(computed), **_call_shape(computed, from_program)})
                checks.append((len(steps) - 1, Check("equal", source, expected=expected, negate=negate,
                                                     needs_reach=reach)))
            else:
                steps.append({"kind": "eval", "src": ast.unparse(left)})
                steps.append({"kind": "eval", "src": ast.unparse(right)})
                checks.append((len(steps) - 2, Check("equal_steps", source, other_step=len(steps) - 1,
                                                     negate=negate, needs_reach=reach)))
        elif test is not None:
            steps.append({"kind": "eval", "src": f"True if ({ast.unparse(test)}) else False"})
            checks.append((len(steps) - 1, Check("true", source, needs_reach=reach)))
        else:
            steps.append({"kind": "exec", "src": source})
            checks.append((len(steps) - 1, Check("ok", source, needs_reach=reach)))
    if not any(check.kind != "setup" for _, check in checks):
        raise VerifierError("code: the example's tests check nothing of the program's (no statement uses a "
                            "name the program defines)")
    return steps, checks


@functools.lru_cache(maxsize=4096)
def _planned_tests(tests: str, setup_code: str | None, entry_point: str | None) -> tuple[list, list, list]:
    """:func:`plan_tests` and :func:`setup_stubs`, once per example: a group's completions share it (read only)."""
    steps, checks = plan_tests(tests, setup_code, entry_point)
    return steps, checks, setup_stubs(setup_code)


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
    if isinstance(records[1], dict) and set(records[1]) == {"program_error"}:
        return str(records[1]["program_error"])[:400], []
    if isinstance(records[1], dict) and set(records[1]) == {"setup_error"}:
        return f"the example's setup_code raised {str(records[1]['setup_error'])[:300]} in the test process", []
    if records[1] != {"program_ok": True}:
        return "report stream malformed (program line)", []
    steps = records[2:]
    for i, rec in enumerate(steps):
        if not isinstance(rec, dict) or rec.get("i") != i or set(rec) not in (
                {"i", "value", "used"}, {"i", "error", "used"}) or not isinstance(rec["used"], bool):
            return f"report stream malformed (entry {i})", []
    if len(steps) > n_steps:
        return "report stream malformed (extra entries)", []
    return "", steps


# max_processes: the processes (and threads) a run's program may have; each may spin for the whole timeout_s,
# and webapp.runs.capacity counts them against the worker's cores. Low: tests need a few, not a fork farm.
MAX_PROCESSES = 64


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
              "max_output_kb": Param(int, 1, 65_536), "max_processes": Param(int, 1, MAX_PROCESSES),
              "processes": Param(int, 1, 64, optional=True), "partial_credit": Param(bool),
              "cache_size": Param(int, 0, 1_000_000)}

    def __init__(self, *, timeout_s: float = 5.0, memory_mb: int = 1024, max_output_kb: int = 1024,
                 max_processes: int = 32, processes: int | None = None, partial_credit: bool = False,
                 user: str = SANDBOX_USER, use_bwrap: str = "auto", cache_size: int = 50_000):
        if not 0 < timeout_s <= 300:
            raise ValueError(f"code: timeout_s must lie in (0, 300]; got {timeout_s}")
        if memory_mb < 64:
            raise ValueError(f"code: memory_mb must be at least 64; got {memory_mb}")
        if not 1 <= max_processes <= MAX_PROCESSES:
            raise ValueError(f"code: max_processes must lie in [1, {MAX_PROCESSES}]; got {max_processes}")
        self.limits = {"timeout_s": float(timeout_s), "memory_mb": int(memory_mb),
                       "max_output_kb": int(max_output_kb), "max_processes": int(max_processes),
                       "max_report_kb": 4096}
        self.partial_credit = partial_credit
        # The files a run writes count too: the sandbox's private /tmp is a tmpfs of a quarter of memory_mb.
        self.tmp_mb = int(memory_mb) // 4
        self.sandbox = shared_sandbox(processes, user, use_bwrap, max_wall_s=timeout_s + 30.0, tmp_mb=self.tmp_mb)
        self.cache_size = cache_size
        self._cache: OrderedDict[str, VerifierResult] = OrderedDict()
        self._cache_lock = threading.Lock()

    def __call__(self, completion: str, example: dict) -> VerifierResult:
        result = self.batch([completion], [example])[0]
        if isinstance(result, VerifierError):
            raise result
        return result

    def _plan(self, example: dict) -> tuple[list, list, dict]:
        """(steps, checks, what the test process needs besides the steps: set-up, the program's names)."""
        setup = example.get("setup_code")
        if setup is not None and not isinstance(setup, str):
            raise VerifierError(f"code: example field 'setup_code' must be a string; got {type(setup).__name__}")
        if "tests" in example:
            if not isinstance(example["tests"], str):
                raise VerifierError("code: example field 'tests' must be a string of Python asserts")
            entry = example.get("entry_point")
            if entry is not None and not (isinstance(entry, str) and entry.isidentifier()):
                raise VerifierError(f"code: example field 'entry_point' must be a function name; got {entry!r}")
            steps, checks, stubs = _planned_tests(example["tests"], setup, entry)
            return steps, checks, {"setup": setup or "", "entry_point": entry,
                                   "program_names": stubs + ([entry] if entry else [])}
        if "entry_point" in example:
            steps, checks = plan_io(example)
            entry = example["entry_point"]
            return steps, checks, {"setup": setup or "", "entry_point": None,
                                   "program_names": setup_stubs(setup) + [entry]}
        raise VerifierError("code: example needs 'tests' or 'entry_point'/'inputs'/'outputs'")

    def batch(self, completions: list[str], examples: list[dict]) -> list:
        out: list = [None] * len(completions)
        jobs: dict[str, list[int]] = {}
        plans: dict[str, tuple] = {}
        for i, (completion, example) in enumerate(zip(completions, examples)):
            try:
                steps, checks, tests_side = self._plan(example)
                program = extract_program(completion)
                code = program or ""
            except VerifierError as exc:
                out[i] = exc
                continue
            if program is None:
                total = sum(check.kind != "setup" for _, check in checks)
                out[i] = VerifierResult(0.0, {"reason": "no ```python block", "passed": 0, "total": total})
                continue
            key = hashlib.sha256(json.dumps([code, steps, tests_side, repr(checks), self.limits,
                                             self.partial_credit, self.tmp_mb],
                                            sort_keys=True, default=str).encode()).hexdigest()
            with self._cache_lock:
                hit = self._cache.get(key)
            if hit is not None:
                out[i] = VerifierResult(hit.score, dict(hit.details, cached=True))
                continue
            jobs.setdefault(key, []).append(i)
            plans[key] = (code, steps, checks, tests_side)
        if jobs:
            keys = list(jobs)
            requests = [{"code": plans[k][0], "steps": plans[k][1], **plans[k][3], **self.limits} for k in keys]
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
        counted = [(i, check) for i, check in checks if check.kind != "setup"]
        tests_exit = reply.get("tests_exit") or {}
        details = {"layers": layers, "status": reply["status"], "exit_code": reply.get("exit_code"),
                   "signal": reply.get("signal"), "wall_s": reply["wall_s"], "total": len(counted), "passed": 0,
                   "output_tail": reply.get("output_tail", "")[-500:], "cached": False,
                   "killed_processes": reply.get("killed_processes", 0),
                   # the most the program's process tree, and the tests', held together (a memory cgroup's peak)
                   "memory_peak_mb": reply.get("memory_peak_mb")}
        problem, reports = parse_reports(reply["reports"], len(steps))
        if problem == "no setup report" and tests_exit.get("exit_code") == 120:
            return VerifierError("code: sandbox set-up failed (the test process could not drop its privileges)")
        if problem == "no setup report":
            problem = f"the test process ended before it reported (signal {tests_exit.get('signal')})"
        elif problem == "the program never finished running" and tests_exit.get("signal"):
            problem = (f"the test process was killed (signal {tests_exit['signal']}) before the program finished "
                       f"running")
        failures = [] if not problem else [problem]
        passed = 0
        if not problem:
            for step_index, check in checks:
                why = self._check(check, step_index, reports)
                if check.kind == "setup":
                    if why and not why.startswith("not reached"):
                        failures.append(f"set-up statement {check.source[:200]}: {why}")
                elif why:
                    failures.append(f"{check.source[:200]}: {why}")
                else:
                    passed += 1
        if reply.get("tmp_full"):
            failures.insert(0, f"/tmp full: the sandbox's tmpfs is limited to {reply.get('tmp_mb')} MB")
            passed = 0
        elif reply["status"] == "timeout":
            failures.insert(0, f"timed out after {self.limits['timeout_s']:g}s")
        elif reply["status"] == "report_overflow":
            failures.insert(0, "report stream too large")
        details["passed"] = passed
        details["first_failure"] = failures[0] if failures else None
        if self.partial_credit:
            score = passed / len(counted)
        else:
            score = 1.0 if passed == len(counted) and not failures else 0.0
        return VerifierResult(score, details)

    @staticmethod
    def _check(check: Check, step_index: int, reports: list[dict]) -> str:
        """Empty string when the check passes, else why it failed."""
        needed = [step_index] + ([check.other_step] if check.kind == "equal_steps" else [])
        for j in needed:
            if j >= len(reports):
                return "not reached (the run stopped before this test)"
            if "error" in reports[j]:
                return f"raised {reports[j]['error'][:200]}"
        try:
            value = from_wire(reports[step_index]["value"])
            other = from_wire(reports[check.other_step]["value"]) if check.kind == "equal_steps" else None
        except (ValueError, TypeError, KeyError, RecursionError):
            return "malformed value in report"
        if check.kind == "setup":
            return ""
        if check.needs_reach and not any(reports[j]["used"] for j in needed):
            return "the test never reached the program"
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
