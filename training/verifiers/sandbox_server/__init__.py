"""The sandbox fork server: runs untrusted Python programs against tests, one run at a time, and reports
raw outcomes.

Standard library only: it runs as ``python -I -S sandbox_server UID GID TESTS_UID TESTS_GID MODE [TMP_MB [CGROUP]]`` (this
folder, through its ``__main__.py``) with a clean environment, inside bubblewrap's namespaces when available
(MODE ``bwrap``, with a private /tmp of TMP_MB) or directly on the host (MODE ``host``). It is trusted (root, or
the caller's uid) and not dumpable; everything it forks is not trusted.

Protocol: JSON lines. Start-up: the server prints ``{"ready": true, "layers": {...}}``. Then for each line
read on stdin, ``{"id", "code", "setup", "program_names", "entry_point", "steps", "timeout_s", "memory_mb",
"max_output_kb", "max_processes", "max_report_kb"}``, it prints one line ``{"id", "status", "reports",
"output_tail", "wall_s", "tmp_full", ...}``. ``steps`` carry only what the test process must *compute* (a
statement to run, an expression to evaluate, a function to call with arguments): expected values of
``assert x == <literal>`` never enter a sandbox, and the trusted host compares.

Who holds what. At start-up, before it reads any request, the server forks the **zygote** (:mod:`.zygote`): every
program process is forked from it, so no program's memory ever held a request, nor the freed remains of an
earlier one (a fork inherits its parent's uncleared heap, and a GRPO group sends the same tests G times in a
row). Per run the zygote is sent only descriptors and plain numbers (the run's directory and limits); the
program process locks itself down and only then reads its **part** of the request, ``{"code", "setup",
"program_names"}``, from a memfd of its own: never the steps, so nothing of the tests but the arguments of the
calls made to it. The test process is forked by a second zygote (also forked at start-up, before any request;
its waiting test process joins the tests' cgroup before its run and reads the whole request from a memfd only
once forked) and runs as a **second uid**
(``TESTS_UID``), so the program can neither signal it nor open anything of it; the two share no readable file
(the program's output is its own unnamed file, the tests' goes to /dev/null). Without a uid switch (a non-root
server) both run as the caller: ``layers["tests_apart"]`` says False.

Per run: two directories (each 0700, owned by its process's uid: the program's fresh, the tests' one for the
server's runs while they leave it empty), two memory cgroups of ``memory_mb`` (the program and all it forks; the
tests and theirs: :mod:`.cgroup`, where the host gave the server a cgroup folder, one pair for all runs on v1,
else ``memory_mb / max_processes`` of address space a process), each process in its own session and
process group, with rlimits (CPU, address space, processes, file size, open files, core 0), only its own fds,
groups dropped, uid/gid switched, not dumpable, no_new_privs, a seccomp filter (no network sockets, ptrace,
process_vm_*, namespaces, mount, exec, io_uring, bpf, System V IPC and POSIX message queues, ...) and a clean
environment:

* the program process runs the set-up code and the program, then answers ``get``/``call`` requests from the
  test process, one JSON line each way on a pipe pair (fds 3 and 4): all it ever gives is JSON;
* the test process runs the set-up code and the steps, reaching the program only through that pipe pair and
  decoding its answers as plain data (:func:`from_wire`), and writes one JSON report per step (its value or
  error, and whether it reached the program) on the only pipe to the server (fd 3), which the program
  process has no way to reach.

The server reads the reports until the test process exits or the wall-clock timeout, then kills both
groups and every process of the two sandbox uids, reaps orphans (it is a child subreaper; each zygote reaps its
process and tells the server how it ended), notes whether the run filled /tmp, and deletes the run directories
(and, in host mode, anything the uids left in /tmp and /dev/shm). A zygote that ended cannot be made clean again
by a server that has held requests: the server answers the run and exits, and the host starts a fresh one.

The modules: :mod:`.server` (the trusted side: the runs' processes, their limits, reading reports, killing and
cleaning up), :mod:`.cgroup` (the runs' memory cgroups), :mod:`.zygote` (the program and test processes' parents), :mod:`.lockdown` (how a forked child becomes a
sandboxed process), :mod:`.harness` (the two sandboxed processes), :mod:`.wire` (the plain-data values and line
I/O between them) and :mod:`.seccomp` (the filter). See docs/architecture.md#verifiers.
"""
from __future__ import annotations

from .harness import ProgramError, ProgramFault
from .seccomp import SeccompFilter, build_seccomp_filter, install_seccomp
from .server import Server, main
from .wire import to_wire, from_wire

__all__ = ["ProgramError", "ProgramFault", "SeccompFilter", "Server", "to_wire", "build_seccomp_filter",
           "from_wire", "install_seccomp", "main"]
