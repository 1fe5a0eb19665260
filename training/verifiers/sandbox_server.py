"""The sandbox fork server: runs untrusted Python programs, one at a time, and reports raw outcomes.

Standard library only: it runs as ``python -I sandbox_server.py UID GID MODE`` with a clean environment,
inside bubblewrap's namespaces when available (MODE ``bwrap``) or directly on the host (MODE ``host``). It
is trusted (root, or the caller's uid); everything it forks to run a program is not.

Protocol: JSON lines. Start-up: the server prints ``{"ready": true, "layers": {...}}``. Then for each line
read on stdin, ``{"id", "code", "steps", "timeout_s", "memory_mb", "max_output_kb"}``, it prints one line
``{"id", "status", "reports", "output_tail", "wall_s", ...}``. ``steps`` carry only what the sandbox must
*compute* (an expression to evaluate, a function to call with arguments): expected values never enter the
sandbox, so the program cannot learn them, and the trusted host compares.

Per run: a fresh directory owned by the sandbox uid; ``fork``; in the child: own session and process group,
rlimits (CPU, address space, processes, file size, open files, core 0), every inherited fd closed, groups
dropped, uid/gid switched, no_new_privs, a seccomp filter (no network sockets, ptrace, namespaces, mount,
exec, io_uring, bpf, ...), a clean environment; then the harness executes the program and each step,
writing one JSON report per step to a pipe. The server waits up to the wall-clock timeout, then kills the
child's group and every process of the sandbox uid, reaps orphans (it is a child subreaper), and deletes
the run directory (and, in host mode, anything the uid left in /tmp and /dev/shm).
"""
from __future__ import annotations

import ctypes
import errno
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


def install_seccomp(program: bytes) -> None:
    """no_new_privs, then the filter. Irreversible for this process and its descendants."""
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buf))
    _prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog))


# ---- the untrusted side: runs in the forked child, after the drop ------------------------------------

def _to_wire(value, depth=0):
    """Plain data only, exact types (a subclass could lie in __eq__ or __repr__); tuples, sets and dicts tagged."""
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
        return {"$set": sorted((_to_wire(v, depth + 1) for v in value), key=lambda w: json.dumps(w, sort_keys=True))}
    if t is dict:
        return {"$dict": sorted(([_to_wire(k, depth + 1), _to_wire(v, depth + 1)] for k, v in value.items()),
                                key=lambda kv: json.dumps(kv[0], sort_keys=True))}
    raise TypeError(f"cannot report a value of type {t.__name__}; only plain data is compared")


def _harness(code: str, steps: list, report_fd: int) -> None:
    """Execute the program, then each step; one JSON line per step on ``report_fd``. Never returns."""
    import builtins
    write, dumps, exit_now = os.write, json.dumps, os._exit  # bound before the program can patch modules
    streams = (sys.stdout, sys.stderr)

    def finish() -> None:
        for stream in streams:  # the output tail is for people reading details; best effort
            try:
                stream.flush()
            except BaseException:
                pass
        exit_now(0)

    def emit(obj) -> None:
        data = (dumps(obj) + "\n").encode()
        while data:
            data = data[write(report_fd, data):]

    def describe(exc: BaseException) -> str:
        try:  # the program controls the exception's class and __str__
            return f"{type(exc).__name__}: {str(exc)[:300]}"
        except BaseException:
            return "<unprintable exception>"

    namespace = {"__name__": "__main__", "__builtins__": builtins}
    emit({"setup_ok": True})  # from here on, whatever happens is the program's doing
    try:
        exec(compile(code, "<program>", "exec"), namespace)
    except BaseException as exc:  # SystemExit too: a program that exits before the tests fails them
        emit({"program_error": describe(exc)})
        finish()
    emit({"program_ok": True})
    for i, step in enumerate(steps):
        try:
            if step["kind"] == "exec":
                exec(compile(step["src"], f"<test {i}>", "exec"), namespace)
                value = None
            elif step["kind"] == "eval":
                value = eval(compile(step["src"], f"<test {i}>", "eval"), namespace)
            else:  # call
                value = namespace[step["entry"]](*step["args"])
            emit({"i": i, "value": _to_wire(value)})
        except BaseException as exc:
            emit({"i": i, "error": describe(exc)})
    finish()


# ---- the trusted side ----------------------------------------------------------------------------

class Server:
    def __init__(self, uid: int, gid: int, mode: str):
        self.uid, self.gid, self.mode = uid, gid, mode
        self.switch_uid = os.geteuid() == 0 and uid != os.geteuid()
        self.base = "/tmp/seedbed-runs" if mode == "bwrap" else None
        self.counter = 0
        machine = os.uname().machine
        self.seccomp = build_seccomp_filter(machine) if machine in _ARCHES else None
        self.layers = {"mode": mode, "uid_switch": self.switch_uid, "seccomp": False,
                       "net_namespace": mode == "bwrap", "mount_namespace": mode == "bwrap",
                       "pid_namespace": mode == "bwrap", "rlimits": True, "session": True}
        try:
            _prctl(_PR_SET_CHILD_SUBREAPER, 1)  # orphans (double-forked daemons) come back to us to be reaped
        except OSError:
            pass
        if self.base:
            os.makedirs(self.base, mode=0o711, exist_ok=True)
        self.layers["seccomp"] = self._probe_seccomp()

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

    def _child(self, req: dict, run_dir: str, report_w: int, out_fd: int) -> None:
        try:
            os.setsid()
            os.chdir(run_dir)
            os.dup2(out_fd, 1)
            os.dup2(out_fd, 2)
            null = os.open("/dev/null", os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(report_w, 3)
            os.closerange(4, 65536)
            cpu = int(req["timeout_s"]) + 1
            mem = int(req["memory_mb"]) * 1024 * 1024
            for limit, value in ((resource.RLIMIT_CPU, (cpu, cpu + 1)), (resource.RLIMIT_AS, (mem, mem)),
                                 (resource.RLIMIT_NPROC, (req["max_processes"],) * 2),
                                 (resource.RLIMIT_FSIZE, (req["max_output_kb"] * 1024,) * 2),
                                 (resource.RLIMIT_NOFILE, (64, 64)), (resource.RLIMIT_CORE, (0, 0))):
                resource.setrlimit(limit, value)
            signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
            if self.switch_uid:
                os.setgroups([])
                os.setresgid(self.gid, self.gid, self.gid)
                os.setresuid(self.uid, self.uid, self.uid)
            _prctl(_PR_SET_DUMPABLE, 0)
            if self.layers["seccomp"]:
                install_seccomp(self.seccomp)
            os.environ.clear()
            os.environ.update({"PATH": "/usr/bin:/bin", "HOME": run_dir, "LANG": "C.UTF-8", "TMPDIR": run_dir})
            sys.stdin = sys.stdout = sys.stderr = None  # the program gets fresh streams on fds 0-2
            sys.stdout = open(1, "w", closefd=False)
            sys.stderr = open(2, "w", closefd=False)
            sys.stdin = open(0, "r", closefd=False)
            sys.argv = ["<program>"]
            sys.setrecursionlimit(10000)
        except BaseException:
            os._exit(120)  # set-up failed: no report, the host sees an infrastructure failure
        try:
            _harness(req["code"], req["steps"], 3)
        finally:  # never fall back into the server's own code in this forked copy
            os._exit(0)

    def run(self, req: dict) -> dict:
        start = time.monotonic()
        run_dir = self._make_run_dir()
        # Output goes to an unnamed file in a root-owned directory: nothing to leave behind, no path to swap.
        out_fd = os.open(os.path.dirname(run_dir), os.O_TMPFILE | os.O_RDWR, 0o600)
        report_r, report_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(report_r)
            self._child(req, run_dir, report_w, out_fd)
        os.close(report_w)
        reports, status, exit_info = self._collect(pid, report_r, float(req["timeout_s"]), start,
                                                   int(req["max_report_kb"]) * 1024)
        os.close(report_r)
        killed = self._kill_all(pid)
        output_tail = self._tail(out_fd, 2000)
        os.close(out_fd)
        leftover = self._clean_files(run_dir)
        return {"id": req["id"], "status": status, **exit_info, "reports": reports, "output_tail": output_tail,
                "wall_s": round(time.monotonic() - start, 4), "killed_processes": killed,
                "leftover_files_removed": leftover}

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

    def _kill_all(self, pid: int) -> int:
        """SIGKILL the child's group, then every process of the sandbox uid until none is left; reap all."""
        killed: set[int] = set()
        for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
            try:
                kill()
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
    Server(uid, gid, mode).serve(stdin, stdout)


if __name__ == "__main__":
    main(sys.argv)
