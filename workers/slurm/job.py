"""What a run's Slurm batch job runs: ``python -m workers.slurm.job RUN_ID`` on the first node of its allocation,
and, for a run over ``nnodes`` > 1 machines, ``python -m workers.slurm.job RUN_ID --node HOST PORT`` on each other
node (one ``srun`` step the first node starts, one task per node).

The first node does what a worker's slot does for a run (``workers.tasks.train_here``): claims the run
(``run_start``: its worker is ``slurm:<job id>@<node>``), forks the training child (``workers.runner``: it writes
metrics, samples and checkpoints to the database the web app reads), heartbeats and watches the kill flag, and
records how the run ended. A multi-node run's child is torchrun's node 0 with the rendezvous on this node (a free
port of it); each other node's task forks the child of its node rank (1 + its ``SLURM_PROCID``), which joins that
port at the address srun launched it from (``SLURM_LAUNCH_NODE_IPADDR``), and waits for it: torchrun's own
rendezvous forms the run, as ``training.ranks.torchrun_command`` says.

Slurm's signals (``Job``): the batch shell gets SIGUSR1 before a time limit or a preemption (``sbatch
--signal=B:USR1@N``), every process of the job SIGTERM when Slurm ends it (a requeue, a preemption, a cancel). Either
one asks the training child to checkpoint and stop (SIGTERM: ``runner.StopFlag``); the run is then handed back
preempted (``run_record_exit``'s "preempted": queued, counted in ``Run.preemptions``, not charged to
``max_restarts``), and after a warning the job requeues itself (``scontrol requeue``): when Slurm starts it again,
the run resumes from that checkpoint. A kill (the run's flag) still ends it killed, whatever signal came.

Its environment is the one the job was submitted with (``sbatch --export=ALL``): the maintenance worker's, so
``SEEDBED_HOME``, ``DATABASE_URL`` and the settings are those of the web app it reports to.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

__all__ = ["Job", "job_worker", "main"]

SIGNAL_WORDS = {signal.SIGUSR1: "Slurm warned the job before its time limit or a preemption",
                signal.SIGTERM: "Slurm ended the job (a requeue, a preemption or a cancel)"}
OTHERS_STOP_S = 20.0  # how long the other nodes' step is given to end after node 0's child did


def job_worker() -> str:
    """This job's name as the run's worker: ``slurm:<job id>@<node>``."""
    return f"slurm:{os.environ.get('SLURM_JOB_ID', '?')}@{node_name()}"


def node_name() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


class Job:
    """The batch job's part in a run's supervision (``train_here(..., job=)``): Slurm's signals forwarded to the
    training child, the other nodes of a multi-node run started and watched, and the requeue asked for after a
    warning.

    ``train_here`` calls ``started(child)`` once the child is forked, ``outcome(outcome, detail)`` once it exited
    (a clean stop after Slurm's signal is "preempted"), and ``ended()`` after the run's end is recorded."""

    def __init__(self, run_id: int, nnodes: int = 1, host: str = ""):
        self.run_id = run_id
        self.nnodes = nnodes
        # (the rendezvous: this host as its own name says; the other nodes reach it at the address Slurm knows)
        self.node: tuple = (0, host or socket.gethostname(), _free_port()) if nnodes > 1 else ()
        self.signalled: int | None = None
        self.child = None
        self.others: subprocess.Popen | None = None
        self.others_failed = ""

    def install(self) -> "Job":
        for sig in SIGNAL_WORDS:
            signal.signal(sig, self._on_signal)
        return self

    def _on_signal(self, signum, _frame) -> None:
        if self.signalled is None or signum == signal.SIGUSR1:
            self.signalled = signum
        self._stop_child()

    def _stop_child(self) -> None:
        if self.child is not None and self.child.returncode is None:
            try:
                os.kill(self.child.pid, signal.SIGTERM)  # the runner's StopFlag: checkpoint after this step, stop
            except ProcessLookupError:
                pass

    def started(self, child) -> None:
        self.child = child
        if self.signalled is not None:  # (a signal that came while the run was being claimed)
            self._stop_child()
        if self.nnodes > 1:
            self._start_others()

    def _start_others(self) -> None:
        """One ``srun`` step on the allocation's other nodes (``--relative=1``), a task each; should it fail
        while this node's child trains, the child is stopped: the run cannot go on without a node."""
        _, host, port = self.node
        others = self.nnodes - 1
        self.others = subprocess.Popen(
            ["srun", f"--nodes={others}", f"--ntasks={others}", "--ntasks-per-node=1", "--relative=1",
             "--kill-on-bad-exit=1", "--export=ALL", sys.executable, "-m", "workers.slurm.job", str(self.run_id),
             "--node", host, str(port)], stdin=subprocess.DEVNULL)
        threading.Thread(target=self._watch_others, daemon=True).start()

    def _watch_others(self) -> None:
        code = self.others.wait()
        if code != 0 and self.child is not None and self.child.returncode is None:
            self.others_failed = f"the run's other node(s) ended with exit code {code} (their srun step)"
            try:
                os.killpg(self.child.pid, signal.SIGKILL)  # a lost node: a lost attempt (max_restarts)
            except ProcessLookupError:
                pass

    def outcome(self, outcome: str, detail: str) -> tuple[str, str]:
        """How the run's attempt ended, this node's child's outcome given: a rank killed on another node (its
        ``failure.txt``, waited for while their step ends: node 0's ranks only saw broken connections) or a lost
        node is a lost attempt ("signaled"), naming it; a clean stop after Slurm's signal is "preempted"."""
        if self.others is not None and outcome in ("failed", "signaled"):
            lost = self._node_failure()
            if lost:
                return "signaled", f"{lost}\n{detail}".strip()
        if self.others_failed:
            return "signaled", f"{self.others_failed}\n{detail}".strip()
        if outcome == "stopped" and self.signalled is not None:
            return "preempted", SIGNAL_WORDS[self.signalled]
        return outcome, detail

    def _node_failure(self) -> str:
        from workers.tasks import run_dir

        nodes = Path(run_dir(self.run_id)) / "nodes"
        deadline = time.monotonic() + OTHERS_STOP_S
        while True:
            said = [path.read_text(errors="replace") for path in sorted(nodes.glob("*/failure.txt"))]
            if said or self.others.poll() is not None or time.monotonic() > deadline:
                return "\n".join(said)
            time.sleep(0.2)

    def ended(self) -> None:
        if self.others is not None:
            try:
                self.others.wait(OTHERS_STOP_S / 4)  # (their children end with node 0's: the collectives end)
            except subprocess.TimeoutExpired:
                self.others.send_signal(signal.SIGTERM)  # (srun forwards it to its tasks, then ends them)
                try:
                    self.others.wait(OTHERS_STOP_S)
                except subprocess.TimeoutExpired:
                    self.others.kill()
        if self.signalled == signal.SIGUSR1 and os.environ.get("SLURM_JOB_ID"):
            # a warning: the job goes back to pending and starts again (Slurm's requeue delay), resuming the run
            subprocess.run(["scontrol", "requeue", os.environ["SLURM_JOB_ID"]], capture_output=True, timeout=30)


def other_node(run_id: int, host: str, port: int) -> int:
    """One other node of a multi-node run: its training child at node rank 1 + ``SLURM_PROCID``, its log in the
    run's folder (``nodes/<rank>/worker.log``); SIGTERM (srun forwarding Slurm's, or node 0's) is passed on."""
    from workers.exits import oom_kills
    from workers.tasks import ForkedChild, exit_outcome, signal_detail, run_dir

    rank = 1 + int(os.environ.get("SLURM_PROCID", "0"))
    host = os.environ.get("SLURM_LAUNCH_NODE_IPADDR") or host  # (node 0's address, as srun launched this task)
    folder = Path(run_dir(run_id)) / "nodes" / str(rank)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "failure.txt").unlink(missing_ok=True)  # (an earlier attempt's)
    oom_before = oom_kills()
    child = ForkedChild.start(run_id, folder / "worker.log", (rank, host, port))
    for sig in SIGNAL_WORDS:
        signal.signal(sig, lambda *_: os.kill(child.pid, signal.SIGTERM) if child.returncode is None else None)
    code = child.wait(timeout=10 ** 9)
    if exit_outcome(code) == "signaled":  # a rank of this node killed: node 0 records the attempt lost with it
        (folder / "failure.txt").write_text(signal_detail(run_id, child, folder / "worker.log", oom_before))
    print(f"run {run_id}: node {rank} on {node_name()} ended with exit code {code}", flush=True)
    return 0 if code == 0 else 1


def main(argv: list[str]) -> int:
    node = len(argv) == 4 and argv[1] == "--node" and argv[3].isdigit()
    if not argv or not argv[0].isdigit() or not (len(argv) == 1 or node):
        print("usage: python -m workers.slurm.job RUN_ID [--node HOST PORT]", file=sys.stderr)
        return 2
    run_id = int(argv[0])
    from workers.celery_app import ensure_django

    ensure_django()
    if node:
        return other_node(run_id, argv[2], int(argv[3]))
    from webapp.runs.models import Run
    from workers.tasks import train_here

    config = Run.objects.filter(pk=run_id).values_list("config", flat=True).first() or {}
    job = Job(run_id, nnodes=max(1, int(config.get("nnodes", 1) or 1))).install()
    status = train_here(run_id, job_worker(), dispatch=f"slurm job {os.environ.get('SLURM_JOB_ID', '?')}", job=job)
    print(f"run {run_id}: {status}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
