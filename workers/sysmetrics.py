"""System metrics of a run, recorded like its other metrics: the CPU and memory its training process tree uses
(the run's process, and what it started: torchrun and its ranks, an engine's workers), read from /proc by the
worker that supervises it, and a GPU's utilisation and memory where ``nvidia-smi`` answers.

    sampler = ProcessTreeSampler(pid)
    sampler.sample()   # {"system/cpu_percent": 187.5, "system/rss_mb": 1204.2} (CPU % over the time since the
                       # last sample: 200 = two cores busy), or {} when the process is gone
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time

TICKS = os.sysconf("SC_CLK_TCK")
PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20


def _stat(pid: int) -> tuple[int, float, float] | None:
    """(parent pid, CPU seconds used, resident MB) of a live process, from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # after "pid (comm)": state ppid ... utime(12) stime(13) ... rss(22), counted from the state field at 0
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS, int(fields[21]) * PAGE_MB


def process_tree(root: int) -> dict[int, tuple[float, float]]:
    """{pid: (CPU seconds, resident MB)} of ``root`` and all its descendants."""
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = _stat(int(name))
            if stat is not None:
                stats[int(name)] = stat
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    tree, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in stats and pid not in tree:
            tree[pid] = stats[pid][1:]
            todo += children.get(pid, [])
    return tree


def stopped_in_tree(root: int) -> list[int]:
    """The processes of ``root``'s tree (it and its descendants) that are stopped: state T (SIGSTOP, SIGTSTP) or
    t (held by a tracer), read from /proc/PID/stat. A stopped process runs nothing, so it reads no stop flag and
    acts on no SIGTERM until it is continued (SIGCONT) or killed (SIGKILL)."""
    states, children = {}, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        states[int(name)] = fields[0]
        children.setdefault(int(fields[1]), []).append(int(name))
    stopped, todo, seen = [], [root], set()
    while todo:
        pid = todo.pop()
        if pid in states and pid not in seen:
            seen.add(pid)
            if states[pid] in ("T", "t"):
                stopped.append(pid)
            todo += children.get(pid, [])
    return sorted(stopped)


def gpu_metrics() -> dict[str, float]:
    """Utilisation (%) and memory used (MB) of the GPUs ``nvidia-smi`` reports (summed memory, mean
    utilisation); {} without one."""
    if not shutil.which("nvidia-smi"):
        return {}
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=5).stdout
        rows = [[float(x) for x in line.split(",")] for line in out.strip().splitlines() if line.strip()]
    except (OSError, ValueError, subprocess.SubprocessError):
        return {}
    if not rows:
        return {}
    return {"system/gpu_util_percent": sum(r[0] for r in rows) / len(rows),
            "system/gpu_memory_mb": sum(r[1] for r in rows)}


class ProcessTreeSampler:
    """CPU % and resident memory of a process tree between samples (CPU time of processes that ended between two
    samples is not counted: a sample is a lower bound)."""

    def __init__(self, root: int, clock=time.monotonic):
        self.root, self.clock = root, clock
        self._last: tuple[float, dict[int, float]] | None = None

    def sample(self) -> dict[str, float]:
        tree = process_tree(self.root)
        if not tree:
            return {}
        now = self.clock()
        cpu = {pid: seconds for pid, (seconds, _) in tree.items()}
        out = {"system/rss_mb": round(sum(rss for _, rss in tree.values()), 1)}
        if self._last is not None and now > self._last[0]:
            before = self._last[1]
            used = sum(seconds - before.get(pid, 0.0) for pid, seconds in cpu.items())
            out["system/cpu_percent"] = round(100 * max(0.0, used) / (now - self._last[0]), 1)
        self._last = (now, cpu)
        return {**out, **gpu_metrics()}
