"""Kill, requeue and time limits of runs on a Slurm queue, against the real cluster (tests/slurm/conftest.py): the
work is kept each time. A requeue (``scontrol requeue``) and a time limit hand the run back after a checkpoint,
counted as a preemption (not a restart); it resumes from that checkpoint with the metrics of an uninterrupted
run; a kill ends it killed, with a checkpoint, its job gone."""
from __future__ import annotations

import os
import signal
import subprocess

import pytest

from tests.conftest import wait_for
from tests.slurm.helpers import beating_until_ended, curve, ended, launch, running_at, squeue
from webapp.runs.models import Checkpoint, Run, RunStatus

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_a_requeue_mid_run_resumes_from_its_checkpoint_with_the_metrics_of_an_uninterrupted_run(
        celery_worker, slurm_queue, slurm_env, alice_api):
    config = dict(total_steps=30, seed=11, checkpoint_every=0)
    requeued, reference = launch(alice_api, **config), launch(alice_api, **config)  # one node each
    run = running_at(requeued, 5)
    job_id = run.slurm_job_id
    subprocess.run(["scontrol", "requeue", job_id], env=slurm_env, check=True, capture_output=True)
    back = wait_for(lambda: Run.objects.filter(pk=run.pk, preemptions=1).first(), timeout=60, what="the hand-back")
    assert back.error.startswith("preempted (Slurm ended the job (a requeue, a preemption or a cancel)); resumes "
                                 f"from its checkpoint of step {back.last_step}")
    assert Checkpoint.objects.filter(run=run, step=back.last_step).exists() and back.last_step < 30
    done, ref = ended(run), ended(reference)
    assert (done.status, ref.status) == (RunStatus.SUCCEEDED, RunStatus.SUCCEEDED), done.error
    assert (done.preemptions, done.restarts, done.slurm_job_id) == (1, 0, job_id)  # the same job, started again
    assert [s for s, _ in curve(done)] == list(range(1, 31))  # one point per step, none twice
    for key in ("reward/mean", "loss/policy", "kl"):
        assert curve(done, key) == curve(ref, key), key  # bit-identical to the run nobody interrupted
    page = alice_api.get(f"/runs/{run.pk}").json()
    assert (page["preemptions"], page["restarts"], page["slurm"]["job_id"]) == (1, 0, job_id)


def test_a_time_limit_checkpoints_before_it_and_the_run_then_finishes(celery_worker, worker_env, slurm_queue,
                                                                      alice_api):
    slurm_queue.time_limit_min, slurm_queue.warn_before_s = 1, 10  # warned 10 to 40 s before the minute is up
    slurm_queue.save()
    # about 40 s of steps (0.05 s each here): more than one attempt's share of the minute
    run = launch(alice_api, total_steps=800, seed=12, checkpoint_every=0, samples_per_step=0)
    back = wait_for(lambda: Run.objects.filter(pk=run.pk, preemptions__gte=1).first(), timeout=120,
                    what="the hand-back before the time limit")
    assert back.error.startswith("preempted (Slurm warned the job before its time limit or a preemption)")
    assert Checkpoint.objects.filter(run=run, step=back.last_step).exists()
    done = ended(run, timeout=300)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert done.restarts == 0 and done.preemptions >= 1 and done.last_step == 800
    assert [s for s, _ in curve(done)] == list(range(1, 801))
    log = (worker_env[1] / "runs" / str(done.uid) / f"slurm-{done.slurm_job_id}.log").read_text()
    assert log.count(f"run {run.pk}: queued") == done.preemptions  # each attempt handed the run back, then went on
    assert f"run {run.pk}: succeeded" in log


def test_a_kill_mid_run_ends_it_killed_with_a_checkpoint_and_its_job_gone(celery_worker, slurm_queue, slurm_env,
                                                                          alice_api):
    run = running_at(launch(alice_api, total_steps=200, seed=13, checkpoint_every=0), 3)
    assert alice_api.post(f"/runs/{run.pk}/kill", {"reason": "enough"}).status_code == 200
    done = ended(run, timeout=60)
    assert done.status == RunStatus.KILLED and done.killed_by == "user:alice"
    assert Checkpoint.objects.filter(run=run, step=done.last_step).exists() and done.last_step < 200
    wait_for(lambda: squeue(slurm_env, run.slurm_job_id) in ("", "COMPLETED"), timeout=30, what="the job's end")
    from workers.slurm_tasks import slurm_pass

    slurm_pass()
    assert Run.objects.get(pk=run.pk).slurm_state == "ENDED"


def test_a_batch_job_killed_under_its_run_is_a_lost_attempt_restarted_in_a_new_job(celery_worker, slurm_queue,
                                                                                   slurm_env, alice_api):
    from workers.exits import parent_pid
    from workers.slurm_tasks import slurm_pass

    run = running_at(launch(alice_api, total_steps=200, seed=14, checkpoint_every=0, max_restarts=1), 3)
    job_id = run.slurm_job_id
    os.kill(parent_pid(run.pid), 9)  # the job's batch process (its training child stops, PDEATHSIG)
    wait_for(lambda: squeue(slurm_env, job_id) in ("", "FAILED"), timeout=30, what="the job's end")
    assert slurm_pass() == {"ended": [run.pk]}
    back = Run.objects.get(pk=run.pk)
    assert back.restarts == 1 and back.slurm_job_id == "" and back.status == RunStatus.QUEUED
    assert f"the Slurm job {job_id} ended FAILED (exit code 0:9)" in back.dispatch_note
    done = beating_until_ended(run, timeout=240)
    assert done.status == RunStatus.SUCCEEDED and done.slurm_job_id != job_id, done.error
    assert [s for s, _ in curve(done)] == list(range(1, 201))


def test_a_kill_the_job_cannot_honour_is_signalled_then_cancelled_by_slurm(celery_worker, slurm_queue, slurm_env,
                                                                           alice_api):
    from django.conf import settings

    from workers.exits import parent_pid
    from workers.slurm_tasks import CANCEL_AFTER_S

    run = running_at(launch(alice_api, total_steps=400, seed=15, checkpoint_every=0), 3)
    job_id, batch = run.slurm_job_id, parent_pid(run.pid)
    os.kill(batch, signal.SIGSTOP)  # the job's supervision stuck: nothing of it records the kill
    try:
        assert alice_api.post(f"/runs/{run.pk}/kill", {"reason": "stuck"}).status_code == 200
        done = beating_until_ended(run, timeout=settings.SEEDBED_KILL_GRACE_S + CANCEL_AFTER_S + 60)
    finally:
        try:
            os.kill(batch, signal.SIGCONT)
        except ProcessLookupError:
            pass
    waited = (done.ended_at - done.kill_requested_at).total_seconds()
    assert done.status == RunStatus.KILLED and waited > settings.SEEDBED_KILL_GRACE_S + CANCEL_AFTER_S, done.error
    # (whichever saw the end first: the job, continued by Slurm's cancel, or the pass reading CANCELLED)
    assert done.error in ("", f"the Slurm job {job_id} ended CANCELLED") and done.killed_by == "user:alice"
    assert Checkpoint.objects.filter(run=run, step__gte=3).exists()  # the child stopped by itself, and saved
    wait_for(lambda: squeue(slurm_env, job_id) in ("", "CANCELLED", "COMPLETED"), timeout=30, what="the job's end")
