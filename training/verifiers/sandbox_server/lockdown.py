"""How a forked child of the sandbox becomes a sandboxed process (docs/architecture.md#verifiers): its own session,
only the descriptors it is given, rlimits, groups dropped and uid/gid switched, not dumpable, no_new_privs and the
seccomp filter, a clean environment. The test process is locked down by the server, the program process by the
zygote, with the same function. Standard library only."""
from __future__ import annotations

import fcntl
import gc
import os
import resource
import signal
import sys

from .seccomp import PR_SET_DUMPABLE, prctl


def place_fds(fds: dict[int, int]) -> None:
    """``fds`` (target number -> open fd) become the process's only descriptors: each moved to a number >= 256
    first, so that no placement overwrites another's source, then to its target; everything above is closed."""
    moved = {target: fcntl.fcntl(fd, fcntl.F_DUPFD, 256) for target, fd in fds.items()}
    for target, fd in moved.items():
        os.dup2(fd, target)
    os.closerange(max(fds) + 1, 65536)


def lock_down(run_dir: str, fds: dict[int, int], *, cpu_s: int, memory_mb: int, max_processes: int,
              max_output_kb: int, ids: tuple[int, int] | None, seccomp_filter, streams) -> None:
    """Lock this (freshly forked) process down, in this order: session, directory and descriptors, rlimits
    (CPU ``cpu_s``, address space ``memory_mb``, processes of its uid, file size, 64 open files, no core), groups
    dropped and uid/gid switched to ``ids`` (None: keep the caller's, when the server is not root), not dumpable
    (no other process of its uid may open its /proc/<pid>/mem, fd or environ entries), the seccomp filter
    (``seccomp_filter``, a SeccompFilter or None), a clean environment and fresh streams on fds 0-2
    (``streams``: made once by the server before any request, so their buffers are empty). Raises on failure:
    the caller exits at once (the host then sees an infrastructure failure)."""
    # The objects it inherited (the server's or the zygote's) are left out of its garbage collector's passes,
    # so that a collection does not touch, and copy on write, every page of them; its own objects are collected
    # as usual.
    gc.freeze()
    os.setsid()
    os.chdir(run_dir)
    place_fds(fds)
    mem = memory_mb * 1024 * 1024
    for limit, value in ((resource.RLIMIT_CPU, (cpu_s, cpu_s + 1)), (resource.RLIMIT_AS, (mem, mem)),
                         (resource.RLIMIT_NPROC, (max_processes,) * 2),
                         (resource.RLIMIT_FSIZE, (max_output_kb * 1024,) * 2),
                         (resource.RLIMIT_NOFILE, (64, 64)), (resource.RLIMIT_CORE, (0, 0))):
        resource.setrlimit(limit, value)
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a closed pipe is an EPIPE error, not a death
    if ids is not None:
        uid, gid = ids
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    prctl(PR_SET_DUMPABLE, 0)  # ptrace and process_vm_* are refused by the seccomp filter besides
    if seccomp_filter is not None:
        seccomp_filter.install()
    os.environ.clear()
    os.environ.update({"PATH": "/usr/bin:/bin", "HOME": run_dir, "LANG": "C.UTF-8", "TMPDIR": run_dir})
    sys.stdin, sys.stdout, sys.stderr = streams
    sys.argv = ["<program>"]
    sys.setrecursionlimit(10000)
