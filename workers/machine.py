"""What this machine is, measured cheaply and without Django: cores, memory, GPUs (no CUDA context: a forking worker
must not initialise it) and free disk. A leaf module: the worker's capacity report (``workers.capacity``), the
runner's disk-full message (``workers.runner``) and the web app (through ``workers.port``) read it.
"""
from __future__ import annotations

import os

REPORT_EVERY_S = 30.0


def cores() -> int:
    """The CPU cores this process may run on (its affinity), else the machine's."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def memory_mb() -> int:
    """Total RAM (/proc/meminfo), or the memory limit of this process's cgroup when that is lower (a container)."""
    total = 0
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    total = int(line.split()[1]) // 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(limit_file) as fh:
                text = fh.read().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) // 2**20 < (total or 2**62):
            total = int(text) // 2**20
        break
    return total


def gpus() -> int:
    """NVIDIA GPUs this process may use, without touching CUDA (a forking worker must not initialise it):
    CUDA_VISIBLE_DEVICES or NVIDIA_VISIBLE_DEVICES when set, else the driver's list of GPUs, else 0."""
    for name in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"):
        value = os.environ.get(name)
        if value is None or (name == "NVIDIA_VISIBLE_DEVICES" and value.strip() in ("all", "")):
            continue
        if value.strip() in ("", "none", "void", "-1"):
            return 0
        return len([d for d in value.split(",") if d.strip()])
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def measure() -> dict:
    """This machine as a worker reports it: {"cores", "memory_mb", "gpus"}."""
    return {"cores": cores(), "memory_mb": memory_mb(), "gpus": gpus()}


def disk_free(folder: str) -> int | None:
    """Free bytes of the disk holding ``folder`` (or its nearest existing parent); None if unknown."""
    import shutil

    while folder and not os.path.exists(folder):
        folder = os.path.dirname(folder.rstrip("/")) or "/"
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def human_bytes(n: int | None) -> str:
    """Bytes in words.

    >>> human_bytes(0), human_bytes(3 * 1024 ** 2), human_bytes(None)
    ('0 B', '3.0 MiB', 'unknown')
    """
    if n is None:
        return "unknown"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
