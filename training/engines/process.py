"""External engines are processes Seedbed owns (docs/architecture.md#engines-and-distribution): started in their own process group, their events
tailed from a JSONL file (``training.engines.events``), stopped cooperatively through a stop file, then by
signal, and their ending recorded by Seedbed whatever their exit code.

``run_process`` is the one supervisor every external engine (trl, verl, command) goes through:
1. whatever an earlier attempt of the same run left running (processes marked with the run's folder) is killed;
2. the command starts in a new session (its own process group), output to the run's engine log, with
   PDEATHSIG, so it dies with the training process that started it;
3. every ``poll_s`` its new events go to the sink: metrics, samples, checkpoints inside the run folder;
4. once ``should_stop()`` says so, the stop file is created (the engine saves a checkpoint and exits: TRL's
   callback does); after ``grace_s`` the group gets SIGTERM, ``term_s`` later SIGKILL;
5. once the engine's leader has exited, every process still marked with the run's folder is killed (its
   group, and what left the group: Ray's workers, orphans);
6. a stopped run is "stopped" even when the engine then exits non-zero (torchrun does after a signal); a run
   that was not asked to stop and exits non-zero raises EngineFailed with the tail of its log.
"""
from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import time
from typing import Callable, Sequence

from training.engines.events import EventReader

STOP_FILE = "STOP"
EVENTS_FILE = "events.jsonl"
PID_FILE = "engine.pid"
LOG_FILE = "engine.log"
RUN_DIR_ENV = "SEEDBED_RUN_DIR"


class EngineFailed(RuntimeError):
    """The engine's process exited with an error while nobody asked it to stop."""


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, sig)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def kill_leftover(out_dir: str) -> bool:
    """Kill whatever an earlier attempt of this run started and left running (its training process was killed
    with no chance to stop it): every process carrying this run's folder in its environment
    (``kill_marked``), so a recycled pid is never hit. True when something was killed."""
    return bool(kill_marked(out_dir))


def kill_marked(out_dir: str) -> list[int]:
    """SIGKILL every process whose environment carries ``SEEDBED_RUN_DIR=<out_dir>``: the engine and all it
    started, including what left its process group (Ray starts its workers in sessions of their own) or was
    orphaned when its parent died. This process is never among them. Returns the pids killed."""
    marker = f"{RUN_DIR_ENV}={os.path.abspath(out_dir)}".encode()
    killed = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                if marker not in fh.read().split(b"\0"):
                    continue
            os.kill(int(name), signal.SIGKILL)
            killed.append(int(name))
        except (OSError, ProcessLookupError):
            continue  # gone meanwhile, or not ours to read
    return killed


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def log_tail(path: str, max_chars: int = 4000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - max_chars))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def root_cause(log: str) -> str:
    """The line that says why an engine failed. torchrun's own report names the rank that failed first ("Root
    Cause (first observed failure)": its rank, exit code and signal); with it comes that rank's last error line,
    if it printed one. Otherwise the last "...Error: ..." line, before the launcher's own report.

    >>> root_cause("[rank0]: OSError: no weights in /m\\nTraceback...\\nChildFailedError: \\n")
    '[rank0]: OSError: no weights in /m'
    >>> root_cause("Root Cause (first observed failure):\\n[0]:\\n  host      : vm\\n  rank      : 1 (local_rank: 1)\\n"
    ...            "  exitcode  : -9 (pid: 42)  (SIGKILL)\\n  traceback : Signal 9 (SIGKILL) received by PID 42\\n")
    'rank 1 (local_rank 1, host vm, exit code -9): Signal 9 (SIGKILL) received by PID 42'
    """
    lines = [ln.strip() for ln in log.splitlines()]
    causes = [ln for ln in lines if re.search(r"\w+(Error|Exception|Exit)\b: \S", ln) and "ChildFailedError" not in ln]
    report = log.rsplit("Root Cause (first observed failure)", 1)
    if len(report) == 2:
        fields = dict(re.findall(r"^\s*(\w+)\s*: (.*?)\s*$", report[1], flags=re.M))
        m = re.match(r"(\d+) \(local_rank: (\d+)\)", fields.get("rank", ""))
        if m:
            rank, code = m.group(1), fields.get("exitcode", "?").split(" ")[0]
            where = f"rank {rank} (local_rank {m.group(2)}, host {fields.get('host', '?')}, exit code {code})"
            trace = fields.get("traceback", "")
            if trace.startswith("Signal"):
                return f"{where}: {trace}"[:500]
            own = ([c for c in causes if c.startswith(f"[rank{rank}]:")] or
                   [c for c in causes if not c.startswith("[rank")])
            return (f"{own[-1]} ({where})" if own else f"{where} failed")[:500]
    return causes[-1][:500] if causes else (lines[-1][:500] if lines else "(no output)")


def inside(path: str, root: str) -> bool:
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def run_process(argv: Sequence[str], *, out_dir: str, sink, should_stop: Callable[[], bool],
                env: dict | None = None, grace_s: float = 20.0, term_s: float = 5.0, poll_s: float = 0.25,
                step_of: Callable[[int], int] = lambda s: s, on_engine_config: Callable[[dict], None] | None = None,
                on_ranks: Callable[[int, list], None] | None = None, proc_dir: str | None = None):
    """Run ``argv`` as the run's engine until it exits; returns (status, last step): "succeeded" or
    "stopped". ``step_of`` maps the engine's step numbers onto Seedbed's (identity for the contract).
    ``proc_dir`` (default: the run folder): where this process's events, stop file, pid and log live and what
    marks its processes; one node of a multi-node run has its own, beside the others' in the shared run folder."""
    out_dir = os.path.abspath(out_dir)
    proc_dir = os.path.abspath(proc_dir or out_dir)
    os.makedirs(proc_dir, exist_ok=True)
    if kill_leftover(proc_dir):
        sink.on_log("killed the engine processes an earlier attempt of this run left running")
    for name in (STOP_FILE, EVENTS_FILE):
        try:
            os.remove(os.path.join(proc_dir, name))
        except FileNotFoundError:
            pass
    log_path = os.path.join(proc_dir, LOG_FILE)
    environment = {**(env if env is not None else os.environ), RUN_DIR_ENV: proc_dir,
                   "SEEDBED_EVENTS": os.path.join(proc_dir, EVENTS_FILE),
                   "SEEDBED_STOP_FILE": os.path.join(proc_dir, STOP_FILE)}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(list(argv), cwd=proc_dir, env=environment, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=die_with_parent)
    with open(os.path.join(proc_dir, PID_FILE), "w", encoding="utf-8") as fh:
        fh.write(str(proc.pid))
    sink.on_log(f"engine started (pid {proc.pid}): {' '.join(argv)}")
    reader = EventReader(os.path.join(proc_dir, EVENTS_FILE))
    last_step = 0
    stop_at = term_at = kill_at = None

    def pump() -> None:
        nonlocal last_step
        events, problems = reader.read()
        for line_no, message in problems:
            sink.on_log(f"events.jsonl line {line_no}: {message}")
        for ev in events:
            if ev.log:
                sink.on_log(ev.log)
            if ev.engine_config is not None and on_engine_config:
                on_engine_config(ev.engine_config)
            if ev.step is None:
                continue
            step = step_of(ev.step)
            if ev.metrics:
                sink.on_metrics(step, ev.metrics)
                last_step = max(last_step, step)
            if ev.samples:
                sink.on_samples(step, ev.samples)
            if ev.ranks and on_ranks:
                on_ranks(step, ev.ranks)
            if ev.checkpoint:
                path = ev.checkpoint if os.path.isabs(ev.checkpoint) else os.path.join(out_dir, ev.checkpoint)
                if not inside(path, out_dir) or not os.path.isdir(path):
                    sink.on_log(f"events.jsonl: checkpoint {ev.checkpoint!r} is not a folder inside the run's "
                                "folder; not recorded")
                else:
                    sink.on_checkpoint(step, os.path.realpath(path))

    try:
        while proc.poll() is None:
            pump()
            now = time.monotonic()
            if stop_at is None and should_stop():
                stop_at = now
                open(os.path.join(proc_dir, STOP_FILE), "w").close()
                sink.on_log("stop requested: asked the engine to save a checkpoint and exit")
            if stop_at is not None and term_at is None and now - stop_at > grace_s:
                term_at = now
                sink.on_log(f"the engine did not exit within {grace_s:.0f} s of the stop request: SIGTERM")
                _signal_group(proc.pid, signal.SIGTERM)
            if term_at is not None and kill_at is None and now - term_at > term_s:
                kill_at = now
                _signal_group(proc.pid, signal.SIGKILL)
            time.sleep(poll_s)
    except BaseException:
        # this process is being torn down (a signal turned into an exception, an error in the sink): never
        # leave the engine running without its supervisor
        _signal_group(proc.pid, signal.SIGKILL)
        kill_marked(proc_dir)
        proc.wait()
        raise
    # the leader is gone; torchrun's workers or a script's children may linger, in the group or out of it
    _signal_group(proc.pid, signal.SIGKILL)
    kill_marked(proc_dir)
    pump()
    sink.flush()
    if stop_at is not None:
        return "stopped", last_step
    if proc.returncode != 0 and not should_stop():  # (a run declared lost meanwhile stopped, it did not fail)
        tail = log_tail(log_path)
        raise EngineFailed(f"the engine exited with code {proc.returncode}: {root_cause(tail)}\n"
                           f"the end of {LOG_FILE}:\n{tail}")
    return ("succeeded" if proc.returncode == 0 else "stopped"), last_step
