"""A sweep on the Slurm queue and a controller that goes away, against the real cluster (tests/slurm/conftest.py):
a 4-seed sweep's policy stops a seed there as on Celery workers (its job cancelled with it), and launches made
while the controller is down are accepted, submitted once it is back, and no run is lost."""
from __future__ import annotations

import subprocess
import time

import pytest

from tests.conftest import tiny_config, wait_for
from tests.slurm.helpers import beating_until_ended, ended, squeue
from webapp.runs import services as run_services
from webapp.runs.models import Run, RunStatus
from webapp.sweeps import services
from webapp.sweeps.models import PolicyDecision

pytestmark = [pytest.mark.django_db(transaction=True)]

POLICY = {"name": "median", "metric": "entropy", "mode": "max", "grace_steps": 2, "min_peers": 1, "min_delta": 0.0,
          "smoothing": "none"}


def test_a_four_seed_sweep_on_the_slurm_queue_whose_policy_stops_a_seed(celery_worker, slurm_queue, slurm_env):
    sweep = services.sweep_create(config=tiny_config(total_steps=400), seeds=[31, 32, 33, 34], concurrency=4,
                                  policy=POLICY, name="slurm sweep", queue="slurm")
    runs = list(sweep.runs.order_by("pk"))
    assert {r.queue for r in runs} == {"slurm"}
    decision = wait_for(lambda: PolicyDecision.objects.filter(sweep=sweep, action="stop").first(), timeout=120,
                        what="the policy's stop")
    assert decision.rule == "median" and decision.outcome == "applied"
    stopped = ended(Run.objects.get(pk=decision.run_id), timeout=60)
    assert stopped.status == RunStatus.KILLED and stopped.killed_by == "policy:median" and stopped.error == ""
    wait_for(lambda: squeue(slurm_env, stopped.slurm_job_id) in ("", "COMPLETED"), timeout=30,
             what="the stopped seed's job to end")
    done = [ended(r, timeout=240) for r in runs]
    stops = set(PolicyDecision.objects.filter(sweep=sweep, action="stop", outcome="applied").values_list("run_id",
                                                                                                        flat=True))
    assert {r.pk for r in done if r.status == RunStatus.KILLED} == stops and len(stops) < 4
    assert all(r.status == RunStatus.SUCCEEDED for r in done if r.pk not in stops), [r.error for r in done]
    assert len({r.slurm_job_id for r in done}) == 4  # a job each


def test_launches_while_the_controller_is_down_are_submitted_once_it_is_back(celery_worker, worker_env, slurm_queue,
                                                                            slurm_env):
    from workers.slurm import cluster

    home = worker_env[1]
    before = run_services.run_create(config=tiny_config(total_steps=1500, seed=41), queue="slurm")
    wait_for(lambda: Run.objects.filter(pk=before.pk, status=RunStatus.RUNNING, last_step__gte=2).exists(),
             timeout=60, what="a run training before the outage")
    cluster.stop_controller(home)
    try:
        down_at = time.monotonic()
        during = run_services.run_create(config=tiny_config(total_steps=6, seed=42), queue="slurm")
        assert during.status == RunStatus.QUEUED  # accepted
        waiting = wait_for(lambda: Run.objects.filter(pk=during.pk, dispatch_note__startswith=run_services.WAITING_FOR_SLURM)
                           .first(), timeout=40, what="the waiting note")
        assert waiting.slurm_job_id == "" and "sbatch" in waiting.dispatch_note
        def down_for_30_s() -> bool:  # the run training before the outage goes on without the controller throughout
            assert Run.objects.get(pk=before.pk).status == RunStatus.RUNNING
            return time.monotonic() - down_at >= 30

        wait_for(down_for_30_s, timeout=60, what="30 s of outage", every=1)
    finally:
        cluster.start_controller(home)
    done = beating_until_ended(during, timeout=180)
    assert done.status == RunStatus.SUCCEEDED, done.error
    jobs = subprocess.run(["squeue", "-h", "-a", "-t", "all", "-n", f"seedbed-run-{during.pk}", "-o", "%i"],
                          env=slurm_env, capture_output=True, text=True).stdout.split()
    assert jobs == [done.slurm_job_id]  # submitted once
    first = ended(before, timeout=180)
    assert first.status == RunStatus.SUCCEEDED and first.restarts == 0, first.error
