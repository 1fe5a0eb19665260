"""One memory bound per sandboxed process tree (docs/architecture.md#verifiers): a memory cgroup per run and role
(the program and every process it forks; the tests and theirs), made by the trusted server before the process
starts, each process placed in it while still privileged (it writes ``0`` to the cgroup's ``cgroup.procs``
through a descriptor the server opened), its peak read after the run, then every process in it killed and the
cgroup removed. An ``RLIMIT_AS`` alone bounds each process, not the tree: six children of 120 MB each reached
830 MB at ``memory_mb: 256``.

Both kinds of hierarchy: cgroup v2 (``memory.max``, ``memory.swap.max`` 0, ``memory.peak``) and v1
(``memory.limit_in_bytes``, ``memory.memsw.limit_in_bytes`` where swap accounting exists, so swap adds nothing,
``memory.max_usage_in_bytes``). The parent folder is the host's (training/verifiers/sandbox.py makes one per
server in its own memory cgroup and binds it into bubblewrap); :class:`RunCgroups` probes it at start-up. With
none writable, :func:`fallback_limits` divides ``memory_mb`` among the processes instead. Standard library only.
"""
from __future__ import annotations

import os
import select
import signal

# Without a cgroup each process gets memory_mb / processes of address space, but never under this much (a forked
# Python process maps ~30 MB before it runs anything): the processes allowed are lowered to fit instead.
MIN_PROCESS_MB = 128


def fallback_limits(memory_mb: int, max_processes: int) -> tuple[int, int]:
    """(address space per process in MB, processes) so that processes × address space <= ``memory_mb`` with no
    cgroup: ``memory_mb // processes``, the processes lowered until each has at least MIN_PROCESS_MB.

    >>> fallback_limits(1024, 32), fallback_limits(1024, 4), fallback_limits(64, 8)
    ((128, 8), (256, 4), (64, 1))
    """
    processes = max(1, min(max_processes, memory_mb // MIN_PROCESS_MB))
    return memory_mb // processes, processes


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _read(path: str) -> str:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 65536).decode()
    finally:
        os.close(fd)


class RunCgroups:
    """The runs' cgroups under ``parent`` (a folder of a cgroup hierarchy, this server's own): ``version`` 2 or
    1 once the probe made, limited and removed a child, else None (``why`` says what failed)."""

    def __init__(self, parent: str | None):
        self.parent, self.version, self.why, self.swap = parent, None, "", False
        if not parent or parent == "-":
            self.why = "no memory cgroup was given to the server"
            return
        try:
            if os.path.exists(os.path.join(parent, "cgroup.controllers")):
                if "memory" not in _read(os.path.join(parent, "cgroup.controllers")).split():
                    raise OSError("cgroup v2 without the memory controller")
                _write(os.path.join(parent, "cgroup.subtree_control"), "+memory")
                self.version = 2
                self.swap = os.path.exists(os.path.join(parent, "memory.swap.max"))
            elif os.path.exists(os.path.join(parent, "memory.limit_in_bytes")):
                self.version = 1
                self.swap = os.path.exists(os.path.join(parent, "memory.memsw.limit_in_bytes"))
            else:
                raise OSError(f"{parent} is not a memory cgroup")
            probe = self.create("probe", 64 << 20)
            self.remove(probe)
        except OSError as exc:
            self.version, self.why = None, f"{type(exc).__name__}: {exc}"[:300]

    @property
    def layer(self) -> str | None:
        return f"cgroup v{self.version}" if self.version else None

    def create(self, name: str, limit_bytes: int) -> str:
        """A fresh cgroup ``name`` limited to ``limit_bytes`` of memory, swap adding nothing."""
        path = os.path.join(self.parent, name)
        try:
            os.mkdir(path)
        except FileExistsError:  # a run the server could not clean up: emptied and made again
            self.remove(path)
            os.mkdir(path)
        try:
            if self.version == 2:
                _write(os.path.join(path, "memory.max"), str(limit_bytes))
                if self.swap:
                    _write(os.path.join(path, "memory.swap.max"), "0")
            else:
                _write(os.path.join(path, "memory.limit_in_bytes"), str(limit_bytes))
                if self.swap:  # memory + swap: at most the same, so swap adds nothing
                    _write(os.path.join(path, "memory.memsw.limit_in_bytes"), str(limit_bytes))
        except OSError:
            self.remove(path)
            raise
        return path

    @property
    def reusable(self) -> bool:
        """Whether one pair of cgroups serves every run of the server: on v1, whose peak is reset by writing 0 to
        ``memory.max_usage_in_bytes``; on v2 ``memory.peak`` resets only per open file, so each run makes its
        own."""
        return self.version == 1

    def set_limit(self, path: str, limit_bytes: int) -> None:
        """A v1 cgroup's limit changed to ``limit_bytes`` (swap adding nothing): memory+swap is never below
        memory, so it is raised first when the limit grows and lowered last when it shrinks."""
        memory = os.path.join(path, "memory.limit_in_bytes")
        files = [memory]
        if self.swap:
            memsw = os.path.join(path, "memory.memsw.limit_in_bytes")
            current = int(_read(memory).split()[0])
            files = [memsw, memory] if limit_bytes > current else [memory, memsw]
        for name in files:
            _write(name, str(limit_bytes))

    @staticmethod
    def reset_peak(path: str) -> None:
        """A reused v1 cgroup's peak set back to its usage now (what the run before it left is freed)."""
        _write(os.path.join(path, "memory.max_usage_in_bytes"), "0")

    @staticmethod
    def procs(path: str) -> list[int]:
        """The live processes in the cgroup (v1 lists no zombie)."""
        return [int(p) for p in _read(os.path.join(path, "cgroup.procs")).split()]

    @staticmethod
    def procs_fd(path: str) -> int:
        """A descriptor on the cgroup's ``cgroup.procs``: the process given it writes ``0`` to join."""
        return os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)

    def peak_bytes(self, path: str) -> int | None:
        """The most memory the cgroup's processes held together (v1: max_usage_in_bytes; v2: memory.peak,
        kernels from 5.19), None where the kernel does not keep it."""
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        try:
            return int(_read(os.path.join(path, name)).split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def remove(self, path: str) -> None:
        """Kill whatever is left in the cgroup, then remove it (a cgroup with a process in it cannot be)."""
        for _ in range(200):
            try:
                pids = [int(p) for p in _read(os.path.join(path, "cgroup.procs")).split()]
            except FileNotFoundError:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                os.rmdir(path)
                return
            except FileNotFoundError:
                return
            except OSError:  # EBUSY: a killed process not yet gone
                select.select([], [], [], 0.005)
        raise OSError(f"cgroup {path} could not be removed")


def join(procs_fd: int) -> None:
    """In a freshly forked sandbox process, still privileged: move this process (and so all it forks) into the
    cgroup whose ``cgroup.procs`` ``procs_fd`` is (-1: none), then close it."""
    if procs_fd < 0:
        return
    try:
        os.write(procs_fd, b"0")
    finally:
        os.close(procs_fd)
