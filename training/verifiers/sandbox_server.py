"""The sandbox fork server: runs untrusted Python programs against tests, one run at a time, and reports
raw outcomes.

Standard library only: it runs as ``python -I sandbox_server.py UID GID MODE [TMP_MB]`` with a clean
environment, inside bubblewrap's namespaces when available (MODE ``bwrap``, with a private /tmp of TMP_MB) or
directly on the host (MODE ``host``). It is trusted (root, or the caller's uid); everything it forks is not.

Protocol: JSON lines. Start-up: the server prints ``{"ready": true, "layers": {...}}``. Then for each line
read on stdin, ``{"id", "code", "setup", "program_names", "entry_point", "steps", "timeout_s", "memory_mb",
"max_output_kb", "max_processes", "max_report_kb"}``, it prints one line ``{"id", "status", "reports",
"output_tail", "wall_s", "tmp_full", ...}``. ``steps`` carry only what the test process must *compute* (a
statement to run, an expression to evaluate, a function to call with arguments): expected values of
``assert x == <literal>`` never enter a sandbox, and the trusted host compares.

Per run: a fresh directory owned by the sandbox uid and two forked children, each in its own session and
process group, with rlimits (CPU, address space, processes, file size, open files, core 0), only its own fds,
groups dropped, uid/gid switched, not dumpable, no_new_privs, a seccomp filter (no network sockets, ptrace,
process_vm_*, namespaces, mount, exec, io_uring, bpf, ...) and a clean environment:

* the program process runs the set-up code and the program, then answers ``get``/``call`` requests from the
  test process, one JSON line each way on a pipe pair (fds 3 and 4): all it ever gives is JSON;
* the test process runs the set-up code and the steps, reaching the program only through that pipe pair and
  decoding its answers as plain data (:func:`from_wire`), and writes one JSON report per step (its value or
  error, and whether it reached the program) on the only pipe to the server (fd 3), which the program
  process has no way to reach.

The server reads the reports until the test process exits or the wall-clock timeout, then kills both
groups and every process of the sandbox uid, reaps orphans (it is a child subreaper), notes whether the
run filled /tmp, and deletes the run directory (and, in host mode, anything the uid left in /tmp and
/dev/shm).
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import resource
import select
import shutil
import signal
import struct
import sys
import time

# ---- seccomp (classic BPF, assembled by hand) ------------------------------------------------------

_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_SECCOMP = 1, 4, 22
_PR_SET_CHILD_SUBREAPER, _PR_SET_NO_NEW_PRIVS = 36, 38
_SECCOMP_MODE_FILTER = 2
_RET_KILL_PROCESS, _RET_ERRNO, _RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_AF_UNIX = 1
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME
_CLONE_NEW_MASK = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80

# Syscall numbers per architecture (Linux uapi unistd tables).
_ARCHES = {
    "x86_64": {
        "audit_arch": 0xC000003E, "x32_bit": 0x40000000,
        "socket": (41, 53),  # socket, socketpair: allowed for AF_UNIX only
        "clone": 56, "clone3": 435,
        "deny": {
            "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "unshare": 272, "setns": 308,
            "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "keyctl": 250, "add_key": 248,
            "request_key": 249, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "kexec_load": 246,
            "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
            "reboot": 169, "swapon": 167, "swapoff": 168, "acct": 163, "iopl": 172, "ioperm": 173,
            "execve": 59, "execveat": 322, "open_by_handle_at": 304, "name_to_handle_at": 303,
            "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
            "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
            "mount_setattr": 442,
        },
    },
    "aarch64": {
        "audit_arch": 0xC00000B7, "x32_bit": None,
        "socket": (198, 199),
        "clone": 220, "clone3": 435,
        "deny": {
            "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "unshare": 97, "setns": 268,
            "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "keyctl": 219, "add_key": 217,
            "request_key": 218, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282, "kexec_load": 104,
            "kexec_file_load": 294, "init_module": 105, "finit_module": 273, "delete_module": 106,
            "reboot": 142, "swapon": 224, "swapoff": 225, "acct": 89, "execve": 221, "execveat": 281,
            "open_by_handle_at": 265, "name_to_handle_at": 264, "io_uring_setup": 425, "io_uring_enter": 426,
            "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
            "fsmount": 432, "fspick": 433, "mount_setattr": 442,
        },
    },
}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def build_seccomp_filter(machine: str) -> bytes:
    """The filter program for ``machine`` (``os.uname().machine``), as packed ``struct sock_filter``s.

    Denied calls fail with an errno (EACCES for sockets, ENOSYS for clone3 so libc falls back to clone,
    EPERM otherwise) rather than killing, so the program sees an ordinary error; a foreign ABI (i386 or
    x32 calls on x86_64) kills the process outright.
    """
    arch = _ARCHES[machine]
    prog = [_insn(_LD_W_ABS, 0, 0, 4),                                   # A = seccomp_data.arch
            _insn(_JEQ_K, 1, 0, arch["audit_arch"]),
            _insn(_RET_K, 0, 0, _RET_KILL_PROCESS),
            _insn(_LD_W_ABS, 0, 0, 0)]                                   # A = seccomp_data.nr
    if arch["x32_bit"]:
        prog += [_insn(_JGE_K, 0, 1, arch["x32_bit"]), _insn(_RET_K, 0, 0, _RET_KILL_PROCESS)]
    for nr in arch["socket"]:
        # if nr matches: A = low 32 bits of args[0] (the domain); AF_UNIX is allowed, anything else EACCES
        prog += [_insn(_JEQ_K, 0, 4, nr), _insn(_LD_W_ABS, 0, 0, 16), _insn(_JEQ_K, 0, 1, _AF_UNIX),
                 _insn(_RET_K, 0, 0, _RET_ALLOW), _insn(_RET_K, 0, 0, _RET_ERRNO | errno.EACCES)]
    prog += [_insn(_JEQ_K, 0, 4, arch["clone"]), _insn(_LD_W_ABS, 0, 0, 16),   # clone flags
             _insn(_JSET_K, 0, 1, _CLONE_NEW_MASK), _insn(_RET_K, 0, 0, _RET_ERRNO | errno.EPERM),
             _insn(_RET_K, 0, 0, _RET_ALLOW)]
    prog += [_insn(_JEQ_K, 0, 1, arch["clone3"]), _insn(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    for nr in sorted(set(arch["deny"].values())):
        prog += [_insn(_JEQ_K, 0, 1, nr), _insn(_RET_K, 0, 0, _RET_ERRNO | errno.EPERM)]
    prog.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def _prctl(option: int, arg: int = 0, arg3: int = 0) -> None:
    if _libc.prctl(option, arg, arg3, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}) failed: {os.strerror(err)}")


class SeccompFilter:
    """A filter program made ready once (the server forks two children a run: each only attaches it)."""

    def __init__(self, program: bytes):
        self._buf = ctypes.create_string_buffer(program, len(program))
        self._fprog = _SockFprog(len(program) // 8, ctypes.addressof(self._buf))
        self.address = ctypes.addressof(self._fprog)

    def install(self) -> None:
        """no_new_privs, then the filter. Irreversible for this process and its descendants."""
        _prctl(_PR_SET_NO_NEW_PRIVS, 1)
        _prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, self.address)


def install_seccomp(program: bytes) -> None:
    """no_new_privs, then the filter. Irreversible for this process and its descendants."""
    SeccompFilter(program).install()


# ---- values that cross between the sandboxed processes -----------------------------------------------

def _to_wire(value, depth=0):
    """Plain data only, exact types (a subclass could lie in __eq__ or __repr__); tuples, sets, frozensets,
    dicts, big ints and non-finite floats tagged, so that they come back as they left (a set's items sorted)."""
    if depth > 100:
        raise ValueError("value nested too deeply")
    t = type(value)
    if value is None or t is bool or t is str:
        return value
    if t is int:
        return value if -(2 ** 63) <= value < 2 ** 63 else {"$bigint": str(value)}
    if t is float:
        return value if value == value and value not in (float("inf"), float("-inf")) else {"$float": repr(value)}
    if t is list:
        return [_to_wire(v, depth + 1) for v in value]
    if t is tuple:
        return {"$tuple": [_to_wire(v, depth + 1) for v in value]}
    if t is set or t is frozenset:
        items = sorted((_to_wire(v, depth + 1) for v in value), key=lambda w: json.dumps(w, sort_keys=True))
        return {"$set" if t is set else "$frozenset": items}
    if t is dict:  # in insertion order: a program may depend on it (HumanEval/95 does)
        return {"$dict": [[_to_wire(k, depth + 1), _to_wire(v, depth + 1)] for k, v in value.items()]}
    raise TypeError(f"cannot send a value of type {t.__name__}: only plain JSON data crosses")


def from_wire(value, depth=0, hashable=False):
    """Inverse of :func:`_to_wire` for data read from an untrusted writer: exact builtin types only; anything
    else (an unknown tag, an unhashable key) raises ValueError or TypeError. A set inside a set or as a key
    comes back as a frozenset, as it must have been."""
    if depth > 100:
        raise ValueError("value nested too deeply")
    t = type(value)
    if value is None or t in (bool, str, int, float):
        return value
    if t is list and not hashable:
        return [from_wire(v, depth + 1) for v in value]
    if t is dict and len(value) == 1:
        (tag, body), = value.items()
        if tag == "$tuple" and type(body) is list:
            return tuple(from_wire(v, depth + 1, hashable) for v in body)
        if tag in ("$set", "$frozenset") and type(body) is list:
            items = [from_wire(v, depth + 1, True) for v in body]
            return frozenset(items) if tag == "$frozenset" or hashable else set(items)
        if tag == "$dict" and type(body) is list and not hashable:
            out = {}
            for pair in body:
                if type(pair) is not list or len(pair) != 2:
                    raise ValueError("malformed dict entry")
                out[from_wire(pair[0], depth + 1, True)] = from_wire(pair[1], depth + 1)
            return out
        if tag == "$bigint" and type(body) is str:
            return int(body)
        if tag == "$float" and body in ("nan", "inf", "-inf"):
            return float(body)
    raise ValueError(f"not a plain JSON value: {str(value)[:80]}")


def _describe(exc: BaseException) -> str:
    try:  # the program controls the exception's class and __str__
        return f"{type(exc).__name__}: {str(exc)[:300]}"
    except BaseException:
        return "<unprintable exception>"


def _finish(exit_now=os._exit, streams=None) -> None:
    for stream in streams or (sys.stdout, sys.stderr):  # the output tail is for people reading details
        try:
            stream.flush()
        except BaseException:
            pass
    exit_now(0)


def _read_line(fd: int, buf: bytearray, cap: int) -> bytes | None:
    """One line from ``fd`` (buffered in ``buf``), None at end of stream; ValueError past ``cap`` bytes."""
    while True:
        end = buf.find(b"\n")
        if end >= 0:
            line = bytes(buf[:end])
            del buf[:end + 1]
            return line
        if len(buf) > cap:
            raise ValueError(f"a message longer than {cap // 1024} KB")
        chunk = os.read(fd, 65536)
        if not chunk:
            return None
        buf += chunk


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]


# ---- the program process: runs the model's program, then answers the test process --------------------

def _program_harness(req: dict, request_fd: int, reply_fd: int) -> None:
    """Run the set-up code and the program (compiled on its own), then serve ``get``/``call`` requests, one
    JSON line each way. A set-up stub the program did not redefine is no name of the program's.

    Everything here is the program's to tamper with (it shares the process): nothing it sends is trusted.
    """
    import builtins
    dumps, loads = json.dumps, json.loads

    def send(obj) -> None:
        _write_all(reply_fd, (dumps(obj) + "\n").encode())

    namespace = {"__name__": "__main__", "__builtins__": builtins}
    try:
        if req.get("setup"):
            exec(compile(req["setup"], "<setup_code>", "exec", dont_inherit=True), namespace)
        stubs = {name: namespace.get(name) for name in req.get("program_names", ())}
        exec(compile(req["code"], "<program>", "exec", dont_inherit=True), namespace)
    except BaseException as exc:  # SystemExit too: a program that exits before the tests fails them
        send({"program_error": _describe(exc)})
        _finish()
    for name, stub in stubs.items():
        if stub is not None and namespace.get(name) is stub:
            del namespace[name]
    send({"program_ok": True})
    buf = bytearray()
    while True:
        line = _read_line(request_fd, buf, 1 << 30)
        if line is None:  # the test process is done
            _finish()
        req = loads(line)
        n, name = req["n"], req["name"]
        if name not in namespace:
            send({"n": n, "missing": True})
            continue
        target = namespace[name]
        if req["op"] == "get" and type(target) is type(json) and type(getattr(target, "__name__", None)) is str:
            send({"n": n, "module": target.__name__})  # the tests import their own copy
            continue
        if req["op"] == "get" and not callable(target):
            try:
                send({"n": n, "value": _to_wire(target)})
            except BaseException as exc:
                send({"n": n, "unsendable": _describe(exc)})
            continue
        if req["op"] == "get":
            send({"n": n, "callable": True})
            continue
        try:
            value = target(*[from_wire(a) for a in req["args"]],
                           **{k: from_wire(v) for k, v in req["kwargs"].items()})
        except BaseException as exc:  # SystemExit and KeyboardInterrupt too: reported, not obeyed
            try:
                message = str(exc)[:400]
            except BaseException:
                message = "<unprintable exception>"
            send({"n": n, "error": message, "type": type(exc).__name__})
            continue
        try:
            send({"n": n, "value": _to_wire(value)})
        except BaseException as exc:
            send({"n": n, "unsendable": _describe(exc)})


# ---- the test process: runs the example's tests, reaching the program only through JSON ------------

class ProgramFault(BaseException):
    """The program process could not give a plain-data answer (it ended, sent something malformed or a value
    that is not plain data, or has no such name). A BaseException, so that a test's ``except Exception`` never takes it for an
    error the test expected."""


class ProgramError(Exception):
    """The program raised an exception of a class the tests cannot name (its own, or a non-builtin one)."""


def _exception_for(type_name: str, message: str) -> BaseException:
    """The program's exception re-raised in the test process: the builtin class of that name when it is an
    ``Exception`` (so ``except ValueError`` in a test works), never StopIteration (which would silently end
    an iteration in the tests), SystemExit or KeyboardInterrupt (those become a ProgramFault)."""
    import builtins
    cls = getattr(builtins, type_name, None) if type(type_name) is str else None
    if isinstance(cls, type) and issubclass(cls, BaseException) and not issubclass(cls, Exception):
        return ProgramFault(f"the program raised {type_name}: {message}")
    if isinstance(cls, type) and issubclass(cls, Exception) and not issubclass(
            cls, (StopIteration, StopAsyncIteration)):
        try:
            return cls(message)
        except BaseException:
            pass
    if type(type_name) is str and type_name.isidentifier() and len(type_name) <= 100:
        return type(type_name, (ProgramError,), {})(message)  # its name as the program called it, for reasons
    return ProgramError(message)


class _ProgramLink:
    """The test process's end of the two pipes to the program process."""

    def __init__(self, request_fd: int, reply_fd: int, cap: int):
        self.request_fd, self.reply_fd, self.cap = request_fd, reply_fd, cap
        self.buf = bytearray()
        self.count = 0
        self.broken = ""
        self.greeted: str | None = None  # "" once the program ran to its end, else why not; None: not read yet
        self.answers = 0  # the program's answers so far (a value, a function, a result or its exception)

    def _receive(self) -> dict:
        try:
            line = _read_line(self.reply_fd, self.buf, self.cap)
            if line is None:
                raise ProgramFault("the program process ended (it exited or was killed)")
            reply = json.loads(line)
            if type(reply) is not dict:
                raise ValueError("not an object")
            return reply
        except ProgramFault as exc:
            self.broken = str(exc)
            raise
        except BaseException as exc:  # ValueError, RecursionError, MemoryError: the program's doing
            self.broken = f"the program process sent a malformed message ({_describe(exc)[:120]})"
            raise ProgramFault(self.broken) from None

    def greeting(self) -> str:
        """"" once the program ran to its end, else why not (read once: the program's first line)."""
        if self.greeted is None:
            self.greeted = self._greeting()
        return self.greeted

    def _greeting(self) -> str:
        try:
            hello = self._receive()
        except ProgramFault as exc:
            return str(exc)
        if hello == {"program_ok": True}:
            return ""
        if set(hello) == {"program_error"} and type(hello["program_error"]) is str:
            self.broken = f"program raised {hello['program_error'][:300]}"
            return self.broken
        self.broken = "the program process sent a malformed greeting"
        return self.broken

    def ask(self, request: dict) -> dict:
        if self.greeting() or self.broken:  # (set-up code may ask before the steps do)
            raise ProgramFault(self.broken or self.greeting())
        self.count += 1
        request["n"] = self.count
        try:
            _write_all(self.request_fd, (json.dumps(request) + "\n").encode())
        except OSError:
            self.broken = "the program process ended (it exited or was killed)"
            raise ProgramFault(self.broken) from None
        reply = self._receive()
        if reply.get("n") != self.count:
            self.broken = "the program process answered out of turn"
            raise ProgramFault(self.broken)
        return reply

    def value(self, reply: dict):
        if set(reply) == {"n", "unsendable"} and type(reply["unsendable"]) is str:
            raise ProgramFault(f"the program's answer is not plain JSON data ({reply['unsendable'][:200]})")
        if set(reply) != {"n", "value"}:
            raise ProgramFault("the program process sent a malformed answer")
        try:
            value = from_wire(reply["value"])
        except BaseException as exc:
            raise ProgramFault(f"the program's answer is not plain JSON data ({_describe(exc)[:200]})") from None
        self.answers += 1
        return value

    def call(self, name: str, args: tuple, kwargs: dict):
        try:
            request = {"op": "call", "name": name, "args": [_to_wire(a) for a in args],
                       "kwargs": {k: _to_wire(v) for k, v in kwargs.items()}}
        except (TypeError, ValueError) as exc:
            raise ProgramFault(f"the tests passed {name}() an argument that is not plain data ({exc})") from None
        reply = self.ask(request)
        if set(reply) == {"n", "missing"}:
            raise ProgramFault(f"name {name!r} is not defined by the program")
        if set(reply) == {"n", "error", "type"} and type(reply["error"]) is str:
            self.answers += 1
            raise _exception_for(reply["type"], reply["error"][:400])
        return self.value(reply)


def _proxy(link: _ProgramLink, name: str):
    """A function of the test process standing for the program's ``name``: JSON arguments out, a JSON value back."""
    def call(*args, **kwargs):
        return link.call(name, args, kwargs)
    call.__name__ = call.__qualname__ = name
    return call


class _TestGlobals(dict):
    """The tests' namespace. A name neither the tests nor the set-up code defines, and no builtin, is looked up
    in the program process: a function there becomes a proxy, plain data comes back as a copy, a module is
    the test process's own import of it. Builtins come first, so a program's ``abs = ...`` or ``isinstance =
    ...`` never reaches the tests."""

    def __init__(self, link: _ProgramLink, builtins_module, forced: tuple = ()):
        super().__init__(__name__="__main__", __builtins__=builtins_module)
        self._link, self._builtins = link, builtins_module
        self._forced = frozenset(forced)  # the entry point: the program's even when a builtin has its name
        # The program's functions, once it confirmed them; kept out of the dict itself, so that every lookup
        # comes here and counts as reaching the program (``assert callable(f)`` does, ``assert True or f``
        # does not).
        self._proxies: dict = {}

    def __missing__(self, name):
        proxy = self._proxies.get(name)
        if proxy is not None:
            self._link.answers += 1
            return proxy
        if name not in self._forced and hasattr(self._builtins, name):
            raise KeyError(name)
        reply = self._link.ask({"op": "get", "name": name})
        if set(reply) == {"n", "missing"}:
            # not NameError: a test's ``except Exception`` (expecting the program to raise) must not take it
            raise ProgramFault(f"name {name!r} is not defined by the program")
        if set(reply) == {"n", "callable"} and reply["callable"] is True:
            self._link.answers += 1
            proxy = self._proxies[name] = _proxy(self._link, name)
            return proxy
        if set(reply) == {"n", "module"} and type(reply["module"]) is str:
            # A module the program imported (tests that lean on its ``import math``): the test process's own
            # copy of it, from the read-only installation, never the program's object.
            module = reply["module"]
            if not all(part.isidentifier() for part in module.split(".")):
                raise ProgramFault("the program process sent a malformed module name")
            import importlib
            try:
                value = importlib.import_module(module)
            except ImportError:
                raise ProgramFault(f"the program's module {module[:100]!r} cannot be imported by the tests") from None
            self[name] = value
            return value
        return self._link.value(reply)


def _tests_harness(req: dict, report_fd: int, request_fd: int, reply_fd: int) -> None:
    """Run the set-up code, then each step against the program process; one JSON line per step on
    ``report_fd``, which the program process has no way to reach. Never returns."""
    import builtins

    def emit(obj) -> None:
        _write_all(report_fd, (json.dumps(obj) + "\n").encode())

    link = _ProgramLink(request_fd, reply_fd, int(req["max_report_kb"]) * 1024)
    entry = req.get("entry_point")
    namespace = _TestGlobals(link, builtins, (entry,) if entry else ())
    emit({"setup_ok": True})
    if req.get("setup"):
        try:
            exec(compile(req["setup"], "<setup_code>", "exec", dont_inherit=True), namespace)
        except BaseException as exc:
            emit({"setup_error": _describe(exc)})
            _finish()
    for name in req.get("program_names", ()):  # the set-up's stubs (and the entry point) are the program's
        namespace.pop(name, None)
    problem = link.greeting()
    emit({"program_error": problem} if problem else {"program_ok": True})
    if problem:
        _finish()
    for i, step in enumerate(req["steps"]):
        answers = link.answers
        try:
            if step["kind"] == "exec":
                exec(compile(step["src"], f"<test {i}>", "exec", dont_inherit=True), namespace)
                value = None
            elif step["kind"] == "eval":
                value = eval(compile(step["src"], f"<test {i}>", "eval", dont_inherit=True), namespace)
            else:  # call
                value = link.call(step["entry"], tuple(step["args"]), {})
            report = {"i": i, "value": _to_wire(value)}
        except BaseException as exc:
            report = {"i": i, "error": _describe(exc)}
        report["used"] = link.answers > answers  # whether the step reached the program at all
        emit(report)
    _finish()


# ---- the trusted side ----------------------------------------------------------------------------

class Server:
    def __init__(self, uid: int, gid: int, mode: str, tmp_mb: int = 0):
        self.uid, self.gid, self.mode = uid, gid, mode
        self.tmp_mb = tmp_mb if mode == "bwrap" else 0  # the size of the private /tmp bubblewrap mounted
        self.switch_uid = os.geteuid() == 0 and uid != os.geteuid()
        self.base = "/tmp/seedbed-runs" if mode == "bwrap" else None
        self.counter = 0
        machine = os.uname().machine
        self.seccomp = build_seccomp_filter(machine) if machine in _ARCHES else None
        self.layers = {"mode": mode, "uid_switch": self.switch_uid, "seccomp": False,
                       "net_namespace": mode == "bwrap", "mount_namespace": mode == "bwrap",
                       "pid_namespace": mode == "bwrap", "rlimits": True, "session": True,
                       "tests_apart": True, "tmp_mb": self.tmp_mb}
        try:
            _prctl(_PR_SET_CHILD_SUBREAPER, 1)  # orphans (double-forked daemons) come back to us to be reaped
        except OSError:
            pass
        if self.base:
            os.makedirs(self.base, exist_ok=True)
            os.chmod(self.base, 0o711)  # whatever the umask (workers run with 077): runs' paths must be traversable
        self.layers["seccomp"] = self._probe_seccomp()
        self._filter = SeccompFilter(self.seccomp) if self.layers["seccomp"] else None
        # The children's fresh streams on fds 0-2, made once here: each forked child gets its own copy (the
        # server never uses them, so their buffers are empty when a child starts).
        self._streams = (open(0, "r", closefd=False), open(1, "w", closefd=False), open(2, "w", closefd=False))

    def _probe_seccomp(self) -> bool:
        """Fork, install the filter, check that an AF_INET socket and ptrace are refused."""
        if self.seccomp is None:
            return False
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                import socket
                install_seccomp(self.seccomp)
                try:
                    socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                except PermissionError:
                    code = 0 if _libc.ptrace(0, 0, 0, 0) == -1 else 1  # PTRACE_TRACEME refused
            except BaseException:
                code = 2
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status) == 0

    # -- one run --
    def _make_run_dir(self) -> str:
        self.counter += 1
        if self.base:
            path = os.path.join(self.base, f"run-{self.counter}")
            os.mkdir(path, 0o700)
        else:
            import tempfile
            path = tempfile.mkdtemp(prefix="seedbed-sbx-")
        if self.switch_uid:
            os.chown(path, self.uid, self.gid)
        return path

    def _child(self, req: dict, run_dir: str, fds: dict[int, int], role: str) -> None:
        """In a forked child: ``fds`` (target number -> open fd) become its only descriptors, then the drop
        (rlimits, uid, no_new_privs, seccomp), then the harness of ``role`` (``program`` or ``tests``)."""
        try:
            os.setsid()
            os.chdir(run_dir)
            moved = {target: fcntl.fcntl(fd, fcntl.F_DUPFD, 256) for target, fd in fds.items()}
            for target, fd in moved.items():  # via numbers >= 256, so no placement overwrites another's source
                os.dup2(fd, target)
            os.closerange(max(fds) + 1, 65536)
            cpu = int(req["timeout_s"]) + 1
            # The program's memory_mb is shared between its address space and the files it may write in the
            # private /tmp (a tmpfs of tmp_mb): together they stay within memory_mb.
            mem_mb = int(req["memory_mb"]) - (self.tmp_mb if role == "program" else 0)
            mem = mem_mb * 1024 * 1024
            for limit, value in ((resource.RLIMIT_CPU, (cpu, cpu + 1)), (resource.RLIMIT_AS, (mem, mem)),
                                 (resource.RLIMIT_NPROC, (req["max_processes"],) * 2),
                                 (resource.RLIMIT_FSIZE, (req["max_output_kb"] * 1024,) * 2),
                                 (resource.RLIMIT_NOFILE, (64, 64)), (resource.RLIMIT_CORE, (0, 0))):
                resource.setrlimit(limit, value)
            signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
            signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a closed pipe is an EPIPE error, not a death
            if self.switch_uid:
                os.setgroups([])
                os.setresgid(self.gid, self.gid, self.gid)
                os.setresuid(self.uid, self.uid, self.uid)
            # Not dumpable: no process of the same uid (the other one of this run) may open its /proc/<pid>/mem,
            # fd or environ entries; ptrace and process_vm_* are refused by the seccomp filter besides.
            _prctl(_PR_SET_DUMPABLE, 0)
            if self._filter is not None:
                self._filter.install()
            os.environ.clear()
            os.environ.update({"PATH": "/usr/bin:/bin", "HOME": run_dir, "LANG": "C.UTF-8", "TMPDIR": run_dir})
            sys.stdin, sys.stdout, sys.stderr = self._streams  # fresh streams on fds 0-2
            sys.argv = ["<program>"]
            sys.setrecursionlimit(10000)
        except BaseException:
            os._exit(120)  # set-up failed: no report, the host sees an infrastructure failure
        try:
            if role == "program":
                _program_harness(req, 3, 4)
            else:
                _tests_harness(req, 3, 4, 5)
        finally:  # never fall back into the server's own code in this forked copy
            os._exit(0)

    def run(self, req: dict) -> dict:
        """Two sandboxed processes: the program's and the tests'. Only the tests' process has the report pipe;
        the two talk through a pair of pipes carrying JSON lines."""
        start = time.monotonic()
        run_dir = self._make_run_dir()
        # Output goes to an unnamed file in a root-owned directory: nothing to leave behind, no path to swap.
        out_fd = os.open(os.path.dirname(run_dir), os.O_TMPFILE | os.O_RDWR, 0o600)
        null = os.open("/dev/null", os.O_RDONLY)
        report_r, report_w = os.pipe()
        request_r, request_w = os.pipe()  # tests -> program
        reply_r, reply_w = os.pipe()      # program -> tests
        tests_pid = os.fork()
        if tests_pid == 0:
            self._child(req, run_dir, {0: null, 1: out_fd, 2: out_fd, 3: report_w, 4: request_w, 5: reply_r},
                        "tests")
        program_pid = os.fork()
        if program_pid == 0:
            self._child(req, run_dir, {0: null, 1: out_fd, 2: out_fd, 3: request_r, 4: reply_w}, "program")
        for fd in (null, report_w, request_r, request_w, reply_r, reply_w):
            os.close(fd)
        reports, status, tests_exit = self._collect(tests_pid, report_r, float(req["timeout_s"]), start,
                                                   int(req["max_report_kb"]) * 1024)
        os.close(report_r)
        grace = min(0.05, start + float(req["timeout_s"]) - time.monotonic()) if status == "exited" else 0.0
        program_exit = self._exit_if_done(program_pid, grace)
        tmp_full = self._tmp_full()
        killed = self._kill_all((tests_pid, program_pid))
        output_tail = self._tail(out_fd, 2000)
        os.close(out_fd)
        leftover = self._clean_files(run_dir)
        return {"id": req["id"], "status": status, **program_exit, "tests_exit": tests_exit, "reports": reports,
                "output_tail": output_tail, "wall_s": round(time.monotonic() - start, 4), "killed_processes": killed,
                "leftover_files_removed": leftover, "tmp_full": tmp_full, "tmp_mb": self.tmp_mb}

    def _exit_if_done(self, pid: int, grace_s: float) -> dict:
        """The program process's exit, if it ends within ``grace_s`` (it does at once when the tests are done:
        its request pipe closes); else it is killed with the rest."""
        if grace_s > 0:
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:
                pidfd = None
            if pidfd is not None:
                select.select([pidfd], [], [], grace_s)
                os.close(pidfd)
        try:
            done, wstatus = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = 0
        if not done:
            return {"signal": None, "exit_code": None, "program_running": True}
        return {**self._exit_info(wstatus), "program_running": False}

    def _tmp_full(self) -> bool:
        """Whether the run filled the server's private /tmp (a tmpfs of ``tmp_mb``; bubblewrap mode only)."""
        if not self.tmp_mb:
            return False
        st = os.statvfs("/tmp")
        return st.f_bavail * st.f_frsize < 256 * 1024

    def _collect(self, pid: int, report_r: int, timeout_s: float, start: float, cap: int):
        pidfd = os.pidfd_open(pid)
        chunks, size, status, exit_info = [], 0, None, {}
        deadline = start + timeout_s
        watched = [report_r, pidfd]
        try:
            while status is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    status = "timeout"
                    break
                readable, _, _ = select.select(watched, [], [], remaining)
                if report_r in readable:
                    data = os.read(report_r, 65536)
                    if not data:  # EOF: every writer closed it; only the exit is left to wait for
                        watched = [pidfd]
                    else:
                        size += len(data)
                        if size > cap:
                            status = "report_overflow"
                            break
                        chunks.append(data)
                if pidfd in readable:
                    _, wstatus = os.waitpid(pid, 0)
                    exit_info = self._exit_info(wstatus)
                    status = "exited"
            if status == "exited":  # drain what the child wrote before it exited
                os.set_blocking(report_r, False)
                while True:
                    try:
                        data = os.read(report_r, 65536)
                    except BlockingIOError:
                        break
                    if not data:
                        break
                    size += len(data)
                    if size > cap:
                        status = "report_overflow"
                        break
                    chunks.append(data)
        finally:
            os.close(pidfd)
        return b"".join(chunks).decode("utf-8", "replace"), status, exit_info

    @staticmethod
    def _exit_info(wstatus: int) -> dict:
        if os.WIFSIGNALED(wstatus):
            return {"signal": os.WTERMSIG(wstatus), "exit_code": None}
        return {"signal": None, "exit_code": os.WEXITSTATUS(wstatus)}

    def _uid_pids(self) -> tuple[list[int], list[int]]:
        """(live, zombie) processes whose real uid is the sandbox uid."""
        live, zombies = [], []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/status") as f:
                    state, uid = "", -1
                    for line in f:
                        if line.startswith("State:"):
                            state = line.split()[1]
                        elif line.startswith("Uid:"):
                            uid = int(line.split()[1])
                            break
            except OSError:
                continue
            if uid == self.uid:
                (zombies if state in ("Z", "X") else live).append(int(name))
        return live, zombies

    def _kill_all(self, pids: tuple[int, ...]) -> int:
        """SIGKILL the children's groups, then every process of the sandbox uid until none is left; reap all."""
        killed: set[int] = set()
        for pid in pids:
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        if self.switch_uid:
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline:
                live, zombies = self._uid_pids()
                for victim in live:
                    try:
                        os.kill(victim, signal.SIGKILL)
                        killed.add(victim)
                    except ProcessLookupError:
                        pass
                self._reap()
                if not live and not zombies:
                    break
                if not live:  # only zombies left: they are (or are about to be) our children; let them settle
                    select.select([], [], [], 0.001)
        for pid in pids:
            self._reap(block_for=pid)
        return len(killed)

    @staticmethod
    def _reap(block_for: int | None = None) -> None:
        if block_for is not None:
            try:
                os.waitpid(block_for, 0)
            except ChildProcessError:
                pass
        while True:
            try:
                reaped, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if reaped == 0:
                return

    @staticmethod
    def _tail(fd: int, limit: int) -> str:
        size = os.lseek(fd, 0, os.SEEK_END)
        os.lseek(fd, max(0, size - limit), os.SEEK_SET)
        return os.read(fd, limit).decode("utf-8", "replace")

    def _clean_files(self, run_dir: str) -> int:
        """Remove the run directory; in host mode also anything the uid left in /tmp and /dev/shm."""
        removed = 0
        shutil.rmtree(run_dir, ignore_errors=True)
        if self.mode == "host" and self.switch_uid:
            for shared in ("/tmp", "/dev/shm", "/var/tmp"):
                try:
                    entries = os.listdir(shared)
                except OSError:
                    continue
                for name in entries:
                    path = os.path.join(shared, name)
                    try:
                        if os.lstat(path).st_uid != self.uid:
                            continue
                        if os.path.isdir(path) and not os.path.islink(path):
                            shutil.rmtree(path, ignore_errors=True)
                        else:
                            os.unlink(path)
                        removed += 1
                    except OSError:
                        continue
        return removed

    def serve(self, stdin, stdout) -> None:
        stdout.write(json.dumps({"ready": True, "pid": os.getpid(), "layers": self.layers}) + "\n")
        stdout.flush()
        for line in stdin:
            req = json.loads(line)
            try:
                reply = self.run(req)
            except OSError as exc:
                reply = {"id": req.get("id"), "status": "server_error", "error": f"{type(exc).__name__}: {exc}"}
            stdout.write(json.dumps(reply) + "\n")
            stdout.flush()


def main(argv: list[str]) -> None:
    uid, gid, mode = int(argv[1]), int(argv[2]), argv[3]
    tmp_mb = int(argv[4]) if len(argv) > 4 else 0
    try:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass
    # Requests and replies use the original stdin/stdout; duplicate them so no child can inherit them by number.
    stdin = os.fdopen(os.dup(0), "r")
    stdout = os.fdopen(os.dup(1), "w")
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    Server(uid, gid, mode, tmp_mb).serve(stdin, stdout)


if __name__ == "__main__":
    main(sys.argv)
