"""The trusted side of the fork server (docs/architecture.md#verifiers): per run two directories, the test
process and the program process each asked of a zygote of its own (neither ever held a request), the
reports read until the tests end or time out, then every process of the two sandbox uids killed and reaped and
the files removed. Standard library only."""
from __future__ import annotations

import json
import os
import select
import shutil
import signal
import sys
import time

from .cgroup import RunCgroups, fallback_limits
from .seccomp import (ARCHES, PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE, PR_SET_PDEATHSIG, SeccompFilter,
                      LIBC, prctl, build_seccomp_filter, install_seccomp)
from .zygote import Zygote, ZygoteGone


class Server:
    def __init__(self, uid: int, gid: int, mode: str, tmp_mb: int = 0, tests_ids: tuple[int, int] | None = None,
                 cgroup: str | None = None):
        """``uid``/``gid``: the program process's; ``tests_ids``: the test process's (None: the same as the
        program's, which leaves the tests within the program's reach: ``layers["tests_apart"]`` says False);
        ``cgroup``: a memory cgroup folder for the runs' cgroups (None: the bound is per process, see
        :func:`.cgroup.fallback_limits`; ``layers["memory_bound"]`` says which)."""
        self.uid, self.gid, self.mode = uid, gid, mode
        self.tests_uid, self.tests_gid = tests_ids or (uid, gid)
        self.tmp_mb = tmp_mb if mode == "bwrap" else 0  # the size of the private /tmp bubblewrap mounted
        self.switch_uid = os.geteuid() == 0 and uid != os.geteuid()
        self.uids = {uid, self.tests_uid} - ({os.geteuid()} if not self.switch_uid else set())
        self.base = "/tmp/seedbed-runs" if mode == "bwrap" else None
        self.counter = 0
        self._tests_dir: str | None = None  # the test processes' directory, one for all runs
        machine = os.uname().machine
        self.seccomp = build_seccomp_filter(machine) if machine in ARCHES else None
        # tests_apart: the test process runs as a uid of its own, so the program can neither signal it nor open
        # anything of it; as a non-root server both run as the caller's uid and only not-dumpable stands between.
        apart = self.switch_uid and self.tests_uid not in (uid, os.geteuid())
        self.layers = {"mode": mode, "uid_switch": self.switch_uid, "seccomp": False,
                       "net_namespace": mode == "bwrap", "mount_namespace": mode == "bwrap",
                       "pid_namespace": mode == "bwrap", "rlimits": True, "session": True,
                       "tests_apart": apart, "program_part_only": True, "tmp_mb": self.tmp_mb}
        self.cgroups = RunCgroups(cgroup)
        self._cgroups_made = 0
        self._next_cgroups: tuple[int, tuple[str, ...]] | None = None  # (memory_mb, paths) made between runs
        self._cgroups_done: list[str] = []  # the last run's, removed once its reply is out
        # v1: one pair for every run, (memory_mb, paths, cgroup.procs descriptors); emptied by each run's kill
        self._pair: tuple[int, tuple[str, ...], tuple[int, ...]] | None = None
        self.layers["memory_cgroup"] = self.cgroups.layer  # "cgroup v1"/"cgroup v2", or None (and why)
        self.layers["memory_bound"] = (
            "memory_mb for the program and all it forks, and memory_mb for the tests and theirs (a memory cgroup "
            "each)" if self.cgroups.version else
            f"address space per process: memory_mb / max_processes, max_processes lowered so that each has at "
            f"least 128 MB (no writable memory cgroup: {self.cgroups.why})")
        try:
            prctl(PR_SET_CHILD_SUBREAPER, 1)  # orphans (double-forked daemons) come back to us to be reaped
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
        # Before any request is read: every program process is forked from this zygote, whose memory never
        # held a request (nor the freed remains of one).
        if self.cgroups.reusable:  # made now: each waiting process joins its role's once its run's spawn came
            paths = tuple(self.cgroups.create(role, 64 << 20) for role in ("program", "tests"))
            self._pair = (64, paths, tuple(self.cgroups.procs_fd(path) for path in paths))
        self.zygote = Zygote({"ids": (uid, gid) if self.switch_uid else None, "seccomp_filter": self._filter,
                              "streams": self._streams}, keep_fds=(0, 1, 2),
                             join_fd=self._pair[2][0] if self._pair else -1)
        # The test processes' own zygote: small and idle; its waiting test process reads the request (the tests)
        # only once its run came, from a memfd.
        self.tests_zygote = Zygote({"ids": (self.tests_uid, self.tests_gid) if self.switch_uid else None,
                                    "seccomp_filter": self._filter, "streams": self._streams}, keep_fds=(0, 1, 2),
                                   join_fd=self._pair[2][1] if self._pair else -1, role="tests")

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
                    code = 0 if LIBC.ptrace(0, 0, 0, 0) == -1 else 1  # PTRACE_TRACEME refused
            except BaseException:
                code = 2
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status) == 0

    # -- one run --
    def _new_dir(self, role: str, owner: tuple[int, int]) -> str:
        """A fresh directory for ``role``, 0700 and owned by ``owner`` (as root)."""
        self.counter += 1
        if self.base:
            path = os.path.join(self.base, f"run-{self.counter}-{role}")
            os.mkdir(path, 0o700)
        else:
            import tempfile
            path = tempfile.mkdtemp(prefix=f"seedbed-sbx-{role}-")
        if self.switch_uid:
            os.chown(path, *owner)
        return path

    def _make_run_dirs(self) -> tuple[str, str]:
        """(the program's directory, fresh; the test process's, the server's one, used again while the last run
        left it empty and as it was made (the usual case: the tests write nothing), else removed with all in it
        and made afresh), each 0700 and owned by its own uid."""
        if self._tests_dir is None or not self._tests_dir_clean():
            if self._tests_dir is not None:  # (an error path's: not checked at the end of its run)
                self._clean_files((self._tests_dir,))
            self._tests_dir = self._new_dir("tests", (self.tests_uid, self.tests_gid))
        return self._new_dir("program", (self.uid, self.gid)), self._tests_dir

    def _limits(self, req: dict, role: str) -> dict:
        """The rlimits of one of the run's processes. The program's memory_mb is shared between its address space
        and the files it may write in the private /tmp (a tmpfs of tmp_mb): together they stay within memory_mb.
        With a memory cgroup (which bounds each process tree as a whole, its tmpfs pages too) each process's
        address space is bounded by that as well; without one, each gets memory_mb / max_processes of it, so that
        all together stay within memory_mb (:func:`.cgroup.fallback_limits`)."""
        memory = int(req["memory_mb"]) - (self.tmp_mb if role == "program" else 0)
        processes = int(req["max_processes"])
        if not self.cgroups.version:
            memory, processes = fallback_limits(memory, processes)
        return {"cpu_s": int(req["timeout_s"]) + 1, "memory_mb": memory, "max_processes": processes,
                "max_output_kb": int(req["max_output_kb"])}

    def _new_cgroups(self, memory_mb: int) -> tuple[str, ...]:
        """The program's and the tests' cgroups of a run, fresh, each limited to ``memory_mb``."""
        self._cgroups_made += 1
        paths: list[str] = []
        try:
            for role in ("program", "tests"):
                paths.append(self.cgroups.create(f"run-{self._cgroups_made}-{role}", memory_mb << 20))
        except OSError:
            self._cgroups_done += paths
            raise
        return tuple(paths)

    def _make_cgroups(self, req: dict) -> tuple[tuple[str, ...], list[int]]:
        """(paths, cgroup.procs descriptors) of the run's two cgroups, the program's and the tests', each of
        memory_mb (made after the last run's reply, for the same memory_mb; else now); ((), [-1, -1]) without
        cgroups."""
        if not self.cgroups.version:
            return (), [-1, -1]
        if self.cgroups.reusable:
            return self._reused_cgroups(int(req["memory_mb"]))
        ready, self._next_cgroups = self._next_cgroups, None
        if ready is not None and ready[0] == int(req["memory_mb"]):
            paths = ready[1]
        else:
            self._cgroups_done += ready[1] if ready else ()
            paths = self._new_cgroups(int(req["memory_mb"]))
        fds: list[int] = []
        try:
            for path in paths:
                fds.append(self.cgroups.procs_fd(path))
        except OSError:
            for fd in fds:
                os.close(fd)
            self._drop_cgroups(paths)
            raise
        return paths, fds

    def _reused_cgroups(self, memory_mb: int) -> tuple[tuple[str, ...], list[int]]:
        """The server's one pair of v1 cgroups (made with the server), limited to ``memory_mb`` (changed only
        when it differs from the last run's) and their peaks reset; the last run's kill left them empty (it
        kills by their ``cgroup.procs`` until none is left) and its files are removed, so nothing of it is
        charged. Each waiting process joins its role's once its run's spawn came (:class:`.zygote.Zygote`):
        no descriptor is sent ([-1, -1])."""
        assert self._pair is not None
        if self._pair[0] != memory_mb:
            for path in self._pair[1]:
                self.cgroups.set_limit(path, memory_mb << 20)
            self._pair = (memory_mb, *self._pair[1:])
        for path in self._pair[1]:
            self.cgroups.reset_peak(path)
        return self._pair[1], [-1, -1]

    def _drop_cgroups(self, paths: tuple[str, ...]) -> dict | None:
        """The peak (MB) of each of the run's cgroups, which are emptied and removed once the reply is out
        (:meth:`between_runs`); None without them."""
        if not paths:
            return None
        peaks = {}
        for role, path in zip(("program", "tests"), paths):
            peak = self.cgroups.peak_bytes(path)
            peaks[role] = None if peak is None else round(peak / 2**20, 1)
        if not self.cgroups.reusable:
            self._cgroups_done += paths
        return peaks

    def between_runs(self, memory_mb: int | None) -> None:
        """After a reply: the last run's cgroups emptied (whatever of it the kill missed) and removed, and the
        next run's made for the same ``memory_mb``, off the runs' critical path."""
        done, self._cgroups_done = self._cgroups_done, []
        for path in done:
            self.cgroups.remove(path)
        if self.cgroups.version and not self.cgroups.reusable and memory_mb and self._next_cgroups is None:
            self._next_cgroups = (memory_mb, self._new_cgroups(memory_mb))

    @staticmethod
    def _program_part(req: dict, role: str = "program") -> int:
        """A memfd holding what the program process may know of the request: its code, the set-up and the
        names it is to define. Never the steps, the entry point's checks or anything of the tests. (For the
        test process, ``role`` "tests": the whole request.)"""
        part = json.dumps(req if role == "tests" else {
            "code": req["code"], "setup": req.get("setup") or "",
            "program_names": list(req.get("program_names") or ())}).encode()
        fd = os.memfd_create(f"{role}-part", os.MFD_CLOEXEC)
        view = memoryview(part)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
        return fd

    def run(self, req: dict) -> dict:
        """Two sandboxed processes: the program's (from the zygote) and the tests'. Only the tests' process has
        the report pipe; the two talk through a pair of pipes carrying JSON lines, and share no other file."""
        start = time.monotonic()
        program_dir, tests_dir = self._make_run_dirs()
        try:
            cgroups, procs_fds = self._make_cgroups(req)
        except OSError:
            self._clean_files((program_dir, tests_dir))
            raise
        # The program's output goes to an unnamed file in a root-owned directory: nothing to leave behind, no path
        # to swap. The test process writes to /dev/null: nothing of what the tests print reaches the program.
        out_fd = os.open(os.path.dirname(program_dir), os.O_TMPFILE | os.O_RDWR, 0o600)
        part_fd, tests_part_fd = self._program_part(req), self._program_part(req, "tests")
        report_r, report_w = os.pipe()
        request_r, request_w = os.pipe()  # tests -> program
        reply_r, reply_w = os.pipe()      # program -> tests
        opened = [out_fd, part_fd, tests_part_fd, report_w, request_r, request_w, reply_r, reply_w] + [f for f in procs_fds if f >= 0]
        program_pid = tests_pid = None
        try:
            self.zygote.send({"run_dir": program_dir, **self._limits(req, "program"), "cgroup": procs_fds[0] >= 0},
                             [part_fd, request_r, reply_w, out_fd, *procs_fds[:1 if procs_fds[0] >= 0 else 0]])
            self.tests_zygote.send({"run_dir": tests_dir, **self._limits(req, "tests"), "cgroup": procs_fds[1] >= 0},
                                   [tests_part_fd, report_w, request_w, reply_r,
                                    *procs_fds[1:2 if procs_fds[1] >= 0 else 1]])
        except BaseException:
            self.zygote.broken = self.tests_zygote.broken = True  # unknown state: this server answers and exits
            self._kill_all(tuple(p for p in (tests_pid,) if p), cgroups)
            for fd in opened + [report_r]:
                os.close(fd)
            self._clean_files((program_dir, tests_dir))
            self._drop_cgroups(cgroups)
            raise
        for fd in opened:
            if fd != out_fd:
                os.close(fd)
        try:  # each waiting process told its pid ahead of the run: no hand-off waits for these
            tests_pid = self.tests_zygote.receive()
            program_pid = self.zygote.receive()
        except OSError:
            os.close(report_r)
            self._kill_all(tuple(p for p in (tests_pid,) if p), cgroups)
            os.close(out_fd)
            self._clean_files((program_dir, tests_dir))
            self._drop_cgroups(cgroups)
            raise
        pidfds = self._pidfds((tests_pid, program_pid))
        try:
            reports, status = self._collect(report_r, pidfds[0], float(req["timeout_s"]), start,
                                            int(req["max_report_kb"]) * 1024)
        except BaseException:
            for fd in pidfds:
                if fd >= 0:
                    os.close(fd)
            raise
        finally:
            os.close(report_r)
        grace = min(0.05, start + float(req["timeout_s"]) - time.monotonic()) if status == "exited" else 0.0
        ended = self._ended_within(pidfds[1], grace)
        tmp_full = self._tmp_full()
        killed = self._kill_all((tests_pid, program_pid), cgroups)
        try:
            tests_exit = (self._exit_info(self.tests_zygote.exit_status(tests_pid, pidfds[0]))
                          if status == "exited" else {})
            wstatus = self.zygote.exit_status(program_pid, pidfds[1]) if ended else None
        finally:
            for fd in pidfds:
                if fd >= 0:
                    os.close(fd)
        output_tail = self._tail(out_fd, 2000)
        os.close(out_fd)
        kept = self._tests_dir_clean()
        leftover = self._clean_files((program_dir,) if kept else (program_dir, tests_dir))
        if not kept:
            self._tests_dir = None
        peaks = self._drop_cgroups(cgroups)  # after the files: the program's tmpfs pages are charged to it
        program_exit = ({**self._exit_info(wstatus), "program_running": False} if ended else
                        {"signal": None, "exit_code": None, "program_running": True})
        return {"memory_peak_mb": peaks, "id": req["id"], "status": status, **program_exit, "tests_exit": tests_exit,
                "reports": reports, "output_tail": output_tail, "wall_s": round(time.monotonic() - start, 4), "killed_processes": killed,
                "leftover_files_removed": leftover, "tmp_full": tmp_full, "tmp_mb": self.tmp_mb}

    @staticmethod
    def _pidfds(pids: tuple[int, ...]) -> list[int]:
        """A pidfd for each of the run's two processes (-1 for one already reaped: it failed to start)."""
        fds = []
        for pid in pids:
            try:
                fds.append(os.pidfd_open(pid))
            except ProcessLookupError:
                fds.append(-1)
        return fds

    @staticmethod
    def _ended_within(pidfd: int, grace_s: float) -> bool:
        """Whether the program process (``pidfd``) ends within ``grace_s`` (it does at once when the tests are
        done: its request pipe closes); else it is killed with the rest. Watched through a pidfd (it is the
        zygote's child), so that the end of a run waits for no other process."""
        return pidfd < 0 or bool(select.select([pidfd], [], [], max(0.0, grace_s))[0])

    def _tmp_full(self) -> bool:
        """Whether the run filled the server's private /tmp (a tmpfs of ``tmp_mb``; bubblewrap mode only)."""
        if not self.tmp_mb:
            return False
        st = os.statvfs("/tmp")
        return st.f_bavail * st.f_frsize < 256 * 1024

    def _collect(self, report_r: int, done_fd: int, timeout_s: float, start: float, cap: int):
        """(the reports, and "exited", "timeout" or "report_overflow"): read until the test process ends (watched
        through its pidfd ``done_fd``, -1 if it is gone already: its zygote answers how it ended afterwards, off
        this wait) or the time is up."""
        done_fd = None if done_fd < 0 else done_fd
        chunks, size, status = [], 0, None
        deadline = start + timeout_s
        watched = [report_r] + ([done_fd] if done_fd is not None else [])
        while status is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                status = "timeout"
                break
            readable, _, _ = select.select(watched, [], [], remaining)
            if report_r in readable:
                data = os.read(report_r, 65536)
                if not data:  # EOF: every writer closed it; only the exit is left to wait for
                    watched = [fd for fd in watched if fd != report_r]
                    if not watched:
                        status = "exited"
                else:
                    size += len(data)
                    if size > cap:
                        status = "report_overflow"
                        break
                    chunks.append(data)
            if done_fd is not None and done_fd in readable:
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
        return b"".join(chunks).decode("utf-8", "replace"), status

    @staticmethod
    def _exit_info(wstatus: int) -> dict:
        if os.WIFSIGNALED(wstatus):
            return {"signal": os.WTERMSIG(wstatus), "exit_code": None}
        return {"signal": None, "exit_code": os.WEXITSTATUS(wstatus)}

    def _uid_pids(self) -> tuple[list[int], list[int]]:
        """(live, zombie) processes whose real uid is one of the sandbox uids (the program's, the tests'); the
        server and its zygote are skipped unread."""
        live, zombies = [], []
        ours = {str(os.getpid()), str(self.zygote.pid), str(self.tests_zygote.pid)}
        for name in os.listdir("/proc"):
            if not name.isdigit() or name in ours:
                continue
            try:
                fd = os.open(f"/proc/{name}/status", os.O_RDONLY)
                try:
                    text = os.read(fd, 4096)
                finally:
                    os.close(fd)
                state = text[text.index(b"\nState:") + 7:].split(None, 1)[0]
                uid = int(text[text.index(b"\nUid:") + 5:].split(None, 1)[0])
            except (OSError, ValueError):
                continue
            if uid in self.uids:
                (zombies if state in (b"Z", b"X") else live).append(int(name))
        return live, zombies

    def _kill_all(self, pids: tuple[int, ...], cgroups: tuple[str, ...] = ()) -> int:
        """SIGKILL the groups of ``pids`` (the test process, then the program's), then every process of the run
        until none is left: with ``cgroups`` (the run's, which every process of it joined before it ran anything
        of the run's, and which none can leave) those listed in them, else those of the sandbox uids; reap all
        of ours (the program is the zygote's to reap)."""
        killed: set[int] = set()
        for pid in pids:
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        if cgroups or self.switch_uid:
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline:
                live, zombies = self._run_pids(cgroups)
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
        self._reap()  # (the test process and the program are their zygotes' to reap)
        return len(killed)

    def _run_pids(self, cgroups: tuple[str, ...]) -> tuple[list[int], list[int]]:
        """(live, zombie) processes of the run: those in its cgroups (which list no zombie: a killed one is
        gone from them once it has exited), else :meth:`_uid_pids`."""
        if not cgroups:
            return self._uid_pids()
        live: list[int] = []
        for path in cgroups:
            try:
                live += self.cgroups.procs(path)
            except FileNotFoundError:
                continue
        return live, []

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

    def _tests_dir_clean(self) -> bool:
        """Whether the tests' directory is as it was made and empty (kept for the next run); else it is removed
        with the run's files and the next run makes it afresh."""
        try:
            st = os.lstat(self._tests_dir)
            if (st.st_mode & 0o7777 == 0o700 and (st.st_uid == self.tests_uid or not self.switch_uid)
                    and st.st_nlink == 2 and not os.listdir(self._tests_dir)):
                return True
        except OSError:
            pass
        return False

    def _clean_files(self, run_dirs: tuple[str, ...]) -> int:
        """Remove the run's directories; in host mode also anything the uids left in /tmp and /dev/shm."""
        removed = 0
        for run_dir in run_dirs:
            try:
                os.rmdir(run_dir)  # most runs leave their directory empty
            except OSError:
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
                        if os.lstat(path).st_uid not in self.uids:
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
        try:
            self._serve(stdin, stdout)
        finally:
            if self._tests_dir is not None:
                self._clean_files((self._tests_dir,))

    def _serve(self, stdin, stdout) -> None:
        for line in stdin:
            req = json.loads(line)
            try:
                reply = self.run(req)
            except OSError as exc:
                reply = {"id": req.get("id"), "status": "server_error", "error": f"{type(exc).__name__}: {exc}"}
            stdout.write(json.dumps(reply) + "\n")
            stdout.flush()
            try:
                self.between_runs(int(req["memory_mb"]))
            except OSError:  # a cgroup that cannot be made now is made again for the next run
                pass
            if not (self.zygote.alive() and self.tests_zygote.alive()):  # a clean zygote cannot be made again here: the host starts a new server
                raise ZygoteGone("the zygote ended")


def main(argv: list[str]) -> None:
    """``UID GID TESTS_UID TESTS_GID MODE [TMP_MB [CGROUP]]``: the program's ids, the test process's, bwrap or
    host, the private /tmp's size, the memory cgroup folder for the runs' cgroups (``-``: none)."""
    uid, gid, tests_uid, tests_gid, mode = int(argv[1]), int(argv[2]), int(argv[3]), int(argv[4]), argv[5]
    tmp_mb = int(argv[6]) if len(argv) > 6 else 0
    cgroup = argv[7] if len(argv) > 7 and argv[7] != "-" else None
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass
    # Not dumpable: a process of the same uid (a non-root server's programs) may not open its memory, which
    # holds the requests (the zygote and every sandboxed process are not dumpable either).
    prctl(PR_SET_DUMPABLE, 0)
    # Requests and replies use the original stdin/stdout; duplicate them so no child can inherit them by number.
    stdin = os.fdopen(os.dup(0), "r")
    stdout = os.fdopen(os.dup(1), "w")
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    server = Server(uid, gid, mode, tmp_mb, tests_ids=(tests_uid, tests_gid), cgroup=cgroup)
    try:
        server.serve(stdin, stdout)
    except ZygoteGone:
        sys.exit(3)
