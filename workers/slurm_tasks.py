"""The Slurm executor's tasks, on the maintenance queue (docs/architecture.md, "Slurm queues"): ``slurm_submit``
submits a run's batch job (``send_run`` sends it for a run of a Slurm queue: the web process never calls Slurm),
and ``slurm_pass``, part of every maintenance pass, reads its jobs' states. What they record is a service of
``webapp.runs.services.slurm``; the Slurm commands are ``workers.slurm.commands``.

The batch job runs ``python -m workers.slurm.job RUN_ID`` from this checkout with this worker's environment
(``--export=ALL``: the database, ``SEEDBED_HOME`` and the settings the web app uses), its output in the run's
folder (``slurm-<job id>.log``).
"""
from __future__ import annotations

import logging
import shlex
import sys
from pathlib import Path

from workers.celery_app import app, ensure_django

ensure_django()

from django.conf import settings  # noqa: E402
from django.db import close_old_connections  # noqa: E402
from django.utils import timezone  # noqa: E402

from webapp.runs import services  # noqa: E402
from webapp.runs.models import ENDED_STATUSES, Queue, RunStatus  # noqa: E402
from workers.slurm import commands  # noqa: E402

log = logging.getLogger("seedbed.slurm")
REPO = Path(__file__).resolve().parent.parent
CANCEL_AFTER_S = 15.0  # after the kill's grace period and Slurm's SIGTERM, the job is cancelled this much later


def queue_spec(queue: Queue) -> commands.QueueSpec:
    """What a registered queue gives ``sbatch``."""
    return commands.QueueSpec(conf=queue.slurm_conf, partition=queue.partition, account=queue.account, qos=queue.qos,
                              time_limit_min=queue.time_limit_min, gpus_per_node=queue.gpus_per_node,
                              cpus_per_task=queue.cpus_per_task, mem_per_node_mb=queue.mem_per_node_mb,
                              extra=tuple(queue.extra_sbatch or ()), signal_before_s=queue.warn_before_s)


def batch_script(run_id: int) -> str:
    """The run's batch script: this checkout's Python running the job entry point (``workers.slurm.job``)."""
    return ("#!/bin/bash\n"
            f"# Seedbed run {run_id}: its training child on the first node of the allocation\n"
            f"exec {shlex.quote(sys.executable)} -m workers.slurm.job {run_id}\n")


@app.task(name="workers.slurm_tasks.slurm_submit", ignore_result=True)
def slurm_submit(run_id: int, dispatch: str = "") -> str:
    """Submit the run's batch job, once: a run already submitted, killed or ended is left alone; a refusal fails
    the run with Slurm's words; a controller that does not answer leaves it queued, sent again in a few seconds."""
    close_old_connections()
    run = services.run_slurm_to_submit(run_id=run_id)
    if run is None:
        return "skip"
    spec = queue_spec(services.slurm_queue(run.queue))
    folder = run.folder
    folder.mkdir(parents=True, exist_ok=True)
    try:
        job_id = commands.submit(spec, batch_script(run_id), job_name=f"seedbed-run-{run_id}",
                                 nodes=max(1, int(run.config.get("nnodes", 1) or 1)),
                                 output=str(folder / "slurm-%j.log"), workdir=str(REPO))
    except commands.SlurmRefused as exc:
        services.run_slurm_refused(run_id=run_id, why=str(exc))
        log.warning("run %s: Slurm refused its job: %s", run_id, exc)
        return "refused"
    except commands.SlurmUnreachable as exc:
        services.run_slurm_unreachable(run_id=run_id, why=str(exc))
        log.warning("run %s: Slurm did not answer (%s); it is submitted again later", run_id, exc)
        return "unreachable"
    if not services.run_slurm_submitted(run_id=run_id, job_id=job_id):
        commands.cancel(spec, job_id)  # killed, or submitted by another copy of this task, meanwhile
        return "cancelled"
    log.info("run %s: submitted as Slurm job %s (%s)", run_id, job_id, dispatch or "no dispatch id")
    return job_id


@app.task(name="workers.slurm_tasks.slurm_cancel", ignore_result=True)
def slurm_cancel(queue: str, job_id: str) -> str:
    """Cancel a job its run no longer counts on (the attempt was declared lost and restarts in a new job: a job
    that cannot reach the database, or is stuck, would otherwise hold its nodes). A job already gone is fine."""
    close_old_connections()
    found = services.slurm_queue(queue)
    if found is None:
        return "no such queue"
    try:
        commands.cancel(queue_spec(found), job_id)
    except commands.SlurmUnreachable as exc:
        log.warning("Slurm job %s of a lost attempt: not cancelled, the controller did not answer (%s)", job_id, exc)
        return "unreachable"
    log.info("Slurm job %s of a lost attempt cancelled", job_id)
    return "cancelled"


def slurm_pass() -> dict:
    """One look at every watched run's job (``services.runs_on_slurm``), queue by queue: what Slurm says is
    recorded; a job whose run ended (a kill of a pending run) is cancelled; an ended job's run that did not
    record its end ends with Slurm's words; a job Slurm no longer knows is a lost attempt. A queue whose
    controller does not answer is skipped this time. Returns the run ids acted on, by what was done."""
    done: dict[str, list[int]] = {"cancelled": [], "ended": [], "vanished": []}
    by_queue: dict[str, list] = {}
    for run in services.runs_on_slurm():
        by_queue.setdefault(run.queue, []).append(run)
    for name, runs in by_queue.items():
        queue = services.slurm_queue(name)
        spec = queue_spec(queue)
        try:
            states = commands.job_states(spec, [run.slurm_job_id for run in runs])
        except commands.SlurmUnreachable as exc:
            log.warning("slurm queue %s: the controller did not answer (%s)", name, exc)
            continue
        for run in runs:
            _look_at(spec, run, states.get(run.slurm_job_id), done)
    return {key: ids for key, ids in done.items() if ids}


def slurm_pass_safely() -> dict:
    """``{"slurm": slurm_pass()}`` when it acted on a run, {} otherwise or when it failed (logged: one cluster's
    trouble stops no other repair of the maintenance pass)."""
    try:
        done = slurm_pass()
    except Exception:
        log.exception("maintenance: the Slurm pass failed")
        return {}
    return {"slurm": done} if done else {}


def _look_at(spec: commands.QueueSpec, run, job, done: dict) -> None:
    if job is None:
        services.run_slurm_vanished(run_id=run.pk, job_id=run.slurm_job_id)
        done["vanished"].append(run.pk)
        return
    ended_run = run.status in ENDED_STATUSES
    if job.ended:
        if ended_run:
            services.run_slurm_job_gone(run_id=run.pk, job_id=job.job_id)
        else:
            services.run_slurm_ended(run_id=run.pk, job_id=job.job_id, state=job.state, exit_code=job.exit_code)
            done["ended"].append(run.pk)
        return
    if ended_run or (run.kill_requested_at is not None and job.state == "PENDING"):
        try:
            commands.cancel(spec, job.job_id)
        except commands.SlurmUnreachable:
            return
        done["cancelled"].append(run.pk)
        if not ended_run:
            services.run_slurm_ended(run_id=run.pk, job_id=job.job_id, state="CANCELLED", exit_code="")
        return
    if run.status == RunStatus.RUNNING and run.kill_requested_at is not None and _kill_escalated(spec, run, job):
        done["cancelled"].append(run.pk)
        return
    services.run_slurm_state(run_id=run.pk, state=job.state, reason=job.nodes if job.state == "RUNNING" else job.reason)


def _kill_escalated(spec: commands.QueueSpec, run, job) -> bool:
    """A kill the job has not honoured: past the grace period its processes get SIGTERM from Slurm (``scancel
    --signal``: the training child checkpoints and stops, should the job's own supervision be stuck), and
    ``CANCEL_AFTER_S`` later the job is cancelled (True); the run then ends killed once Slurm says the job ended."""
    waited = (timezone.now() - run.kill_requested_at).total_seconds()
    grace = settings.SEEDBED_KILL_GRACE_S
    try:
        if waited > grace + CANCEL_AFTER_S:
            commands.cancel(spec, job.job_id)
            log.warning("run %s: its kill was not honoured %.0f s after the request; Slurm job %s cancelled",
                        run.pk, waited, job.job_id)
            return True
        if waited > grace:
            commands.cancel(spec, job.job_id, signal="TERM")
    except commands.SlurmUnreachable:
        pass
    return False
