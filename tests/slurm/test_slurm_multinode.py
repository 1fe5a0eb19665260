"""A run over two nodes of the real Slurm cluster (tests/slurm/conftest.py): one batch job on n1 and n2, node 0's
torchrun on the first and the other started by srun, seen and killed from its page in a real browser; a rank
killed on the second node is a lost attempt naming that rank."""
from __future__ import annotations

import os

import pytest

from tests.conftest import SCREENSHOTS, log_in, tiny_config, wait_for
from tests.slurm.helpers import ended, squeue
from webapp.runs import services
from webapp.runs.models import ENDED_STATUSES, Run, RunStatus

pytestmark = [pytest.mark.django_db(transaction=True)]


def two_node_run(**config) -> Run:
    """A 2-node run on the Slurm queue, in the default project (the browser's user is a member), training."""
    made = services.run_create(config=tiny_config(nnodes=2, strategy="ddp", **config), queue="slurm")
    return wait_for(lambda: Run.objects.filter(pk=made.pk, status=RunStatus.RUNNING, last_step__gte=3)
                    .exclude(ranks=[]).first(), timeout=120, what="the 2-node run to train 3 steps")


def test_a_two_node_run_is_seen_and_killed_from_its_page(celery_worker, slurm_queue, slurm_env, live_server,
                                                         browser_page, django_user_model):
    from workers.slurm_tasks import slurm_pass

    run = two_node_run(total_steps=5000, seed=21)
    slurm_pass()  # (the maintenance beat does it every few seconds; here at once)
    assert Run.objects.get(pk=run.pk).slurm_reason == "n[1-2]"
    page = browser_page
    log_in(page, live_server, django_user_model, start=f"/runs/{run.pk}/")
    page.wait_for_selector("#slurm-job")
    assert page.text_content("#slurm-job") == f"{run.slurm_job_id}: running (on n[1-2])"
    assert page.text_content("#engine-badge") == "engine: seedbed · 2 ranks (2 nodes), ddp"
    assert page.locator("#ranks tbody tr").count() == 2
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "slurm_two_node_run.png"), full_page=True)
    page.fill("#kill-reason", "testing a 2-node kill")
    page.once("dialog", lambda dialog: dialog.accept())  # the Kill confirmation
    page.click("#kill")
    done = ended(run, timeout=90)
    page.wait_for_selector(".run-head .status[data-status=killed]", timeout=15_000)
    assert done.status == RunStatus.KILLED and done.error == "", done.error
    assert done.checkpoints.filter(step=done.last_step).exists()  # both nodes' ranks stopped together, and saved
    wait_for(lambda: squeue(slurm_env, run.slurm_job_id) in ("", "COMPLETED"), timeout=30, what="the job's end")
    timeline = {"submitted": done.created_at, "running": done.started_at, "first step": done.first_step_at,
                "kill": done.kill_requested_at, "killed": done.ended_at}
    print("2-node timeline:", ", ".join(f"{k} +{(v - done.created_at).total_seconds():.1f} s"
                                        for k, v in timeline.items()))
    assert list(timeline.values()) == sorted(timeline.values())


def test_a_rank_killed_on_the_other_node_is_a_lost_attempt_naming_the_rank(celery_worker, slurm_queue):
    run = two_node_run(total_steps=5000, seed=22, max_restarts=0)
    rank1 = {r["rank"]: r["pid"] for r in run.ranks}[1]
    os.kill(rank1, 9)  # SIGKILL, as the out-of-memory killer would
    done = wait_for(lambda: Run.objects.filter(pk=run.pk, status__in=ENDED_STATUSES).first(), timeout=90,
                    what="the run's end")
    assert done.status == RunStatus.LOST, done.error[:800]
    assert done.error.startswith("rank 1 killed by SIGKILL ("), done.error[:800]
