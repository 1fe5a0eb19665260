"""The trusted side of the fork server (docs/architecture.md#verifiers): per run a fresh directory, two forked
children locked down (rlimits, uid, no_new_privs, seccomp), the reports read until the tests end or time out,
then every process of the sandbox uid killed and reaped and the files removed. Standard library only."""
from __future__ import annotations

import fcntl
import json
import os
import resource
import select
import shutil
import signal
import sys
import time

from .harness import _program_harness, _tests_harness
from .seccomp import (_ARCHES, _PR_SET_CHILD_SUBREAPER, _PR_SET_DUMPABLE, _PR_SET_PDEATHSIG, SeccompFilter,
                      _libc, _prctl, build_seccomp_filter, install_seccomp)


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
