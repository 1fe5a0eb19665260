"""Runs on a Slurm queue, against a real Slurm cluster on this machine (tests/slurm/conftest.py): submitted by the
maintenance worker with sbatch (never by the web process), trained by the batch job on a node as a worker's slot
trains a run, their Slurm state shown, a refusal a clear error on the run, a kill of a pending job cancelling it."""
from __future__ import annotations

import subprocess

import pytest

from tests.conftest import tiny_config, wait_for
from tests.slurm.helpers import squeue
from webapp.runs import services
from webapp.runs.models import MetricPoint, Run, RunStatus

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_a_run_on_the_slurm_queue_is_a_batch_job_that_trains_it(celery_worker, worker_env, slurm_queue, slurm_env,
                                                                 alice_api):
    made = alice_api.post("/runs", {"name": "on slurm", "queue": "slurm",
                                    "config": tiny_config(total_steps=4, seed=3)})
    assert made.status_code == 201, made.content
    assert made.json()["queue"] == "slurm"
    run = wait_for(lambda: Run.objects.filter(pk=made.json()["id"]).exclude(slurm_job_id="").first(), timeout=60,
                   what="the run's Slurm job")
    job_id = run.slurm_job_id
    run = wait_for(lambda: Run.objects.filter(pk=run.pk, status=RunStatus.SUCCEEDED).first(), timeout=240,
                   what="the run to succeed on Slurm")
    assert run.worker.startswith(f"slurm:{job_id}@n") and run.last_step == 4
    assert MetricPoint.objects.filter(run=run, key="reward/mean").count() == 4
    job_log = (worker_env[1] / "runs" / str(run.uid) / f"slurm-{job_id}.log").read_text()
    assert f"run {run.pk}: succeeded" in job_log  # the batch job's own output, in the run's folder
    from workers.slurm_tasks import slurm_pass

    wait_for(lambda: squeue(slurm_env, job_id) in ("", "COMPLETED"), timeout=30, what="the job's end")
    slurm_pass()
    assert Run.objects.get(pk=run.pk).slurm_state == "ENDED"


def test_a_refused_job_fails_the_run_with_slurms_words(celery_worker, slurm_queue, alice_api):
    slurm_queue.partition = "nope"
    slurm_queue.save()
    made = alice_api.post("/runs", {"queue": "slurm", "config": tiny_config(total_steps=4, seed=4)})
    assert made.status_code == 201, made.content
    run = wait_for(lambda: Run.objects.filter(pk=made.json()["id"], status=RunStatus.FAILED).first(), timeout=60,
                   what="the refusal")
    assert run.error.startswith("Slurm refused the job: sbatch: ") and "invalid partition" in run.error.lower()
    assert run.slurm_job_id == "" and run.started_at is None


def test_a_pending_job_shows_its_reason_and_a_kill_cancels_it(celery_worker, slurm_queue, slurm_env, alice_api):
    from workers.slurm_tasks import slurm_pass

    slurm_queue.extra_sbatch = ["--begin=now+1hour"]  # held by Slurm: pending with reason BeginTime
    slurm_queue.save()
    made = alice_api.post("/runs", {"queue": "slurm", "config": tiny_config(total_steps=4, seed=5)})
    run = wait_for(lambda: Run.objects.filter(pk=made.json()["id"]).exclude(slurm_job_id="").first(), timeout=60,
                   what="the run's Slurm job")
    slurm_pass()
    run = Run.objects.get(pk=run.pk)
    assert (run.status, run.slurm_state, run.slurm_reason) == (RunStatus.QUEUED, "PENDING", "BeginTime")
    assert run.dispatch_note == "Slurm: pending (BeginTime)"
    assert alice_api.get(f"/runs/{run.pk}").json()["dispatch_note"] == "Slurm: pending (BeginTime)"
    services.run_kill(run_id=run.pk, killed_by="user:alice")
    assert Run.objects.get(pk=run.pk).status == RunStatus.KILLED
    assert slurm_pass() == {"cancelled": [run.pk]}
    wait_for(lambda: squeue(slurm_env, run.slurm_job_id) in ("", "CANCELLED"), timeout=30, what="the cancel")
    slurm_pass()
    assert Run.objects.get(pk=run.pk).slurm_state == "ENDED" and slurm_pass() == {}


def test_a_queue_nobody_registered_is_a_field_error(alice_api):
    bad = alice_api.post("/runs", {"queue": "nope", "config": tiny_config(total_steps=4)})
    assert bad.status_code == 400
    assert bad.json()["errors"]["queue"] == "no queue named 'nope'; the queues: cpu, gpu"
    assert not Run.objects.exists()


def test_a_two_node_ddp_run_spans_the_allocation_one_rank_per_node(celery_worker, worker_env, slurm_queue, slurm_env,
                                                                   alice_api):
    made = alice_api.post("/runs", {"queue": "slurm", "config": tiny_config(total_steps=6, seed=6, nnodes=2,
                                                                            strategy="ddp")})
    assert made.status_code == 201, made.content
    run = wait_for(lambda: Run.objects.filter(pk=made.json()["id"], status=RunStatus.RUNNING).first(), timeout=60,
                   what="the 2-node run to start")
    nodes = wait_for(lambda: subprocess.run(["squeue", "-h", "-j", run.slurm_job_id, "-o", "%N"], env=slurm_env,
                                            capture_output=True, text=True).stdout.strip(), timeout=10,
                     what="the job's nodes")
    assert nodes == "n[1-2]"
    run = wait_for(lambda: Run.objects.filter(pk=run.pk, status__in=[RunStatus.SUCCEEDED, RunStatus.FAILED,
                                                                      RunStatus.LOST]).first(),
                   timeout=240, what="the 2-node run's end")
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert [s for s, in MetricPoint.objects.filter(run=run, key="reward/mean").order_by("step").values_list("step")] \
        == [1, 2, 3, 4, 5, 6]  # one metrics line per step, from rank 0 alone
    assert sorted(r["rank"] for r in run.ranks) == [0, 1]
    node_log = (worker_env[1] / "runs" / str(run.uid) / "nodes" / "1" / "worker.log").read_text()
    assert "as node 1" in node_log  # the second node's training child, started by srun on n2
    job_log = worker_env[1] / "runs" / str(run.uid) / f"slurm-{run.slurm_job_id}.log"
    # (srun's output reaches the job's log as its step ends, after node 0 recorded the run's end)
    wait_for(lambda: "node 1 on n2 ended with exit code 0" in job_log.read_text(), timeout=30,
             what="the second node's end in the job's log")
