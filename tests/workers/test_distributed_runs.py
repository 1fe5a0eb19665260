"""Multi-rank Seedbed runs on a real Celery worker (real Redis, torchrun, gloo, the tiny model): the run page's
ranks, a kill that stops both ranks with a checkpoint and ends ``killed``, a resume at one rank from that
checkpoint, and a rank killed by a signal ending the run lost (no restart left) with the rank named (its restart:
tests/faults/test_rank_signals.py)."""
from __future__ import annotations

import os
import signal

import pytest

from tests.conftest import process_alive as alive, tiny_config, wait_for
from tests.workers.test_train_run import RUN_TIMEOUT, assert_every_step_complete, steps_of, wait_status
from webapp.runs import services
from webapp.runs.models import Checkpoint, MetricPoint, Run, RunStatus

pytestmark = [pytest.mark.django_db(transaction=True)]


def two_ranks(**overrides) -> dict:
    return tiny_config(nproc_per_node=2, strategy="ddp", **overrides)


def test_a_two_rank_run_is_killed_on_both_ranks_and_resumes_on_one(celery_worker, worker_env, client):
    run = services.run_create(config=two_ranks(total_steps=3000, seed=21))
    run = wait_for(lambda: Run.objects.filter(pk=run.pk, last_step__gte=3, status=RunStatus.RUNNING)
                   .exclude(ranks=[]).first(), timeout=RUN_TIMEOUT, what="3 steps and the ranks stored while it runs")
    ranks = {r["rank"]: r for r in run.ranks}
    assert sorted(ranks) == [0, 1] and all(alive(r["pid"]) for r in ranks.values())
    assert run.engine_label == "seedbed · 2 ranks, ddp"
    folder = worker_env[1] / "runs" / str(run.uid)
    launcher = int((folder / "engine.pid").read_text())
    # system metrics of the whole process tree (training process, torchrun, both ranks), sampled by the worker
    cpu = wait_for(lambda: MetricPoint.objects.filter(run=run, key="system/cpu_percent").first(), timeout=30,
                   what="a CPU sample of the run's processes")
    rss = MetricPoint.objects.filter(run=run, key="system/rss_mb").order_by("-step").first()
    assert cpu.value > 20 and rss.value > 2 * 300  # two ranks of ~400 MB each, besides torchrun and the parent

    services.run_kill(run_id=run.pk, killed_by="user:test", reason="testing a 2-rank kill")
    run = wait_status(run.pk, RunStatus.KILLED, RunStatus.FAILED, timeout=90)
    assert run.status == RunStatus.KILLED and run.error == "", run.error
    wait_for(lambda: not any(alive(p) for p in (launcher, ranks[0]["pid"], ranks[1]["pid"])), timeout=15,
             what="torchrun and both ranks to be gone")
    assert_every_step_complete(run.pk, run.last_step)
    ckpt = Checkpoint.objects.get(run=run, step=run.last_step)  # both ranks stopped after the same step, saved
    assert os.path.isdir(os.path.join(ckpt.path, "optim")) and os.path.isfile(os.path.join(ckpt.path, "config.json"))

    killed_at = run.last_step
    services.run_resume(run_id=run.pk, nproc_per_node=1)  # one rank: the sharded optimizer state loads at any size
    run = wait_for(lambda: Run.objects.filter(pk=run.pk, last_step__gte=killed_at + 3).first(), timeout=RUN_TIMEOUT,
                   what="the run resumed on one rank to go 3 steps past its checkpoint")
    assert run.config["nproc_per_node"] == 1 and run.config["strategy"] == "none"
    services.run_kill(run_id=run.pk, killed_by="user:test", reason="enough")
    run = wait_status(run.pk, RunStatus.KILLED, RunStatus.FAILED, timeout=90)
    assert run.status == RunStatus.KILLED, run.error
    # every step once, before and after the resume (one rank logs no dist/comm_s: the key sets differ there)
    assert steps_of(run.pk) == list(range(1, run.last_step + 1))
    assert f"resuming at step {killed_at}" in (folder / "worker.log").read_text()


def test_a_rank_killed_by_a_signal_with_no_restart_left_ends_the_run_lost_naming_the_rank(celery_worker):
    run = services.run_create(config=two_ranks(total_steps=3000, seed=22, max_restarts=0))
    run = wait_for(lambda: Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).exclude(ranks=[]).first(),
                   timeout=RUN_TIMEOUT, what="the ranks stored")
    pids = {r["rank"]: r["pid"] for r in run.ranks}
    os.kill(pids[1], signal.SIGKILL)  # as the out-of-memory killer would
    run = wait_status(run.pk, RunStatus.LOST, RunStatus.FAILED, RunStatus.KILLED, RunStatus.SUCCEEDED, timeout=60)
    assert run.status == RunStatus.LOST, run.error[:500]  # a lost attempt (none left), not the run's own error
    first = run.error.splitlines()[0]
    assert first.startswith("rank 1 killed by SIGKILL (") and ("peak RSS" in first or "no memory use" in first), first
    assert f"pid {pids[1]}" in run.error and "gave up" not in first, run.error[:500]
    assert not alive(pids[0])


def test_resuming_on_ranks_the_schema_refuses_changes_nothing(celery_worker):
    run = services.run_create(config=two_ranks(total_steps=2, seed=23, prompts_per_step=4))
    run = wait_status(run.pk, RunStatus.SUCCEEDED, RunStatus.FAILED)
    assert run.status == RunStatus.SUCCEEDED, run.error
    Run.objects.filter(pk=run.pk).update(status=RunStatus.FAILED)
    with pytest.raises(services.TransitionError, match="prompts_per_step"):
        services.run_resume(run_id=run.pk, nproc_per_node=3)  # 4 groups cannot split over 3 ranks
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.config["nproc_per_node"] == 2
