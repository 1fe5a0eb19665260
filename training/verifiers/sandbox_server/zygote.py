"""The zygote: the process every program process is forked from (docs/architecture.md#verifiers).

The server forks it once, at start-up, before it reads any request, so the zygote's memory never held a request
(nor its freed remains: a child inherits the uncleared heap of its parent, and a GRPO group sends the same tests
G times in a row). Per run the server sends it only descriptors (SCM_RIGHTS: the program's part of the request
in a memfd, the two pipes to the test process, the program's output file) and plain numbers and a path (its run
directory and limits); it never receives a test, an expected value or the program's code. It forks each program
process ahead of its run, as soon as the last one ended (no run waits for a fork): that process answers its pid
at once, takes the run's spawn message, joins the run's cgroup and becomes the program; the zygote waits for it to
end (the server kills it with the rest of the run) and answers how it ended; what the program leaves behind (a double-forked daemon) is reparented to the server, a
child subreaper, which kills and reaps it as before. One program at a time: the server runs one run at a time.

The program process locks itself down (:func:`.lockdown.lock_down`), and only then reads its part, ``{"code",
"setup", "program_names"}``, from its own descriptor: so the program's memory never holds anything of the tests
but the arguments of the calls the test process makes. Standard library only.
"""
from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket

from .cgroup import join
from .harness import program_harness, tests_harness
from .lockdown import lock_down
from .seccomp import PR_SET_DUMPABLE, PR_SET_PDEATHSIG, prctl

# What the server sends per run besides descriptors: the only keys the zygote accepts, each a number or a path.
SPEC_KEYS = ("run_dir", "cpu_s", "memory_mb", "max_processes", "max_output_kb", "cgroup")
# the program reads its part on fd 5; the run's fds: part, request, reply, output (and, when ``cgroup`` is true,
# the run's cgroup.procs, which the program process writes itself into before it locks down)
_PART_FD, _FDS_PER_RUN = 5, 4
_TESTS_PART_FD = 6  # a test process's request (its fds 3-5: report, request and reply pipes)
_NO_SERVER, _SPAWN_FAILED = 121, 122  # a waiting program's exit codes: the server closed the socket; a bad spawn


class ZygoteGone(OSError):
    """The zygote ended (killed by a program of the server's own uid, or crashed): the server cannot make a clean
    one again (it holds earlier requests), so it answers the run as a server error and exits; the host starts a
    fresh server."""


class Zygote:
    """The server's handle on its zygote: :meth:`send` asks for one program process, :meth:`receive` gives its
    pid, :meth:`program_exit` how it ended."""

    def __init__(self, lockdown_args: dict, keep_fds: tuple[int, ...] = (), join_fd: int = -1,
                 role: str = "program"):
        """Fork the zygote now. ``lockdown_args``: what every program process is locked down with besides its
        run's own limits (``ids``, ``seccomp_filter``, ``streams``); ``keep_fds``: descriptors the zygote keeps
        besides its socket (its /dev/null on 0-2); ``join_fd``: the ``cgroup.procs`` of the one cgroup every
        program joins (-1: none, or one per run, sent with the spawn), which each waiting program writes itself
        into once its run's spawn came (a write of a few microseconds); ``role``: "program", or "tests" (a zygote of test
        processes: its part is the whole request, its descriptors the report, request and reply pipes)."""
        server_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:
            server_end.close()
            try:
                _zygote_main(zygote_end, lockdown_args, keep_fds, join_fd, role)
            finally:
                os._exit(0)
        zygote_end.close()
        self.sock = server_end
        self.pidfd = os.pidfd_open(self.pid)
        self.broken = False  # a run's exchange went wrong: the server answers it and exits
        self._exit: int | None = None  # the current program's wait status, once the zygote told it
        self._pid: int | None = None  # the current program's pid, once its waiting process told it

    def alive(self) -> bool:
        return not self.broken and not select.select([self.pidfd], [], [], 0)[0]

    def _message(self) -> dict:
        try:
            answer = self.sock.recv(4096)
        except OSError as exc:
            self.broken = True
            raise ZygoteGone(f"the zygote is gone ({exc})") from None
        if not answer:
            self.broken = True
            raise ZygoteGone("the zygote is gone (it closed its socket)")
        return json.loads(answer)

    def exit_status(self, pid: int, pidfd: int) -> int:
        """The wait status of the program ``pid`` (watched through ``pidfd``), which has ended: read from its
        zombie while the zygote has not reaped it yet (no wait for the zygote to be scheduled), else the
        zygote's answer. A spawn that failed (its exit code, which a program could also give: then the zygote's
        answer tells) is always the zygote's, which says why."""
        status = _zombie_status(pid, pidfd)
        if status is None or (os.WIFEXITED(status) and os.WEXITSTATUS(status) == _SPAWN_FAILED):
            return self.program_exit(None)
        return status

    def send(self, spec: dict, fds: list[int]) -> None:
        """Ask for a program process: ``spec`` (SPEC_KEYS), ``fds`` [part, request read end, reply write end,
        output file, and the cgroup's procs file when ``spec["cgroup"]``]. The pid is read by :meth:`receive`, so
        that the server forks the test process meanwhile."""
        if set(spec) != set(SPEC_KEYS) or len(fds) != _FDS_PER_RUN + bool(spec["cgroup"]):
            raise ValueError("zygote: a spawn takes exactly the run's directory, limits and four descriptors")
        if self._pid is not None and self._exit is None:  # the last run's answer, read now if not before
            self.program_exit(None)
        self._exit = self._pid = None
        try:
            socket.send_fds(self.sock, [json.dumps(spec).encode()], fds)
        except OSError as exc:
            self.broken = True
            raise ZygoteGone(f"the zygote is gone ({exc})") from None

    def receive(self) -> int:
        """The program process's pid."""
        while self._pid is None:
            self.event()
        return self._pid

    def event(self) -> None:
        """Read the next message: the program's pid (always first), or how it ended."""
        reply = self._message()
        if self._pid is None:
            if type(reply.get("pid")) is not int:
                self.broken = True
                raise OSError(f"the zygote could not fork the program: {reply.get('error')}")
            self._pid = reply["pid"]
            return
        if type(reply.get("error")) is str:  # the program process refused its spawn message
            self.broken = True
            raise OSError(f"the zygote could not start the program: {reply['error']}")
        if type(reply.get("wstatus")) is not int:
            self.broken = True
            raise ZygoteGone("the zygote sent a malformed exit status")
        self._exit = reply["wstatus"]

    def program_exit(self, timeout_s: float | None) -> int | None:
        """The program's wait status once it has ended, waiting at most ``timeout_s`` (None: until it ends, as
        it does once killed); None if it is still running."""
        while self._exit is None:
            if timeout_s is not None and not select.select([self.sock], [], [], max(0.0, timeout_s))[0]:
                return None
            self.event()
        return self._exit

    def close(self) -> None:
        self.sock.close()
        os.close(self.pidfd)
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def _zombie_status(pid: int, pidfd: int) -> int | None:
    """The wait status of an ended process not yet reaped, from /proc/<pid>/stat (its field 52); None once it
    was reaped (or not readable). Checked after the read through ``pidfd``: a process that can still be
    signalled was not reaped, so the pid read was still its own."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        if fields[0] not in (b"Z", b"X"):
            return None
        status = int(fields[49])
        signal.pidfd_send_signal(pidfd, 0)
    except (OSError, IndexError, ValueError):
        return None
    return status


def _zygote_main(sock: socket.socket, lockdown_args: dict, keep_fds: tuple[int, ...], join_fd: int,
                 role: str) -> None:
    """The zygote's loop: fork the next program process, wait for it, answer how it ended; until the server
    closes the socket (the waiting process then exits with _NO_SERVER)."""
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # (bubblewrap's PID namespace takes it too)
    except OSError:
        pass
    prctl(PR_SET_DUMPABLE, 0)
    gc.freeze()  # what it inherited is never traversed by its collector again: fewer pages copied on write
    keep = sorted({sock.fileno(), *keep_fds, *([join_fd] if join_fd >= 0 else [])})
    low = 0
    for fd in keep + [65536]:  # every descriptor but these: the server's request and reply streams above all
        if fd > low:  # (closerange(n, n) would close everything from n up)
            os.closerange(low, fd)
        low = fd + 1
    if lockdown_args.get("seccomp_filter") is not None:
        # no_new_privs and the filter, once, here: every process it forks inherits both (nothing it or a
        # waiting process does before its lockdown is refused by the filter), so no run compiles the filter
        # again; its uid switch is a drop, which no_new_privs allows.
        lockdown_args["seccomp_filter"].install()
        lockdown_args = {**lockdown_args, "seccomp_filter": None}
    while True:
        # The next program process is forked as soon as the last one ended (while the server kills and cleans
        # up its run), so that no run waits for a fork: it answers its own pid, waits for its run's spawn
        # message, and only then joins the run's cgroup (so the kill of the run before, which empties that
        # cgroup, never finds it there) and closes its copy of the socket before it locks down (a program
        # must not write on it).
        pid = os.fork()
        if pid == 0:
            _waiting_program(sock, lockdown_args, role, join_fd)
        _, wstatus = os.waitpid(pid, 0)  # it ends by itself or when the server kills the run
        if os.WIFEXITED(wstatus) and os.WEXITSTATUS(wstatus) == _NO_SERVER:
            return
        try:
            sock.send(b'{"wstatus": %d}' % wstatus)
        except OSError:
            return


def _waiting_program(sock: socket.socket, lockdown_args: dict, role: str, join_fd: int) -> None:
    """A program process before its run: answer this process's pid (ahead of the run: the server reads it once
    it has sent the spawn), wait for the spawn message (the run's limits and descriptors), join the run's
    cgroup (``join_fd``, the one every run of this role joins, or the run's own sent with the spawn), then
    become the run's program. Never returns."""
    try:
        sock.send(b'{"pid": %d}' % os.getpid())
        message, fds, _, _ = socket.recv_fds(sock, 4096, _FDS_PER_RUN + 1)
        if not message:
            raise EOFError
    except (OSError, EOFError):
        os._exit(_NO_SERVER)
    try:
        spec = json.loads(message)
        if set(spec) != set(SPEC_KEYS) or len(fds) != _FDS_PER_RUN + bool(spec["cgroup"]):
            raise ValueError("malformed spawn request")
        join(fds[_FDS_PER_RUN] if spec["cgroup"] else join_fd)  # while still privileged: all it forks is in it
    except Exception as exc:  # noqa: BLE001 - reported to the server, which fails the run and exits
        try:  # (never a program outside its cgroup)
            sock.send(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:300]}).encode())
        finally:
            os._exit(_SPAWN_FAILED)
    sock.close()
    _program_process(spec, fds, lockdown_args, role)


def _program_process(spec: dict, fds: list[int], lockdown_args: dict, role: str) -> None:
    """In the program process (in the run's cgroup already): lock down, then read the program's part from its own
    descriptor and run it. A test process
    (``role`` "tests") likewise, its fds [request, report write end, request write end, reply read end], its
    streams /dev/null, its part the whole request, read from fd 6."""
    part_fd_at = _PART_FD if role == "program" else _TESTS_PART_FD
    try:
        part_fd, a, b, c = fds[:_FDS_PER_RUN]
        null = os.open("/dev/null", os.O_RDONLY if role == "program" else os.O_RDWR)  # its own: no shared file
        placed = ({0: null, 1: c, 2: c, 3: a, 4: b, _PART_FD: part_fd} if role == "program" else
                  {0: null, 1: null, 2: null, 3: a, 4: b, 5: c, _TESTS_PART_FD: part_fd})
        lock_down(spec["run_dir"], placed,
                  cpu_s=int(spec["cpu_s"]), memory_mb=int(spec["memory_mb"]),
                  max_processes=int(spec["max_processes"]), max_output_kb=int(spec["max_output_kb"]),
                  **lockdown_args)
    except BaseException:
        os._exit(120)  # set-up failed: the test process finds the program gone
    try:
        size, chunks = os.fstat(part_fd_at).st_size, []  # a memfd: its size is the part's, read in one go
        while size > 0:
            chunk = os.read(part_fd_at, size)
            if not chunk:
                break
            chunks.append(chunk)
            size -= len(chunk)
        os.close(part_fd_at)
        part = json.loads(b"".join(chunks))
        del chunks
        if role == "program":
            program_harness(part, 3, 4)
        else:
            tests_harness(part, 3, 4, 5)
    finally:  # never fall back into the zygote's code in this forked copy
        os._exit(0)
