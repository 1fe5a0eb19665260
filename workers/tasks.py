"""Thin, idempotent Celery tasks. Decisions live in webapp.runs.services; these only supervise processes.

``train_run(run_id)`` claims the run (a finished run or one another slot holds: nothing to do), starts the
training child in its own process group, heartbeats while it lives, terminates the group when a kill is
not honoured within the grace period, and records how it ended.
"""
from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from celery.signals import task_failure, worker_init, worker_ready, worker_shutdown, worker_shutting_down

from workers import db_full, disk_watch
from workers.build_defer import waits_for_build
from workers.exits import parent_pid
from workers.celery_app import app, ensure_django
from workers.runner import EXIT_DISK_FULL, EXIT_RANK_LOST, EXIT_STOPPED, EXIT_SUCCEEDED

ensure_django()

from django.conf import settings  # noqa: E402
from django.db import close_old_connections, connections  # noqa: E402

from webapp.jobs import claimed, recover_all  # noqa: E402
from webapp.runs import services  # noqa: E402
from webapp.runs.models import RUN_JOB, Run, RunStatus  # noqa: E402
from webapp.sweeps import services as sweep_services  # noqa: E402
from webapp.sweeps.models import Sweep  # noqa: E402

log = logging.getLogger("seedbed.workers")
POLL_S = 0.2
TERM_TO_KILL_S = 5.0  # after SIGTERM to the group, SIGKILL if it is still there
# A kill whose flag the training process cannot read (it is stopped, or its run is stalled: webapp.runs.stall) is
# not given the grace period: its group is terminated this long after the request, SIGKILL this long after SIGTERM
UNREAD_KILL_AFTER_S = 1.0
UNREAD_TERM_TO_KILL_S = 3.0


def run_dir(run_id: int) -> Path:
    """The run's folder, named by its UUID (Run.folder)."""
    return Run.objects.only("uid").get(pk=run_id).folder


def log_tail(path: Path, max_chars: int = 4000) -> str:
    """The end of a training log for a run's error: its last meaningful lines, progress bars left out."""
    from workers.exits import log_tail as meaningful_log_tail

    return meaningful_log_tail(path, max_chars=max_chars)


class ForkedChild:
    """The run's training process, forked from this slot (which preloaded torch and transformers, see
    ``_preload_training``), with the small part of Popen's interface the supervisor uses."""

    def __init__(self, pid: int, report_fd: int | None = None):
        self.pid = pid
        self.returncode: int | None = None
        self.report_fd = report_fd  # the read end of the child's pipe: why it failed, in one line

    @classmethod
    def start(cls, run_id: int, log_path: Path, node: tuple = ()) -> "ForkedChild":
        """``node``: (node rank, rendezvous host, port) for one node of a multi-node run (a Slurm job's)."""
        from workers.runner import run_in_forked_child

        connections.close_all()  # the child must not share the slot's database connections
        sys.stdout.flush()
        sys.stderr.flush()
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            run_in_forked_child(run_id, str(log_path), [str(x) for x in node], write_fd)  # never returns
        os.close(write_fd)
        return cls(pid, read_fd)

    def failure(self) -> str:
        """What the exited child sent through its pipe (why it failed; "" when it said nothing)."""
        return getattr(self, "_message", "")

    def _read_report(self) -> str:
        if self.report_fd is None:
            return ""
        chunks = []
        try:
            os.set_blocking(self.report_fd, False)
            while len(chunks) < 4 and (chunk := os.read(self.report_fd, 4096)):
                chunks.append(chunk)
        except OSError:  # nothing written (its write end closed with it)
            pass
        finally:
            os.close(self.report_fd)
            self.report_fd = None
        return b"".join(chunks).decode("utf-8", "replace").strip()

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
                self._message = self._read_report()  # (and closes the pipe, whatever the exit)
        return self.returncode

    def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"run process {self.pid}", timeout)
            time.sleep(0.05)
        return self.returncode


def _terminate_group(proc: ForkedChild, term_wait_s: float = TERM_TO_KILL_S) -> None:
    """SIGTERM the child's whole process group, then SIGKILL whatever is left ``term_wait_s`` later. Stopped
    processes of its tree are continued after the SIGTERM (SIGCONT), so that they act on it: a stopped process
    holds a SIGTERM pending until it runs again."""
    from workers.sysmetrics import stopped_in_tree

    stopped = stopped_in_tree(proc.pid)  # (read first: a root the SIGTERM ends takes its children out of its tree)
    for sig, wait_s in ((signal.SIGTERM, term_wait_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        if sig == signal.SIGTERM:  # the group's stopped processes, and the tree's in groups of their own
            for kill, target in ((os.killpg, proc.pid), *((os.kill, pid) for pid in stopped)):
                try:
                    kill(target, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _record_system_metrics(run_id: int, sampler) -> None:
    """The run's process tree's CPU and memory (workers.sysmetrics) as metrics at the run's latest step."""
    step = Run.objects.filter(pk=run_id).values_list("last_step", flat=True).first()
    values = sampler.sample()
    if step and values:
        services.run_metrics_append(run_id=run_id, points=[(step, key, value) for key, value in values.items()])


def _supervise(run_id: int, proc: ForkedChild, worker: str, heartbeat=None, system_metrics: bool = True) -> str:
    """Wait for the child, heartbeating (``heartbeat(pid)``: the run's own by default), recording its process tree's
    CPU and memory and its folder's size against its disk budgets (``disk_watch``); returns why it had to be
    terminated after a kill request ("" when it was not: ``_kill_overdue``)."""
    from workers.sysmetrics import ProcessTreeSampler

    heartbeat = heartbeat or (lambda pid: services.run_heartbeat(run_id=run_id, pid=pid, worker=worker))
    # (a full database refuses them: supervision goes on, the training process fails on that disk by itself)
    heartbeat = db_full.tolerant(heartbeat, "heartbeat", run_id, True)
    sample = db_full.tolerant(_record_system_metrics, "system metrics", run_id, None)
    system = ProcessTreeSampler(proc.pid) if system_metrics else None
    over_budget = disk_watch.DiskWatch(run_id, run_dir(run_id), proc) if system_metrics else (lambda: False)
    next_beat = 0.0
    while proc.poll() is None:
        now = time.monotonic()
        if now >= next_beat:
            next_beat = now + settings.SEEDBED_HEARTBEAT_S
            if system is not None:
                sample(run_id, system)
            if over_budget():  # (its folder measured: past its disk budget, the run failed and its process ended)
                return ""
            if not heartbeat(proc.pid):
                # lost, ended or taken over: the child sees it too (runner.StopFlag) and stops within a step
                log.info("run %s: no longer held by %s; its training process is stopping", run_id, worker)
        requested = _kill_requested(run_id)
        if requested is not None and (forced := _kill_overdue(run_id, proc, requested)):
            log.warning("run %s: %s; terminating its process group", run_id, forced)
            _terminate_group(proc, UNREAD_TERM_TO_KILL_S if "grace period" not in forced else TERM_TO_KILL_S)
            return forced
        time.sleep(POLL_S)
    return ""


def _kill_requested(run_id: int):
    """When a kill of the run still running was first asked, or of a member of its packed group (None: none)."""
    from django.db.models import Min, Q

    from webapp.runs.models import RunStatus

    running = Run.objects.filter(Q(pk=run_id) | Q(pack_leader_id=run_id), status=RunStatus.RUNNING)
    return running.aggregate(first=Min("kill_requested_at"))["first"]


def _kill_overdue(run_id: int, proc: ForkedChild, requested) -> str:
    """Why a requested kill must be forced now ("" while the loop may still stop by itself): the grace period is
    over, or, from ``UNREAD_KILL_AFTER_S`` on, the training process cannot read the stop flag (the loop reads it
    once per step): a process of its tree is stopped, or the run is stalled (``Run.stalled_for_s``)."""
    from django.utils import timezone

    from workers.sysmetrics import stopped_in_tree

    waited = (timezone.now() - requested).total_seconds()
    if waited > settings.SEEDBED_KILL_GRACE_S:
        return f"terminated: the kill was not honoured within the grace period ({settings.SEEDBED_KILL_GRACE_S:.0f} s)"
    if waited <= UNREAD_KILL_AFTER_S:
        return ""
    stopped = stopped_in_tree(proc.pid)
    if stopped:
        return (f"terminated {waited:.0f} s after the kill: its training process (pid {', '.join(map(str, stopped))}) "
                f"is stopped (SIGSTOP) and cannot read the stop flag")
    run = Run.objects.filter(pk=run_id).only("status", "step_advanced_at", "median_step_s", "last_step").first()
    idle = run.stalled_for_s if run is not None else None
    if idle is not None:
        return (f"terminated {waited:.0f} s after the kill: the run is stalled (no step for {idle:.0f} s after "
                f"step {run.last_step}) and does not read the stop flag")
    return ""


def exit_outcome(returncode: int) -> str:
    """What the training child's exit code says (workers.runner): succeeded, stopped (cleanly, when asked),
    failed (an error it raised itself), disk_full (that error was a full disk: ``EXIT_DISK_FULL``) or signaled (a
    signal killed it: the out-of-memory killer's SIGKILL, a SIGSEGV; or this worker's own terminate after the kill
    grace period, which ``_supervise`` reports as forced; or such a signal killed one of its ranks,
    ``EXIT_RANK_LOST``). How the run ended is decided by
    runs.services.run_record_exit, from this and the database."""
    if returncode < 0 or returncode == EXIT_RANK_LOST:
        return "signaled"
    return {EXIT_SUCCEEDED: "succeeded", EXIT_STOPPED: "stopped", EXIT_DISK_FULL: "disk_full"}.get(returncode, "failed")


def signal_detail(run_id: int, proc: "ForkedChild", log_path: Path, oom_before: dict) -> str:
    """The error of a child a signal killed, or of one whose rank a signal killed (``EXIT_RANK_LOST``: "rank R
    killed by SIGNAL", what it sent through its pipe): the signal first (for SIGKILL, whether the kernel recorded
    an out-of-memory kill while it ran, and the run's peak resident memory as its system/rss_mb metric reported
    it), then the last meaningful lines of its log. What it left in its process group is killed too."""
    from django.db.models import Max

    from webapp.runs.models import MetricPoint
    from workers.exits import killed_rank, oom_kills, signal_line

    try:
        os.killpg(proc.pid, signal.SIGKILL)  # its group outlives it (a killed process saves nothing anyway)
    except (ProcessLookupError, PermissionError):
        pass
    peak = MetricPoint.objects.filter(run_id=run_id, key="system/rss_mb").aggregate(peak=Max("value"))["peak"]
    said = proc.failure()  # (what it sent through its pipe before the signal, if anything; the pipe is closed)
    if proc.returncode == EXIT_RANK_LOST:
        rank = killed_rank(said)  # (its first line, "rank R killed by SIGNAL", is the one signal_line writes)
        line = signal_line(-rank[1], oom_before, oom_kills(), peak, who=rank[0]) if rank else \
            (said.partition("\n")[0] or "a rank was killed by a signal")
        said = said.partition("\n")[2]
    else:
        line = signal_line(proc.returncode, oom_before, oom_kills(), peak)
    log.error("run %s: %s", run_id, line)
    tail = "\n".join(part for part in (said, log_tail(log_path)) if part)
    return f"{line}\n{tail}" if tail else line


@app.task(name="workers.tasks.train_run", acks_late=True, ignore_result=True, bind=True)
def train_run(self, run_id: int, dispatch: str = "") -> str:
    """Train one single-node run in a child process; safe to deliver twice (see services.run_start). ``dispatch``:
    the id of this message (Run.dispatch_id records the last one sent), for the log. (A run over several machines
    is a Slurm queue's batch job: ``workers.slurm.job``.)"""
    close_old_connections()
    worker = f"{socket.gethostname()}:{os.getpid()}"
    # this slot's liveness, stamped every 2 s: the maintenance pass notices its death within seconds
    from workers.recovery import Beat

    Beat.ensure()
    log.info("run %s: message %s received", run_id, dispatch or "(no dispatch id)")
    if waits_for_build(run_id, dispatch):
        log.info("run %s: the built-in model is being built elsewhere; its slot is given back", run_id)
        return "waits for the build"
    return train_here(run_id, worker)


def train_here(run_id: int, worker: str, dispatch: str = "", job=None) -> str:
    """Claim the run for ``worker`` and train it in a child process here, supervised, until it ends; record how
    it ended and return that status. A worker slot (``train_run``) and a Slurm batch job (``workers.slurm.job``,
    whose ``job`` forwards Slurm's signals, starts a multi-node run's other nodes and names a clean stop after a
    signal "preempted")."""
    if dispatch:
        log.info("run %s: %s", run_id, dispatch)
    action = claimed(RUN_JOB, pk=run_id, take=lambda: services.run_start(run_id=run_id, worker=worker))
    if action in ("missing", "skip"):
        return action
    # packed seeds: up to its sweep's pack of its started seeds trained in this one process (workers.packed)
    packed = services.run_pack_claim(leader_id=run_id, worker=worker) if job is None else 0
    out = run_dir(run_id)
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "worker.log"
    from workers.exits import oom_kills

    oom_before = oom_kills()  # (a SIGKILL's error says whether the kernel's OOM killer acted meanwhile)
    proc = ForkedChild.start(run_id, log_path, job.node if job is not None else ())
    try:
        if job is not None:
            job.started(proc)
        services.run_heartbeat(run_id=run_id, pid=proc.pid, worker=worker)
        forced = _supervise(run_id, proc, worker, heartbeat=_group_beat(run_id, worker) if packed else None)
    except BaseException:
        _terminate_group(proc)  # the task is going away (worker shutdown): take the child with it
        raise
    outcome = exit_outcome(proc.returncode)
    detail = _failure_detail(run_id, proc, log_path) if outcome in ("failed", "disk_full") else ""
    if outcome == "signaled":
        detail = signal_detail(run_id, proc, log_path, oom_before)
    if job is not None:
        outcome, detail = job.outcome(outcome, detail)
    if packed:  # the members still running when the group's process exited (each recorded its own clean end)
        status = _record_group_exit(run_id, worker, outcome, forced, detail)
    else:
        status = db_full.retrying(lambda: services.run_record_exit(run_id=run_id, outcome=outcome, forced=forced,
                                                                   detail=detail, worker=worker), "how it ended",
                                  run_id)
    log.info("run %s: %s %s (exit code %s)", run_id, "its packed group's process ended; the run is" if packed
             else "ended", status, proc.returncode)
    if job is not None:
        job.ended()
    return status


def _group_beat(leader_id: int, worker: str):
    """The heartbeat of a packed group's process: every member still running (False once none is)."""
    def beat(pid: int) -> bool:
        members = services.run_pack_members(leader_id=leader_id, worker=worker)
        return any([services.run_heartbeat(run_id=m, pid=pid, worker=worker) for m in members])
    return beat


def _record_group_exit(leader_id: int, worker: str, outcome: str, forced: str, detail: str) -> str:
    """How a packed group's process ended, for each member it had not recorded: the process's outcome; where the
    worker had to terminate it after a kill, the killed members end killed and the others lose an attempt
    (restarted from their checkpoints, as when a signal kills a run). Returns the leader's status."""
    from webapp.runs.models import Run

    for member in services.run_pack_members(leader_id=leader_id, worker=worker):
        asked = Run.objects.filter(pk=member, kill_requested_at__isnull=False).exists()
        own_outcome, own_detail, own_forced = outcome, detail, forced
        if forced and not asked:
            own_outcome, own_forced = "signaled", ""
            own_detail = f"its packed group's process was terminated ({forced})"
        db_full.retrying(lambda: services.run_record_exit(run_id=member, outcome=own_outcome, forced=own_forced,
                                                          detail=own_detail, worker=worker), "how it ended", member)
    return Run.objects.filter(pk=leader_id).values_list("status", flat=True).first() or "missing"


def _failure_detail(run_id: int, proc: ForkedChild, log_path: Path) -> str:
    """A failed child's error for the run: the cause it sent through its pipe first (a full disk named as such),
    then the end of its log; the cause also goes to the errors log."""
    cause = proc.failure()
    tail = log_tail(log_path)
    if cause:
        log.error("run %s: training process failed (exit code %s): %s", run_id, proc.returncode, cause)
        return f"{cause}\ntraining process exited with code {proc.returncode}\n{tail}"
    return f"training process exited with code {proc.returncode}\n{tail}"


@app.task(name="workers.tasks.maintenance", ignore_result=True)
def maintenance() -> dict:
    """Periodic (celery beat): every job kind's pass (``webapp.jobs.recover_all``: the runs' first,
    ``runs.services.runs_recover``: lost runs, runs sent again, runs restarted after a full disk; then evaluations'),
    then check every sweep with running runs (its policy and its alerts), then expire old idempotency keys; the
    pass is recorded for the /status page."""
    close_old_connections()
    done = recover_all()
    repaired = {**done.pop("run", {}), **{f"{kind}_jobs": result for kind, result in done.items()}}
    from workers.slurm_tasks import slurm_pass_safely

    repaired.update(slurm_pass_safely())  # the Slurm queues' jobs: their states, ended and vanished ones
    stopped = {}
    for sweep_id in Sweep.objects.filter(runs__status=RunStatus.RUNNING).values_list("pk", flat=True).distinct():
        try:
            stopped[sweep_id] = sweep_services.sweep_check(sweep_id=sweep_id, claim=True)  # (paced: claim)
        except Exception:  # one sweep's failure must not stop the others' checks (or the lost-run marking)
            log.exception("sweep %s: check failed", sweep_id)
    result = {**repaired, "stopped": stopped}
    try:
        from webapp.projects.idempotency import keys_expire

        result["idempotency_keys_expired"] = keys_expire()
    except Exception:  # a failed clean-up must not stop the pass (it is done again on the next one)
        log.exception("maintenance: could not remove expired idempotency keys")
    try:
        from webapp.status import write_maintenance_pass

        write_maintenance_pass(result)
    except OSError:
        log.exception("maintenance: could not record its pass")
    return result


@app.task(name="workers.tasks.sweep_check", ignore_result=True)
def sweep_check(sweep_id: int) -> list[int]:
    """One sweep's policy and alerts, requested after a run stored metrics (sweeps.services.sweep_request_check)."""
    close_old_connections()
    return sweep_services.sweep_check(sweep_id=sweep_id)


@task_failure.connect
def _log_task_failure(sender=None, task_id=None, exception=None, args=None, kwargs=None, **_: object) -> None:
    """Celery logs a failed task's traceback with its id; this line adds what it was about (the run, sweep, job
    or entry id in its arguments), in the same errors log."""
    log.error("task %s[%s] failed: args=%s kwargs=%s: %s: %s", getattr(sender, "name", sender), task_id,
              list(args or ()), dict(kwargs or {}), type(exception).__name__, exception)


@worker_shutting_down.connect
def _stop_local_runs(sig=None, how=None, **_: object) -> None:
    """On a warm shutdown (SIGTERM, Ctrl-C), ask this host's training processes to stop: each saves a
    checkpoint, its task puts the run back in the queue, and the worker can exit without waiting for the end
    of every run. (A cold shutdown kills the slots; their children then get SIGTERM through PDEATHSIG.)"""
    if how != "Warm":
        return
    db_full.stopping()  # (a slot waiting for a full database to record its run stops waiting)
    close_old_connections()
    host = socket.gethostname()
    for pid, worker in Run.objects.filter(status=RunStatus.RUNNING, worker__startswith=f"{host}:",
                                          pid__isnull=False).values_list("pid", "worker"):
        slot_pid = int(worker.rsplit(":", 1)[1])
        if parent_pid(pid) == slot_pid:  # still the child of that slot (a recorded pid may have been reused)
            log.info("worker shutting down: asking training process %s to checkpoint and stop", pid)
            os.kill(pid, signal.SIGTERM)


@worker_init.connect
def _preload_training(sender=None, **_: object) -> None:
    """A training worker (queue cpu or gpu) imports the training stack once, before forking its slots."""
    queues = set(getattr(sender.app.amqp.queues, "consume_from", None) or {}) if sender else set()
    if queues and not queues & set(settings.SEEDBED_QUEUES):
        return  # the maintenance worker trains nothing
    started = time.monotonic()
    from workers.runner import preload_training

    preload_training()
    log.info("training stack preloaded in %.1f s", time.monotonic() - started)


_capacity_reporter = None


@worker_ready.connect
def _report_capacity(sender=None, **_: object) -> None:
    """A training worker reports its cores, memory, GPUs, queues and slots now and every half minute
    (workers.capacity): the web app caps what one config may ask of a worker of a queue by them."""
    global _capacity_reporter
    from workers.capacity import Reporter
    from workers.celery_app import MAINTENANCE_QUEUE

    queues = sorted(set(getattr(sender.app.amqp.queues, "consume_from", None) or {}) - {MAINTENANCE_QUEUE})
    if not queues or _capacity_reporter is not None:
        return  # the maintenance worker trains nothing
    slots = getattr(getattr(sender, "controller", None), "concurrency", None) or 1
    _capacity_reporter = Reporter(worker=sender.hostname, queues=queues, slots=int(slots)).start()


@worker_shutdown.connect
def _forget_capacity(sender=None, **_: object) -> None:
    """A worker going away no longer counts for its queues."""
    if _capacity_reporter is not None:
        _capacity_reporter.stop()
