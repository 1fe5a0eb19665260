"""TRL runs on a real Celery worker (real Redis, torchrun, TRL's GRPOTrainer on the tiny model): curves stored
while it runs, a kill that saves a checkpoint and ends ``killed`` (whatever torchrun's exit code), a resume
that continues from that checkpoint, two processes, and a 4-seed TRL sweep whose median policy stops a seed."""
from __future__ import annotations

import os
import re

import pytest

from tests.conftest import tiny_config, wait_for
from tests.workers.test_train_run import RUN_TIMEOUT, assert_every_step_complete, status_of, wait_status
from webapp.runs import services
from webapp.runs.models import Checkpoint, Run, RunStatus
from webapp.sweeps import services as sweep_services
from webapp.sweeps.models import PolicyDecision

pytestmark = [pytest.mark.django_db(transaction=True)]


def trl(**overrides) -> dict:
    return tiny_config(engine="trl", **overrides)


def folder(run: Run, worker_env):
    """The run's folder under the worker's $SEEDBED_HOME."""
    return worker_env[1] / "runs" / str(run.uid)


def engine_group_gone(run: Run, worker_env) -> bool:
    """The engine's process group (torchrun and its ranks), whose leader's pid the run folder records, is gone."""
    pgid = int((folder(run, worker_env) / "engine.pid").read_text())
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_trl_run_is_killed_with_a_checkpoint_and_resumes_from_it(celery_worker, worker_env):
    run = services.run_create(config=trl(total_steps=400, seed=11))
    # live: steps are stored while the run is still running
    run = wait_for(lambda: Run.objects.filter(pk=run.pk, last_step__gte=3, status=RunStatus.RUNNING).first(),
                   timeout=RUN_TIMEOUT, what="3 TRL steps stored while it runs")
    services.run_kill(run_id=run.pk, killed_by="user:test", reason="testing a TRL kill")
    run = wait_status(run.pk, RunStatus.KILLED, RunStatus.FAILED, timeout=90)
    assert run.status == RunStatus.KILLED and run.error == "", run.error  # stopped by its callback, saved
    assert 3 <= run.last_step < 400
    assert_every_step_complete(run.pk, run.last_step)
    ckpt = Checkpoint.objects.filter(run=run).order_by("-step").first()
    assert ckpt.step == run.last_step and os.path.basename(ckpt.path).startswith("checkpoint-")
    assert os.path.isfile(os.path.join(ckpt.path, "config.json"))  # a model folder: evaluations and new runs load it
    assert run.engine_config.get("num_generations") == 4 and run.engine_config.get("engine") == "trl"
    wait_for(lambda: engine_group_gone(run, worker_env), timeout=15, what="torchrun and its ranks to be gone")

    killed_at = run.last_step
    services.run_resume(run_id=run.pk)
    # the resumed attempt starts from the checkpoint: nothing after it is kept, nothing before it is redone
    wait_for(lambda: Run.objects.get(pk=run.pk).last_step >= killed_at + 3, timeout=RUN_TIMEOUT,
             what="the resumed run to go 3 steps past its checkpoint")
    services.run_kill(run_id=run.pk, killed_by="user:test", reason="enough")
    run = wait_status(run.pk, RunStatus.KILLED, RunStatus.FAILED, timeout=90)
    assert run.status == RunStatus.KILLED and run.attempts == 2, run.error
    assert_every_step_complete(run.pk, run.last_step)
    assert "resuming at step %d" % killed_at in (folder(run, worker_env) / "worker.log").read_text()


def test_a_two_process_trl_run_trains_every_step(celery_worker):
    run = services.run_create(config=trl(total_steps=5, nproc_per_node=2, seed=12))
    run = wait_status(run.pk, RunStatus.SUCCEEDED, RunStatus.FAILED)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert_every_step_complete(run.pk, 5)
    assert Checkpoint.objects.filter(run=run, step=5).exists()
    assert run.engine_config["generation_batch_size"] == 16

    # its checkpoint is a model like any other: pass@k evaluates it, and a new (Seedbed) run starts from it
    from webapp.evals import services as eval_services
    from webapp.evals.models import EvalResult, EvalStatus

    ckpt = run.checkpoints.get(step=5)
    job = eval_services.eval_create(run=run, models=["base", f"ckpt:{ckpt.pk}"], task="arithmetic", problems=4, n=4,
                                    ks=[1, 4])
    wait_for(lambda: job.__class__.objects.get(pk=job.pk).status in (EvalStatus.SUCCEEDED, EvalStatus.FAILED),
             timeout=RUN_TIMEOUT, what="the evaluation of the TRL checkpoint")
    job.refresh_from_db()
    assert job.status == EvalStatus.SUCCEEDED, job.error
    assert EvalResult.objects.filter(model__path=ckpt.path).count() == 4
    child = services.run_create(config=tiny_config(total_steps=2, model_path=ckpt.path, seed=13))
    child = wait_status(child.pk, RunStatus.SUCCEEDED, RunStatus.FAILED)
    assert child.status == RunStatus.SUCCEEDED, child.error


def test_a_failing_trl_run_fails_with_trls_error(celery_worker, worker_env, tmp_path):
    # a model folder that passes the form's check (config.json) but holds no weights: TRL cannot load it
    model = tmp_path / "broken"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama"}')
    run = services.run_create(config=trl(total_steps=3, model_path=str(model)))
    run = wait_status(run.pk, RunStatus.SUCCEEDED, RunStatus.FAILED)
    assert run.status == RunStatus.FAILED and "engine exited with code" in run.error
    # the cause a rank printed, not only torchrun's "ChildFailedError"
    assert re.search(r"engine exited with code \d+: (\[rank0\]: )?\w+Error: ", run.error), run.error[-2000:]
    assert engine_group_gone(run, worker_env)


def test_a_four_seed_trl_sweep_with_a_median_policy_stops_a_seed(celery_worker, worker_env):
    policy = {"name": "median", "metric": "entropy", "mode": "max", "grace_steps": 2, "min_peers": 1,
              "min_delta": 0.0, "smoothing": "none"}
    sweep = sweep_services.sweep_create(config=trl(total_steps=300), seeds=[31, 32, 33, 34], concurrency=2,
                                        policy=policy, name="trl sweep")
    decision = wait_for(lambda: PolicyDecision.objects.filter(sweep=sweep, action="stop").first(),
                        timeout=RUN_TIMEOUT, what="the policy's first stop of a TRL seed")
    assert decision.rule == "median" and decision.outcome == "applied" and decision.value < decision.threshold
    stopped = wait_for(lambda: Run.objects.filter(pk=decision.run_id, status=RunStatus.KILLED).first(),
                       timeout=90, what="the stopped TRL run to end")
    assert stopped.killed_by == "policy:median" and stopped.error == ""
    assert Checkpoint.objects.filter(run=stopped, step=stopped.last_step).exists()
    # its slot went to a queued seed
    wait_for(lambda: sweep.runs.exclude(pk__in=[decision.run_id]).filter(started_at__isnull=False).count() >= 2,
             timeout=60, what="a queued seed to take the slot")
    live = list(sweep.runs.filter(status__in=[RunStatus.RUNNING, RunStatus.QUEUED], kill_requested_at__isnull=True)
                .values_list("pk", flat=True))
    sweep_services.sweep_kill_runs(sweep_id=sweep.pk, run_ids=live, killed_by="user:test")
    wait_for(lambda: not sweep.runs.exclude(status__in=[RunStatus.KILLED, RunStatus.SUCCEEDED]).exists(),
             timeout=120, what="every run of the sweep to end")
    # a run's end is recorded when its training child exits; torchrun's ranks may take a moment longer to go
    started = list(sweep.runs.filter(started_at__isnull=False))
    wait_for(lambda: all(engine_group_gone(r, worker_env) for r in started), timeout=15,
             what="every run's torchrun and ranks to be gone")
