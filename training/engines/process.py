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
   that was not asked to stop and exits non-zero raises EngineFailed with the tail of its log, or RankLost when
   one of its ranks was killed by a signal it did not ask for (``training.engines.torchrun``: its torchrun
   recorded how each rank ended), a lost attempt rather than the run's own error.
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
from training.engines.torchrun import RANK_EXITS_FILE, lost_rank

STOP_FILE = "STOP"
EVENTS_FILE = "events.jsonl"
PID_FILE = "engine.pid"
LOG_FILE = "engine.log"
RUN_DIR_ENV = "SEEDBED_RUN_DIR"


class EngineFailed(RuntimeError):
    """The engine's process exited with an error while nobody asked it to stop."""


class RankLost(EngineFailed):
    """One of the engine's ranks was killed by a signal it did not ask for (``training.engines.torchrun.
    LOST_SIGNALS``: the out-of-memory killer's SIGKILL, a SIGSEGV): the attempt was lost, as when a one-process run's
    training process is killed so. Its message's first line is "rank R killed by SIGNAL"; ``rank`` and
    ``signal`` say the same."""

    def __init__(self, message: str, rank: int, signal_name: str):
        super().__init__(message)
        self.rank, self.signal = rank, signal_name


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
    proc, log_path = start_engine(argv, proc_dir, env, sink)
    events = EventForwarder(os.path.join(proc_dir, EVENTS_FILE), out_dir, sink, step_of, on_engine_config, on_ranks)
    stopping = StopEscalation(proc.pid, proc_dir, sink, grace_s, term_s)
    try:
        while proc.poll() is None:
            events.pump()
            stopping.tick(should_stop)
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
    events.pump()
    sink.flush()
    return engine_outcome(proc.returncode, stopped=stopping.stop_at is not None, should_stop=should_stop,
                          log_path=log_path, last_step=events.last_step)


def start_engine(argv: Sequence[str], proc_dir: str, env: dict | None, sink) -> tuple[subprocess.Popen, str]:
    """Steps 1-2 of the module's docstring: what an earlier attempt left running is killed, its stop and events
    files removed, and ``argv`` starts in a session of its own, output to the log; returns (process, log path)."""
    os.makedirs(proc_dir, exist_ok=True)
    if kill_leftover(proc_dir):
        sink.on_log("killed the engine processes an earlier attempt of this run left running")
    for name in (STOP_FILE, EVENTS_FILE, RANK_EXITS_FILE):
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
    return proc, log_path


class EventForwarder:
    """Step 3: the engine's new events to the sink (metrics, samples, ranks, its config, checkpoints inside the
    run folder); ``last_step`` is the last step that brought metrics."""

    def __init__(self, events_path: str, out_dir: str, sink, step_of: Callable[[int], int],
                 on_engine_config: Callable[[dict], None] | None, on_ranks: Callable[[int, list], None] | None):
        self.reader, self.out_dir, self.sink, self.step_of = EventReader(events_path), out_dir, sink, step_of
        self.on_engine_config, self.on_ranks = on_engine_config, on_ranks
        self.last_step = 0

    def pump(self) -> None:
        events, problems = self.reader.read()
        for line_no, message in problems:
            self.sink.on_log(f"events.jsonl line {line_no}: {message}")
        for ev in events:
            if ev.log:
                self.sink.on_log(ev.log)
            if ev.engine_config is not None and self.on_engine_config:
                self.on_engine_config(ev.engine_config)
            if ev.step is not None:
                self.forward_step(self.step_of(ev.step), ev)

    def forward_step(self, step: int, ev) -> None:
        if ev.metrics:
            self.sink.on_metrics(step, ev.metrics)
            self.last_step = max(self.last_step, step)
        if ev.samples:
            self.sink.on_samples(step, ev.samples)
        if ev.ranks and self.on_ranks:
            self.on_ranks(step, ev.ranks)
        if ev.checkpoint:
            path = ev.checkpoint if os.path.isabs(ev.checkpoint) else os.path.join(self.out_dir, ev.checkpoint)
            if not inside(path, self.out_dir) or not os.path.isdir(path):
                self.sink.on_log(f"events.jsonl: checkpoint {ev.checkpoint!r} is not a folder inside the run's "
                                 "folder; not recorded")
            else:
                self.sink.on_checkpoint(step, os.path.realpath(path))


class StopEscalation:
    """Step 4: once ``should_stop()`` says so, the stop file; ``grace_s`` later SIGTERM to the engine's group,
    ``term_s`` after that SIGKILL. ``stop_at`` is when the stop was asked (None: never)."""

    def __init__(self, pid: int, proc_dir: str, sink, grace_s: float, term_s: float):
        self.pid, self.proc_dir, self.sink, self.grace_s, self.term_s = pid, proc_dir, sink, grace_s, term_s
        self.stop_at = self.term_at = self.kill_at = None

    def tick(self, should_stop: Callable[[], bool]) -> None:
        now = time.monotonic()
        if self.stop_at is None and should_stop():
            self.stop_at = now
            open(os.path.join(self.proc_dir, STOP_FILE), "w").close()
            self.sink.on_log("stop requested: asked the engine to save a checkpoint and exit")
        if self.stop_at is not None and self.term_at is None and now - self.stop_at > self.grace_s:
            self.term_at = now
            self.sink.on_log(f"the engine did not exit within {self.grace_s:.0f} s of the stop request: SIGTERM")
            _signal_group(self.pid, signal.SIGTERM)
        if self.term_at is not None and self.kill_at is None and now - self.term_at > self.term_s:
            self.kill_at = now
            _signal_group(self.pid, signal.SIGKILL)


def engine_outcome(returncode: int, *, stopped: bool, should_stop: Callable[[], bool], log_path: str,
                   last_step: int) -> tuple[str, int]:
    """Step 6: (status, last step) of an engine that exited; EngineFailed when it failed unasked, RankLost when
    that was one of its ranks killed by a signal it did not ask for (what its torchrun recorded beside the log)."""
    if stopped:
        return "stopped", last_step
    if returncode != 0 and not should_stop():  # (a run declared lost meanwhile stopped, it did not fail)
        tail = log_tail(log_path)
        killed = lost_rank(os.path.dirname(log_path))
        if killed is not None:
            raise RankLost(f"rank {killed['rank']} killed by {killed['signal']}\n(local rank {killed['local_rank']}, "
                           f"pid {killed['pid']}; the engine exited with code {returncode}: {root_cause(tail)})",
                           killed["rank"], killed["signal"])
        raise EngineFailed(f"the engine exited with code {returncode}: {root_cause(tail)}\n"
                           f"the end of {LOG_FILE}:\n{tail}")
    return ("succeeded" if returncode == 0 else "stopped"), last_step
