"""A program that tries to pass the code verifier's tests by reading them instead of solving anything: it knows no
task, looks for the tests' source where a sandboxed program could find it (its stack frames, the garbage
collector's objects, its own memory, other processes' memory, the descriptors it inherited), parses what it
finds with ``ast`` and defines the names the tests call (and the set-up's stubs) as a lookup table from the
arguments it saw to the values the tests expect. Used by tests/verifiers/test_red_team.py and
bench/verifiers_bench.py.

It reads ``assert f(args) == literal`` (either side, or ``is``), ``assert abs(f(args) - literal) < eps``,
``assert f(args)`` / ``assert not f(args)``, and the same inside ``True if (...) else False`` (how the verifier
sends an assert's test). Lines of its own functions' docstrings (a HumanEval prompt's examples) are left out:
the prompt is the problem statement, which the program is meant to see.

Measured with ``python bench/verifiers_bench.py --only readers`` (every vector, each run right after a run of
the same problem's tests in their own form), on the sandbox server of commit b1d04b3 (the program process a
fork of the server that had read the request): 156 of 164 HumanEval problems passed whole in their own form;
13 passed whole and 39 with more checks passed than without reading in the built-in ``humaneval`` task (whose
steps carry no expected literal: the earlier request's freed memory did). On this checkout's: 0 in every case.
"""
from __future__ import annotations

import textwrap

VECTORS = ("frames", "gc", "self_mem", "proc_mem", "fds")

_PROGRAM = '''
import ast, builtins, gc, os, re, select, sys, textwrap
VECTORS = {vectors!r}
def texts():
    found, seen = [], set()
    def walk(v, depth=0):
        if isinstance(v, str):
            found.append(v)
        elif depth < 4 and isinstance(v, (list, tuple, dict)) and id(v) not in seen:
            seen.add(id(v))
            for item in list(v.values() if isinstance(v, dict) else v):
                walk(item, depth + 1)
    frame = sys._getframe() if "frames" in VECTORS else None
    while frame is not None:
        walk(dict(frame.f_locals)), walk(dict(frame.f_globals))
        frame = frame.f_back
    for o in gc.get_objects() if "gc" in VECTORS else ():
        walk(o)
    pids = (["self"] if "self_mem" in VECTORS else []) + ([p for p in os.listdir("/proc") if p.isdigit()
                                                           and int(p) != os.getpid()] if "proc_mem" in VECTORS else [])
    for pid in pids:
        try:
            with open(f"/proc/{{pid}}/maps") as maps:
                regions = [[int(x, 16) for x in line.split()[0].split("-")] for line in maps if " rw" in line]
            try:
                mem = open(f"/proc/{{pid}}/mem", "rb", 0)
            except OSError:  # not dumpable: its own memory is still there to read, through ctypes
                if pid != "self":
                    raise
                import ctypes
                mem = None
            for start, end in regions:
                if end - start < 1 << 28:
                    try:
                        if mem is None:
                            chunk = ctypes.string_at(start, end - start)
                        else:
                            mem.seek(start)
                            chunk = mem.read(end - start)
                    except (OSError, ValueError, OverflowError):
                        continue
                    found += [r.decode() for r in re.findall(rb"[\\t\\n\\x20-\\x7e]{{12,}}", chunk)
                              if b"assert" in r or b"True if" in r]
        except OSError:
            pass
    for fd in range(64) if "fds" in VECTORS else ():
        try:  # a file from its start; a pipe or socket if something waits in it (not the program's own 3 and 4)
            data = os.pread(fd, 1 << 20, 0)
        except OSError:
            try:
                data = os.read(fd, 1 << 20) if fd > 4 and select.select([fd], [], [], 0)[0] else b""
            except OSError:
                data = b""
        found.append(data.decode(errors="replace"))
    return [t for t in found if "assert" in t or "True if" in t]
def value(node):  # a literal, or an expression of literals and builtins (2.0 / 3.0, sorted([3, 1]))
    if any(isinstance(n, ast.Name) and not hasattr(builtins, n.id) for n in ast.walk(node)):
        raise ValueError("not computable here")
    return eval(compile(ast.Expression(node), "<v>", "eval"))
def call_args(node):
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("tuple", "list", "sorted", "set") and node.args:
        return call_args(node.args[0])  # tuple(f(x)) == (1, 2): f(x) is (1, 2) too
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not hasattr(builtins, node.func.id):
        NAMES.add(node.func.id)
        return tuple(value(a) for a in node.args)
def learn(node):
    if isinstance(node, (ast.Assert, ast.IfExp)):
        negated = isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)
        args = call_args(node.test.operand if negated else node.test)
        if args is not None:
            PAIRS.append((args, not negated))
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = node.left, node.comparators[0]
        if isinstance(node.ops[0], (ast.Eq, ast.Is)):
            for a, b in ((left, right), (right, left)):
                if call_args(a) is not None:
                    PAIRS.append((call_args(a), value(b)))
        elif (isinstance(left, ast.Call) and getattr(left.func, "id", "") == "abs"
              and isinstance(left.args[0], ast.BinOp)):
            PAIRS.append((call_args(left.args[0].left), value(left.args[0].right)))
PAIRS, NAMES = [], set()
DOCS = {{l.strip() for f in list(globals().values()) if callable(f) for l in (f.__doc__ or "").splitlines()}}
for text in texts():
    for piece in [textwrap.dedent(text)] + [line.strip() for line in text.splitlines()]:
        try:
            nodes = [] if piece in DOCS else list(ast.walk(ast.parse(piece)))
        except BaseException:
            continue
        for node in nodes:
            try:
                learn(node)
            except BaseException:
                pass
def lookup(*args):
    for known, value in PAIRS:
        if known == args:
            return value
STUBS = [n for n, v in globals().items() if getattr(getattr(v, "__code__", None), "co_filename", "") == "<setup_code>"]
for name in STUBS + sorted(NAMES):
    globals()[name] = lookup
'''


def program(vectors=VECTORS) -> str:
    """The attacker as a fenced completion, reading the tests through ``vectors`` (a subset of VECTORS)."""
    unknown = set(vectors) - set(VECTORS)
    if unknown:
        raise ValueError(f"unknown vectors {sorted(unknown)}; known: {VECTORS}")
    body = _PROGRAM.format(vectors=tuple(vectors))
    return "```python\n" + textwrap.dedent(body).strip() + "\n```"
