"""The host's side of the sandbox's memory cgroups (docs/architecture.md#verifiers): one folder per fork server,
made in this process's own memory cgroup (so the runs stay within whatever bounds the worker), handed to the
server (bound read-write into bubblewrap, which mounts no /sys), and removed with everything in it when the
server ends. The server makes each run's cgroups in it and probes it (``sandbox_server.cgroup``); where none
can be made here the server is given none and bounds each process instead, saying so in its ``layers``.

cgroup v2 is used where its hierarchy has the memory controller (and this process's cgroup can pass it down),
else cgroup v1's memory hierarchy.
"""
from __future__ import annotations

import atexit
import itertools
import os

from training.verifiers.sandbox_server.cgroup import RunCgroups

CGROUP_IN_SANDBOX = "/seedbed/cgroup"
_COUNTER = itertools.count(1)


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(fstype, mount point, mount root, super options) of each cgroup mount, from /proc/self/mountinfo."""
    found = []
    try:
        with open("/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            found.append((tail[0], fields[4], fields[3], set(tail[2].split(","))))
    return found


def _own_paths() -> dict[str, str]:
    """This process's cgroup per hierarchy: {"2": path} for the unified one, {"memory": path} for v1's."""
    paths = {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f.read().splitlines():
                number, controllers, path = line.split(":", 2)
                if number == "0" and not controllers:
                    paths["2"] = path
                elif "memory" in controllers.split(","):
                    paths["memory"] = path
    except (OSError, ValueError):
        pass
    return paths


def memory_cgroup_base() -> str | None:
    """The folder of this process's own memory cgroup where children with a memory limit can be made: cgroup v2
    when its controllers include memory, else v1's memory hierarchy; None when neither is mounted here."""
    own = _own_paths()
    candidates = []
    for fstype, point, root, options in _mounts():
        key = "2" if fstype == "cgroup2" else "memory" if "memory" in options else None
        if key is None or key not in own:
            continue
        relative = os.path.relpath(own[key], root) if own[key].startswith(root) else None
        if relative is None:
            continue
        path = os.path.normpath(os.path.join(point, relative))
        if key == "2":
            try:
                with open(os.path.join(path, "cgroup.controllers")) as f:
                    if "memory" not in f.read().split():
                        continue
            except OSError:
                continue
        candidates.append((key != "2", path))
    return min(candidates)[1] if candidates else None


def _remove_stale(base: str) -> None:
    """The folders of processes that ended without removing theirs (killed): ``seedbed-sandbox-<pid>-<n>`` of a
    pid no longer running."""
    try:
        names = [e.name for e in os.scandir(base) if e.is_dir() and e.name.startswith("seedbed-sandbox-")]
    except OSError:
        return
    for name in names:
        pid = name.split("-")[2]
        if pid.isdigit() and int(pid) != os.getpid() and not os.path.exists(f"/proc/{pid}"):
            ServerCgroup(os.path.join(base, name)).remove()


class ServerCgroup:
    """One fork server's folder of cgroups."""

    def __init__(self, path: str):
        self.path = path

    @classmethod
    def make(cls) -> "ServerCgroup | None":
        """A fresh folder ``seedbed-sandbox-<pid>-<n>`` in this process's memory cgroup, or None where none can
        be made (no memory cgroup mounted, or not writable here: the server then bounds each process)."""
        base = memory_cgroup_base()
        if base is None:
            return None
        if os.path.exists(os.path.join(base, "cgroup.controllers")):
            try:  # v2: pass the memory controller down (refused where this cgroup holds processes: not root)
                with open(os.path.join(base, "cgroup.subtree_control"), "w") as f:
                    f.write("+memory")
            except OSError:
                return None
        _remove_stale(base)
        path = os.path.join(base, f"seedbed-sandbox-{os.getpid()}-{next(_COUNTER)}")
        try:
            os.mkdir(path)
        except OSError:
            return None
        made = cls(path)
        atexit.register(made.remove)  # servers not stopped before exit end with it (their PDEATHSIG)
        return made

    def remove(self) -> None:
        """Every run cgroup the server left (it was killed mid-run), emptied and removed, then the folder."""
        runs = RunCgroups(None)
        try:
            children = [e.path for e in os.scandir(self.path) if e.is_dir()]
        except OSError:
            return
        for child in children:
            try:
                runs.remove(child)
            except OSError:
                pass
        try:
            runs.remove(self.path)
        except OSError:
            pass
