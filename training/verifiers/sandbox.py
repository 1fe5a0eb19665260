"""Host side of the code sandbox: starts the fork servers, probes the layers, and runs programs.

One fork server per core (:mod:`training.verifiers.sandbox_server`; the programs run as SANDBOX_USER, the tests
as TESTS_USER), each inside bubblewrap when it works
here (network, PID, IPC and UTS namespaces; a mount namespace with a read-only view of only /usr, /lib*,
/bin, /sbin and the Python installation, and private root-owned /tmp (a tmpfs of ``tmp_mb``) and /dev/shm),
else directly on the host. The servers are driven through :class:`WorkerPool` with an outer deadline: a
server that stops answering is killed (its PID namespace dies with it) and the request fails with
VerifierError.

Which layers are active is probed once at start-up (bubblewrap by running it, seccomp by the server's own
test fork) and copied into every result's details.
"""
from __future__ import annotations

import json
import os
import pwd
import select
import shutil
import subprocess
import sys
import threading
from typing import Any

from training.verifiers.base import VerifierError
from training.verifiers.sandbox_cgroup import CGROUP_IN_SANDBOX, ServerCgroup
from training.verifiers.workers import TaskFailed, WorkerPool, PoolWorker

SANDBOX_USER = "seedbed-sandbox"        # the program processes run as this uid
TESTS_USER = "seedbed-sandbox-tests"   # the test processes as this one: a program can neither signal nor read them
_SERVER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandbox_server")  # run by its __main__
_SERVER_IN_SANDBOX = "/seedbed/sandbox_server"
_BWRAP_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_CHOWN", "CAP_KILL", "CAP_DAC_OVERRIDE", "CAP_FOWNER")


def sandbox_ids(user: str = SANDBOX_USER) -> tuple[int, int]:
    """(uid, gid) the programs (``user``: SANDBOX_USER) or the tests (TESTS_USER) run as. As root the dedicated
    user must exist (the setup script creates both)."""
    if os.geteuid() != 0:
        return os.getuid(), os.getgid()  # cannot switch: recorded as layers["uid_switch"] = False
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise VerifierError(f"code sandbox: user {user!r} does not exist; `./seedbed setup` creates it (as "
                            f"root), as does the Docker image") from None
    if entry.pw_uid == 0:
        raise VerifierError(f"code sandbox: user {user!r} must not be root")
    return entry.pw_uid, entry.pw_gid


def _python_paths() -> tuple[str, str]:
    """(real interpreter path, its installation prefix): what must be visible inside the namespace."""
    exe = os.path.realpath(sys.executable)
    prefix = os.path.realpath(sys.base_prefix)
    return exe, prefix


def bwrap_command(python: str, prefix: str, tmp_mb: int = 0, server_dir: str = _SERVER_DIR,
                  cgroup: str | None = None) -> list[str] | None:
    """The bubblewrap prefix for a fork server, or None when bwrap is not installed. ``tmp_mb``: the size of
    its private /tmp, where its runs' files live (bubblewrap's ``--size``; 0: the kernel's default, half the
    host's RAM). /dev/shm is root-owned and read-only to the sandbox user: a token 1 MB. ``server_dir``: the
    server's folder, bound read-only at /seedbed/sandbox_server (another only for the bench's comparisons);
    ``cgroup``: the server's memory cgroup folder, bound read-write at /seedbed/cgroup (/sys is not mounted)."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return None
    cmd = [bwrap, "--die-with-parent", "--new-session", "--unshare-net", "--unshare-pid", "--unshare-ipc",
           "--unshare-uts", "--unshare-cgroup-try"]
    for top in ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin"):
        if os.path.islink(top):
            cmd += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            cmd += ["--ro-bind", top, top]
    if not prefix.startswith("/usr/"):
        # bwrap would copy the modes of the host's ancestors (e.g. /root is 0700): make them traversable.
        ancestors = []
        parent = os.path.dirname(prefix)
        while parent not in ("/", ""):
            ancestors.append(parent)
            parent = os.path.dirname(parent)
        for folder in reversed(ancestors):
            cmd += ["--perms", "0755", "--dir", folder]
        cmd += ["--ro-bind", prefix, prefix]
    if not python.startswith((prefix + "/", "/usr/")):
        cmd += ["--ro-bind", python, python]
    cmd += ["--ro-bind", server_dir, _SERVER_IN_SANDBOX, "--proc", "/proc", "--dev", "/dev"]
    if cgroup:
        cmd += ["--bind", cgroup, CGROUP_IN_SANDBOX]
    cmd += ["--perms", "0755"]
    if tmp_mb:
        cmd += ["--size", str(tmp_mb * 1024 * 1024)]
    cmd += ["--tmpfs", "/tmp", "--perms", "0755", "--size", str(1024 * 1024), "--tmpfs", "/dev/shm", "--chdir", "/"]
    for cap in _BWRAP_CAPS:
        cmd += ["--cap-add", cap]
    return cmd


_PROBE: dict[str, Any] = {}
_PROBE_LOCK = threading.Lock()


def probe_bwrap() -> dict:
    """Run ``bwrap ... python -c`` once and cache whether it works here (it needs namespaces)."""
    with _PROBE_LOCK:
        if not _PROBE:
            python, prefix = _python_paths()
            cmd = bwrap_command(python, prefix, tmp_mb=16)  # --size too: bubblewrap < 0.5 lacks it
            if cmd is None:
                _PROBE.update(works=False, why="bwrap is not installed")
            else:
                try:
                    done = subprocess.run(cmd + [python, "-I", "-c", "print('ok')"], capture_output=True,
                                          timeout=30, env=_clean_env())
                    ok = done.returncode == 0 and done.stdout.strip() == b"ok"
                    _PROBE.update(works=ok, why="" if ok else done.stderr.decode(errors="replace")[-500:])
                except (OSError, subprocess.TimeoutExpired) as exc:
                    _PROBE.update(works=False, why=f"{type(exc).__name__}: {exc}")
        return dict(_PROBE)


def _clean_env() -> dict:
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


class _JsonConn:
    """Line-delimited JSON over a server's stdin/stdout, shaped like a multiprocessing Connection for the pool."""

    def __init__(self, proc: subprocess.Popen):
        self._proc = proc
        self.closed = False

    def fileno(self) -> int:
        return self._proc.stdout.fileno()

    def poll(self, timeout: float) -> bool:
        return bool(select.select([self.fileno()], [], [], timeout)[0])

    def send(self, message) -> None:
        if message is None:
            self._proc.stdin.close()
            return
        task_id, (request,) = message
        self._proc.stdin.write(json.dumps({"id": task_id, **request}).encode() + b"\n")
        self._proc.stdin.flush()

    def recv(self):
        line = self._proc.stdout.readline()
        if not line:
            raise EOFError("sandbox server closed its output")
        reply = json.loads(line)
        if "ready" in reply:
            return reply
        ok = reply.get("status") != "server_error"
        return reply.get("id"), ok, (reply if ok else f"sandbox server error: {reply.get('error')}")

    def close(self) -> None:
        self.closed = True
        for stream in (self._proc.stdin, self._proc.stdout):
            try:
                stream.close()
            except (OSError, ValueError):
                pass


class SandboxServerProcess(PoolWorker):
    """One fork server (inside bwrap when it works), with the surface WorkerPool drives (``kill``/``stop``
    come from the pool's own worker: killing bwrap ends its PID namespace, taking every sandboxed process)."""

    def __init__(self, uid: int, gid: int, use_bwrap: bool, tmp_mb: int = 0,
                 tests_ids: tuple[int, int] | None = None):
        self.cgroup = ServerCgroup.make()  # its runs' memory cgroups go in it (None: none writable here)
        self.proc = self._start(self.command(uid, gid, tests_ids or (uid, gid), use_bwrap, tmp_mb,
                                             self.cgroup.path if self.cgroup else None))
        self.conn = _JsonConn(self.proc)
        self.ready = False
        self.tasks_done = 0
        self.layers: dict = {}

    @staticmethod
    def command(uid: int, gid: int, tests_ids: tuple[int, int], use_bwrap: bool, tmp_mb: int,
                cgroup: str | None = None) -> list[str]:
        """The server's command line: ``UID GID TESTS_UID TESTS_GID MODE TMP_MB CGROUP``, inside bwrap or not
        (CGROUP ``-``: none); ``-S``: no site-packages (programs import the standard library only, no ``.pth``
        file of the installation runs in the server, and its forks are smaller)."""
        python, prefix = _python_paths()
        ids = [str(uid), str(gid), str(tests_ids[0]), str(tests_ids[1])]
        if use_bwrap:
            return bwrap_command(python, prefix, tmp_mb, cgroup=cgroup) + [
                python, "-I", "-S", _SERVER_IN_SANDBOX, *ids, "bwrap", str(tmp_mb), CGROUP_IN_SANDBOX if cgroup else "-"]
        return [python, "-I", "-S", _SERVER_DIR, *ids, "host", str(tmp_mb), cgroup or "-"]

    def kill(self) -> None:  # (stop ends with a kill too)
        super().kill()
        if self.cgroup:
            self.cgroup.remove()


    @staticmethod
    def _start(cmd: list[str]) -> subprocess.Popen:
        return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_clean_env(),
                                close_fds=True, start_new_session=True)

    def wait_ready(self, timeout: float) -> None:
        if self.ready:
            return
        try:
            if not self.conn.poll(timeout):
                raise TaskFailed(f"sandbox server did not start within {timeout:.0f}s")
            hello = self.conn.recv()
        except (EOFError, OSError, ValueError) as exc:
            self.kill()
            raise TaskFailed(f"sandbox server failed to start (exit code {self.proc.poll()}): {exc}") from None
        except TaskFailed:
            self.kill()
            raise
        self.layers = hello["layers"]
        self.ready = True



class Sandbox:
    """``processes`` fork servers. :meth:`run_many` executes requests and returns raw server replies."""

    def __init__(self, *, processes: int | None = None, user: str = SANDBOX_USER, use_bwrap: str = "auto",
                 max_wall_s: float = 60.0, tmp_mb: int = 0, tests_user: str = TESTS_USER):
        if use_bwrap not in ("auto", "always", "never"):
            raise ValueError(f"code: use_bwrap must be auto, always or never; got {use_bwrap!r}")
        self.uid, self.gid = sandbox_ids(user)
        self.tests_ids = sandbox_ids(tests_user)
        if os.geteuid() == 0 and self.tests_ids[0] == self.uid:
            raise VerifierError(f"code sandbox: the tests' user {tests_user!r} must differ from the programs' "
                                f"{user!r} (a program could signal its tests)")
        probe = probe_bwrap() if use_bwrap != "never" else {"works": False, "why": "disabled"}
        if use_bwrap == "always" and not probe["works"]:
            raise VerifierError(f"code sandbox: bubblewrap required but unusable: {probe['why']}")
        self.use_bwrap = probe["works"]
        self.bwrap_probe = probe
        processes = processes or os.cpu_count() or 1
        if not self.use_bwrap and os.geteuid() == 0:
            # Without a PID namespace per server, killing "every process of the uid" would hit the other
            # servers' runs: one server only.
            processes = 1
        self.processes = processes
        self.tmp_mb = tmp_mb
        self.pool = WorkerPool("sandbox", processes=processes, deadline_s=max_wall_s,
                               worker_factory=lambda: SandboxServerProcess(self.uid, self.gid, self.use_bwrap,
                                                                           tmp_mb, self.tests_ids))

    @property
    def layers(self) -> dict:
        for worker in self.pool._workers:
            if worker.ready:
                return dict(worker.layers)
        return {}

    def run_many(self, requests: list[dict]) -> list:
        """Each item: the server's reply dict, or a TaskTimeout / TaskFailed (the sandbox itself failed)."""
        return self.pool.map([(req,) for req in requests])

    def close(self) -> None:
        self.pool.close()


_SANDBOXES: dict[tuple, Sandbox] = {}
_SANDBOXES_LOCK = threading.Lock()


def shared_sandbox(processes: int | None, user: str, use_bwrap: str, max_wall_s: float,
                   tmp_mb: int = 0, tests_user: str = TESTS_USER) -> Sandbox:
    """One Sandbox per configuration in this process, shared by every code verifier built with it."""
    key = (processes, user, use_bwrap, max_wall_s, tmp_mb, tests_user)
    with _SANDBOXES_LOCK:
        if key not in _SANDBOXES:
            _SANDBOXES[key] = Sandbox(processes=processes, user=user, use_bwrap=use_bwrap, max_wall_s=max_wall_s,
                                      tmp_mb=tmp_mb, tests_user=tests_user)
        return _SANDBOXES[key]
