"""How a training process ended, in words a run's error can carry.

A training process killed by a signal it did not ask for (SIGKILL from the kernel's out-of-memory killer, a
SIGSEGV or SIGBUS in native code) did not fail by itself: its attempt was lost, as when its worker dies, and
the run restarts from its last checkpoint (``runs.services.run_record_exit``). The error then names the
signal first; for SIGKILL it says whether the kernel recorded an OOM kill while the process ran (its counters,
``oom_kills``) and the peak resident memory the run had reported. The log lines that follow are the last
meaningful ones: progress bars (tqdm's ``Loading weights: 100%|████| 12/12 [00:00<00:00, 3.1it/s]``) are
left out.

    >>> meaningful_tail("step 1\\nLoading weights:  50%|#####     | 1/2\\rLoading weights: 100%|##########| 2/2\\n"
    ...                 "  12/40 [00:03<00:07, 3.9it/s]\\n\\nstep 2")
    'step 1\\nstep 2'
    >>> signal_line(-11, None, None, None)
    'training process killed by SIGSEGV'
"""
from __future__ import annotations

import os
import re
import signal
from pathlib import Path

# A progress bar's line: "NN%|", "NN/MM [", "it/s]" / "s/it]", or the block characters bars are drawn with.
PROGRESS_LINE = re.compile(r"\d+%\||\d+/\d+ \[|\d(it/s|s/it)\]|[\u2580-\u259f]")
TAIL_READ_BYTES = 256 * 1024


def meaningful_tail(text: str, max_lines: int = 30, max_chars: int = 4000) -> str:
    """The last ``max_lines`` non-blank lines of ``text`` that are not progress bars (a carriage return starts a
    new line: a bar redrawn in place is one line per redraw), at most ``max_chars`` characters."""
    kept = [line.rstrip() for line in text.splitlines() if line.strip() and not PROGRESS_LINE.search(line)]
    return "\n".join(kept[-max_lines:])[-max_chars:]


def log_tail(path, max_chars: int = 4000) -> str:
    """The meaningful end of a log file (``meaningful_tail`` of its last 256 KB); "" when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - TAIL_READ_BYTES))
            text = fh.read().decode(errors="replace")
    except OSError:
        return ""
    return meaningful_tail(text, max_chars=max_chars)


def _counter(path: str, name: str) -> int | None:
    """The value of the ``name N`` line of a kernel counters file (/proc/vmstat, memory.events, ...)."""
    try:
        with open(path) as fh:
            for line in fh:
                key, _, value = line.partition(" ")
                if key == name:
                    return int(value)
    except (OSError, ValueError):
        return None
    return None


def oom_kills(root: str = "/") -> dict[str, int]:
    """The kernel's counts of out-of-memory kills readable here, by where they were read: ``vmstat`` (the whole
    machine, /proc/vmstat), ``cgroup`` (this process's memory cgroup and those below it: v2's memory.events,
    v1's memory.oom_control). {} when none is readable. Cheap: a few small files."""
    counts = {}
    machine = _counter(os.path.join(root, "proc/vmstat"), "oom_kill")
    if machine is not None:
        counts["vmstat"] = machine
    try:
        with open(os.path.join(root, "proc/self/cgroup")) as fh:
            lines = fh.read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        hierarchy, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        path = path.lstrip("/")
        if hierarchy == "0" and not controllers:  # cgroup v2
            candidates = [("sys/fs/cgroup", path, "memory.events"), ("sys/fs/cgroup", "", "memory.events")]
        elif "memory" in controllers.split(","):  # cgroup v1
            candidates = [("sys/fs/cgroup/memory", path, "memory.oom_control"),
                          ("sys/fs/cgroup/memory", "", "memory.oom_control")]
        else:
            continue
        for base, sub, name in candidates:  # (a container sees its own cgroup as the root of the mount)
            value = _counter(os.path.join(root, base, sub, name), "oom_kill")
            if value is not None:
                counts["cgroup"] = value
                break
        if "cgroup" in counts:
            break
    return counts


def killed_rank(message: str) -> tuple[str, int] | None:
    """("rank R", signal number) from the first line of what a training process said when one of its ranks was
    killed ("rank R killed by SIGNAL": training.engines.process.RankLost); None when it says otherwise.

    >>> killed_rank("rank 1 killed by SIGKILL\\n(local rank 1, pid 42)"), killed_rank("boom")
    (('rank 1', 9), None)
    """
    found = re.match(r"(rank \d+) killed by (SIG[A-Z0-9]+)$", message.partition("\n")[0].strip())
    if not found:
        return None
    try:
        return found.group(1), int(signal.Signals[found.group(2)])
    except KeyError:
        return None


def signal_line(returncode: int, oom_before: dict | None, oom_after: dict | None, peak_rss_mb: float | None,
                who: str = "training process") -> str:
    """The error's first line for a process (``who``: the training process, or "rank R" of its ranks) that
    ``returncode`` (negative) says a signal killed. For SIGKILL: whether the kernel recorded an OOM kill between
    ``oom_before`` and ``oom_after`` (``oom_kills``), with the peak resident memory the run had reported."""
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    line = f"{who} killed by {name}"
    if name != "SIGKILL":
        return line
    peak = f"peak RSS {peak_rss_mb:.0f} MB" if peak_rss_mb else "no memory use reported yet"
    common = sorted(set(oom_before or {}) & set(oom_after or {}))
    rose = [k for k in common if oom_after[k] > oom_before[k]]
    if rose:
        kills = max(oom_after[k] - oom_before[k] for k in rose)
        return (f"{line} (out of memory? the kernel recorded {kills} out-of-memory kill(s) ({', '.join(rose)}) while "
                f"it ran; {peak})")
    if not common:
        return f"{line} (out of memory? the kernel's out-of-memory record is not readable here; {peak})"
    return f"{line} (not the kernel's out-of-memory killer: it recorded no OOM kill while it ran; {peak})"


def parent_pid(pid: int) -> int | None:
    """The parent pid of ``pid`` from /proc (None if it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # /proc/PID/stat: "pid (comm) state ppid ..."; comm may contain spaces, so split after the last ")".
    return int(stat.rsplit(")", 1)[1].split()[1])
