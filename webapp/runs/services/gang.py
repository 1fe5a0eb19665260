"""Multi-node runs: a gang of node tasks, one per node, that starts training only once every node holds a worker
slot (workers.tasks.train_run; docs/architecture.md#engines-and-distribution)."""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from webapp.runs.models import Run, RunNode, RunStatus

from .transitions import locked_run


def run_nnodes(run: Run) -> int:
    return int(run.config.get("nnodes") or 1)


def _gangs_forming(queue: str, *, before: Run | None = None):
    """Multi-node runs of ``queue`` waiting for their gang to form, oldest first: queued, sent (a sweep's run
    waiting for its sweep's slot, or a restart waiting out its backoff, is not), not being killed."""
    now = timezone.now()
    runs = (Run.objects.filter(status=RunStatus.QUEUED, queue=queue, kill_requested_at__isnull=True,
                               enqueued_at__isnull=False, config__nnodes__gt=1)
            .filter(Q(retry_at__isnull=True) | Q(retry_at__lte=now)).exclude(dispatch_id="")
            .order_by("created_at", "pk"))
    if before is not None:
        runs = runs.filter(Q(created_at__lt=before.created_at) | Q(created_at=before.created_at, pk__lt=before.pk))
    return list(runs.values_list("pk", flat=True))


@transaction.atomic
def run_node_take(*, queue: str, machine: str, worker: str, host: str, port: int | None = None,
                  prefer: tuple[int, int] | None = None, instead_of: tuple[int, int] | None = None):
    """A node task, holding a free worker slot on ``queue``, claims a node of the OLDEST run there whose gang is
    forming and still lacks a node this worker (``machine``) may take (two nodes of a run never share a worker):
    whichever run's message it carried, so a slot always goes to the oldest waiting gang and two half-formed
    gangs cannot hold each other's slots (the messages of a run's nodes are interchangeable: each run sends one
    per node, and a run's message that served another is made up for by that one's). ``prefer``: (run, node
    rank) to take when that run is the one (its own). ``instead_of``: (run, node rank) this slot holds now, given
    up in the same transaction when a run older than it lacks a node (only older ones are looked at then).

    Returns (run id, dispatch, node rank) claimed, or why nothing was: "blocked" (a run lacks a node, but this
    worker holds one of it already: another worker must take it) or "idle" (no run lacks one)."""
    held = Run.objects.filter(pk=instead_of[0]).first() if instead_of else None
    if instead_of and held is None:
        return "idle"
    blocked = False
    stale = timezone.now() - timedelta(seconds=settings.SEEDBED_LOST_AFTER_S)
    for run_id in _gangs_forming(queue, before=held):
        run = locked_run(run_id)
        if run.status != RunStatus.QUEUED or run.kill_requested_at is not None or not run.dispatch_id:
            continue
        RunNode.objects.filter(run=run).exclude(dispatch=run.dispatch_id).delete()
        RunNode.objects.filter(run=run, heartbeat_at__lt=stale).delete()
        claims = list(RunNode.objects.filter(run=run).values_list("node_rank", "machine"))
        free = sorted(set(range(run_nnodes(run))) - {rank for rank, _ in claims})
        if not free:
            continue
        if any(other == machine for _, other in claims):
            blocked = True
            continue
        rank = prefer[1] if prefer and prefer[0] == run.pk and prefer[1] in free else free[0]
        if instead_of:
            RunNode.objects.filter(run_id=instead_of[0], node_rank=instead_of[1], worker=worker).delete()
        RunNode.objects.create(run=run, node_rank=rank, dispatch=run.dispatch_id, worker=worker, machine=machine,
                               host=host, port=port if rank == 0 else None, heartbeat_at=timezone.now())
        return run.pk, run.dispatch_id, rank
    return "blocked" if blocked else "idle"


def run_node_gang(*, run_id: int, dispatch: str, node_rank: int, worker: str) -> str:
    """A claiming node's view of its gang (and its heartbeat): "complete" once every node of the run is claimed
    by this dispatch, "waiting" before, "gone" when the run no longer waits for it (killed, ended, dispatched
    again, or its claim was dropped)."""
    held = RunNode.objects.filter(run_id=run_id, node_rank=node_rank, worker=worker, dispatch=dispatch) \
        .update(heartbeat_at=timezone.now())
    run = Run.objects.filter(pk=run_id).only("status", "dispatch_id", "kill_requested_at", "config").first()
    if (not held or run is None or run.dispatch_id != dispatch or run.kill_requested_at is not None
            or run.status not in (RunStatus.QUEUED, RunStatus.RUNNING)):
        return "gone"
    claimed = RunNode.objects.filter(run_id=run_id, dispatch=dispatch).count()
    return "complete" if claimed >= run_nnodes(run) else "waiting"


def run_node_release(*, run_id: int, node_rank: int, worker: str) -> None:
    """A node task gives its claim back (its gang did not form in time, or the run went away)."""
    RunNode.objects.filter(run_id=run_id, node_rank=node_rank, worker=worker).delete()


def run_node_master(*, run_id: int, dispatch: str) -> tuple[str, int] | None:
    """Node 0's rendezvous address of the gang, which every node's torchrun joins."""
    row = RunNode.objects.filter(run_id=run_id, dispatch=dispatch, node_rank=0).values_list("host", "port").first()
    return (row[0], row[1]) if row and row[1] else None


def run_node_heartbeat(*, run_id: int, node_rank: int, worker: str, pid: int | None = None,
                       started: bool = False) -> bool:
    """A node other than 0 is alive (node 0's heartbeat is the run's own). False once the run is no longer
    running or the claim is no longer this worker's: the node must stop."""
    updates = {"heartbeat_at": timezone.now(), **({"pid": pid} if pid is not None else {}),
               **({"started_at": timezone.now()} if started else {})}
    held = RunNode.objects.filter(run_id=run_id, node_rank=node_rank, worker=worker).update(**updates)
    return bool(held) and Run.objects.filter(pk=run_id, status=RunStatus.RUNNING).exists()


def run_node_exit(*, run_id: int, node_rank: int, worker: str, outcome: str, error: str = "") -> None:
    """A node's training process exited; node 0 reads the others' errors when the run fails."""
    RunNode.objects.filter(run_id=run_id, node_rank=node_rank, worker=worker).update(
        ended_at=timezone.now(), outcome=outcome, error=error[:20_000])


def run_node_lost(*, run_id: int, dispatch: str) -> str:
    """The error of another node of the run whose training process, or one of its ranks, a signal it did not ask
    for killed (its outcome "signaled": "rank 3 killed by SIGKILL ..."), the first to end; "" if none. Node 0 sees
    such a loss as its own ranks' broken connections: the run's attempt was lost, not failed. (Read after
    ``run_node_errors``, which waits for the nodes to report.)"""
    row = (RunNode.objects.filter(run_id=run_id, dispatch=dispatch, node_rank__gt=0, outcome="signaled")
           .exclude(ended_at=None).order_by("ended_at").first())
    return row.error if row is not None else ""


def run_node_errors(*, run_id: int, dispatch: str, wait_s: float = 10.0) -> str:
    """What the run's other nodes said when they failed, one line each (waiting up to ``wait_s`` for each node
    to report its exit: a rank failing on node 1 shows on node 0 as a broken connection, the cause is node 1's)."""
    import time

    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        rows = list(RunNode.objects.filter(run_id=run_id, dispatch=dispatch, node_rank__gt=0))
        if all(r.ended_at for r in rows):
            break
        time.sleep(0.25)
    return "".join(f"node {r.node_rank} ({r.machine}): {r.error.strip().splitlines()[-1][:500]}\n"
                   for r in rows if r.error.strip())
