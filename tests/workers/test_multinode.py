"""A run spanning two workers (``nnodes: 2``), on this one machine: two real Celery workers under different node
names, one slot each, both on queue "nodes"; each node task launches ``torchrun --nnodes 2 --node-rank i`` with the
rendezvous at node 0's address (127.0.0.1 here). The gang starts only once both workers hold a node, a node whose
gang does not form gives its slot back and queues itself again, the run trains, is killed from the UI, and leaves
no process on either worker."""
from __future__ import annotations

import os
import time

import pytest
from django.test import override_settings

from tests.conftest import process_alive as alive, SCREENSHOTS, WorkerProcess, log_in, tiny_config, wait_for
from tests.workers.test_train_run import RUN_TIMEOUT, assert_every_step_complete, wait_status
from webapp.runs import services
from webapp.runs.models import MetricPoint, Run, RunNode, RunStatus

# on PostgreSQL again (docs/architecture.md#tests-and-benchmarks): the gangs racing for two workers' slots (claims,
# row locks); the run killed from its page forms its gang the same way and runs once, on SQLite
pytestmark = [pytest.mark.django_db(transaction=True)]

QUEUE = "nodes"
GANG_TIMEOUT_S = 6
LONG_GANG_TIMEOUT_S = 15  # as long as the older run's half-formed gang would keep the other worker


@pytest.fixture
def two_workers(worker_env):
    env, home = worker_env
    env = {**env, "SEEDBED_NODE_ADDR": "127.0.0.1", "SEEDBED_GANG_TIMEOUT_S": str(GANG_TIMEOUT_S)}
    workers = [WorkerProcess(env, home, concurrency=1, queues=QUEUE, name=name) for name in ("node-a", "node-b")]
    wait_for_capacity_reports(workers)
    with override_settings(SEEDBED_AUTO_QUEUE=QUEUE):  # device auto -> the workers' queue
        yield workers
    for w in workers:
        w.stop()


def wait_for_capacity_reports(workers) -> None:
    """A worker is "ready." before its capacity reporter's first report lands; a 2-node run launched in between
    is refused ("at most 1 on queue nodes"), so wait for every worker's report."""
    from webapp.runs.models import WorkerCapacity

    names = {w.name.split("@")[0] for w in workers}
    wait_for(lambda: names <= {c.split("@")[0] for c in WorkerCapacity.objects.values_list("worker", flat=True)},
             timeout=60, what="every node worker's capacity report")


def processes_of(folder) -> list[int]:
    """Every process whose environment marks it as one of this run's engines (node 0's or node 1's)."""
    marks = {f"SEEDBED_RUN_DIR={folder}".encode(), f"SEEDBED_RUN_DIR={folder}/nodes/1".encode()}
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/environ", "rb") as fh:
                    if marks & set(fh.read().split(b"\0")) and alive(int(name)):
                        found.append(int(name))
            except OSError:
                pass
    return found


def test_a_two_node_run_starts_as_a_gang_trains_and_is_killed_from_the_ui(two_workers, worker_env, live_server,
                                                                          browser_page, django_user_model):
    blocker = services.run_create(config=tiny_config(total_steps=5000, device="auto", seed=31))
    wait_for(lambda: Run.objects.filter(pk=blocker.pk, last_step__gte=1).exists(), timeout=RUN_TIMEOUT,
             what="the blocking run to hold one worker")
    run = services.run_create(config=tiny_config(total_steps=5000, device="auto", seed=32, nnodes=2,
                                                 strategy="ddp", prompts_per_step=4))
    assert run.queue == QUEUE
    # one worker is busy: the gang cannot form; the free worker's node waits, gives its slot back after the
    # gang timeout and queues itself again; nothing trains meanwhile
    wait_for(lambda: RunNode.objects.filter(run=run).exists(), timeout=30, what="one node claimed")
    wait_for(lambda: "slot given back, node queued again" in "".join(w.log() for w in two_workers),
             timeout=GANG_TIMEOUT_S + 60, what="the waiting node to give its slot back after the gang timeout")
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and not MetricPoint.objects.filter(run=run).exists()
    assert RunNode.objects.filter(run=run).count() <= 1
    assert "slot given back, node queued again" in "".join(w.log() for w in two_workers)

    services.run_kill(run_id=blocker.pk, killed_by="user:test", reason="make room")
    wait_status(blocker.pk, RunStatus.KILLED, RunStatus.FAILED, timeout=90)
    run = wait_for(lambda: Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING, last_step__gte=3)
                   .exclude(ranks=[]).first(), timeout=RUN_TIMEOUT, what="the 2-node run to train 3 steps")
    nodes = list(RunNode.objects.filter(run=run))
    assert [n.node_rank for n in nodes] == [0, 1] and len({n.machine for n in nodes}) == 2
    assert all(n.started_at for n in nodes) and nodes[0].port and nodes[0].host == "127.0.0.1"
    assert sorted(r["rank"] for r in run.ranks) == [0, 1]
    folder = str(worker_env[1] / "runs" / str(run.uid))
    assert len(processes_of(folder)) >= 4  # two torchruns, a rank under each

    # the run page: its engine badge, its two nodes (one worker each) and its two ranks; killed with its button
    page = browser_page
    log_in(page, live_server, django_user_model, start=f"/runs/{run.pk}/")
    assert page.text_content("#engine-badge") == "engine: seedbed · 2 ranks (2 nodes), ddp"
    assert page.locator("#nodes tbody tr").count() == 2 and page.locator("#ranks tbody tr").count() == 2
    assert "127.0.0.1:" in page.text_content("#nodes tr[data-node='0']")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "two_node_run.png"), full_page=True)
    page.fill("#kill-reason", "testing a 2-node kill")
    page.once("dialog", lambda dialog: dialog.accept())  # the Kill confirmation
    page.click("#kill")
    run = wait_status(run.pk, RunStatus.KILLED, RunStatus.FAILED, timeout=90)
    page.wait_for_selector(".run-head .status[data-status=killed]", timeout=15_000)
    assert run.status == RunStatus.KILLED and run.error == "", run.error
    assert_every_step_complete(run.pk, run.last_step)
    assert run.checkpoints.filter(step=run.last_step).exists()  # both nodes' ranks stopped together, and saved
    wait_for(lambda: not processes_of(folder), timeout=20, what="no process of the run left on either worker")
    wait_for(lambda: all(n.ended_at for n in RunNode.objects.filter(run=run)), timeout=20,
             what="both nodes to record their exit")


def test_a_rank_killed_on_the_other_node_is_a_lost_attempt_naming_the_rank(two_workers):
    """Rank 1 (node 1's only rank) SIGKILLed: node 1 reports it lost; node 0, whose rank fails on the broken
    connection, records the run's attempt as lost (no restart left: it ends lost), naming rank 1."""
    run = services.run_create(config=tiny_config(total_steps=5000, device="auto", seed=33, nnodes=2,
                                                 strategy="ddp", prompts_per_step=4, max_restarts=0))
    run = wait_for(lambda: Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING, last_step__gte=2)
                   .exclude(ranks=[]).first(), timeout=RUN_TIMEOUT, what="the 2-node run to train 2 steps")
    rank1 = {r["rank"]: r["pid"] for r in run.ranks}[1]
    os.kill(rank1, 9)  # SIGKILL, as the out-of-memory killer would
    run = wait_status(run.pk, RunStatus.LOST, RunStatus.FAILED, RunStatus.KILLED, timeout=90)
    assert run.status == RunStatus.LOST, run.error[:800]
    assert run.error.startswith("rank 1 killed by SIGKILL ("), run.error[:800]
    node1 = RunNode.objects.get(run=run, node_rank=1)
    assert node1.outcome == "signaled" and node1.error.startswith("rank 1 killed by SIGKILL"), node1.error[:300]


@pytest.mark.postgres
def test_two_half_started_runs_never_deadlock(two_workers):
    """Two 2-node runs launched together on two one-slot workers: each worker may take a node of a different
    run; the gang timeout makes them give way, and both runs end up trained."""
    runs = [services.run_create(config=tiny_config(total_steps=3, device="auto", seed=40 + i, nnodes=2,
                                                   strategy="ddp", prompts_per_step=4)) for i in range(2)]
    for run in runs:
        run = wait_status(run.pk, RunStatus.SUCCEEDED, RunStatus.FAILED, timeout=RUN_TIMEOUT)
        assert run.status == RunStatus.SUCCEEDED, run.error
        assert_every_step_complete(run.pk, 3)


@pytest.mark.postgres
def test_the_oldest_waiting_run_forms_first_and_neither_gang_waits_while_others_train(worker_env, celery_worker):
    """The half-formed state that once took minutes to clear: one worker busy, the other holding a node of the
    older run (taken again after its gang timeout); when the busy worker frees, whatever node task it takes gives
    its slot to the oldest waiting run, which forms at once, then the younger as soon as the older has trained,
    while two other runs train on the cpu worker. Measured: how long each gang waited with both slots free (the
    runs' own training, slow on a loaded machine, is not the scheduler's)."""
    env, home = worker_env
    env = {**env, "SEEDBED_NODE_ADDR": "127.0.0.1", "SEEDBED_GANG_TIMEOUT_S": str(LONG_GANG_TIMEOUT_S)}
    workers = [WorkerProcess(env, home, concurrency=1, queues=QUEUE, name=name) for name in ("gang-a", "gang-b")]
    wait_for_capacity_reports(workers)
    load = []
    try:
        load = [services.run_create(config=tiny_config(total_steps=5000, device="cpu", seed=60 + i)) for i in range(2)]
        with override_settings(SEEDBED_AUTO_QUEUE=QUEUE):
            blocker = services.run_create(config=tiny_config(total_steps=5000, device="auto", seed=62))
            wait_for(lambda: Run.objects.filter(pk__in=[blocker.pk, *(r.pk for r in load)], last_step__gte=1).count()
                     == 3, timeout=RUN_TIMEOUT, what="the blocker and the two other runs to train")
            older, younger = [services.run_create(config=tiny_config(total_steps=3, device="auto", seed=63 + i,
                                                                     nnodes=2, strategy="ddp", prompts_per_step=4))
                              for i in range(2)]
        # the free worker holds a node of the older run, gives its slot back after the gang timeout and takes a
        # node again (the message next in the queue)
        wait_for(lambda: "slot given back" in "".join(w.log() for w in workers)
                 and RunNode.objects.filter(run=older).exists(), timeout=LONG_GANG_TIMEOUT_S + 60,
                 what="a node of the older run given back and taken again")
        services.run_kill(run_id=blocker.pk, killed_by="user:test", reason="make room")
        started = time.monotonic()
        for run in (older, younger):
            run = wait_status(run.pk, RunStatus.SUCCEEDED, RunStatus.FAILED, timeout=RUN_TIMEOUT)
            assert run.status == RunStatus.SUCCEEDED, run.error
            assert_every_step_complete(run.pk, 3)
        took = time.monotonic() - started
        blocker, older, younger = (Run.objects.get(pk=r.pk) for r in (blocker, older, younger))
        assert older.started_at < younger.started_at, "the younger run formed first"
        waits = [(older.started_at - blocker.ended_at).total_seconds(),
                 (younger.started_at - older.ended_at).total_seconds()]
        print(f"gangs formed {waits[0]:.1f} s and {waits[1]:.1f} s after their slots were free; both runs trained "
              f"{took:.0f} s after the blocker was killed")
        # (a half-formed gang used to hold a slot for a gang timeout or more, and its younger rival formed first)
        assert max(waits) < 10, waits
        assert all(s == RunStatus.RUNNING for s in Run.objects.filter(pk__in=[r.pk for r in load])
                   .values_list("status", flat=True)), "the other runs trained meanwhile"
    finally:
        for run in load:
            try:
                services.run_kill(run_id=run.pk, killed_by="user:test", reason="test over")
            except services.TransitionError:
                pass  # ended already
        for run in load:
            wait_status(run.pk, RunStatus.KILLED, RunStatus.FAILED, RunStatus.SUCCEEDED, timeout=90)
        for w in workers:
            w.stop()


def test_a_node_given_back_waits_longer_each_time_jittered_and_capped(settings):
    from workers.tasks import GANG_BACKOFF_CAP_S, gang_backoff_s

    settings.SEEDBED_GANG_TIMEOUT_S = 60
    for attempt in range(1, 12):
        top = min(GANG_BACKOFF_CAP_S, 2.0 ** (attempt - 1))
        draws = [gang_backoff_s(attempt) for _ in range(200)]
        assert all(top / 2 <= d <= top for d in draws), (attempt, min(draws), max(draws))
        assert len(set(draws)) > 150  # jittered: nodes given back together come back apart
    settings.SEEDBED_GANG_TIMEOUT_S = 6  # never longer than the gang timeout itself
    assert max(gang_backoff_s(20) for _ in range(200)) <= 6
