"""The job core (webapp.jobs; docs/architecture.md#extension-points) on both kinds that use it, training runs and
evaluations, and on a kind declared here: the claim, the heartbeat, the lost pass, the resend pass and the
transition view come from the declaration, not from the kind's own code."""
from __future__ import annotations

import dataclasses

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.conftest import logged_in
from webapp import jobs
from webapp.evals.models import EVAL_JOB, EvalJob, EvalStatus
from webapp.projects.services import default_project
from webapp.runs.models import RUN_JOB, Run, RunStatus

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def new_run(**fields) -> Run:
    return Run.objects.create(project=default_project(), config={}, seed=0, **fields)


def new_eval(**fields) -> EvalJob:
    return EvalJob.objects.create(project=default_project(), task="arithmetic", problems=2, n=2, ks=[1], **fields)


@pytest.fixture(params=["run", "eval"])
def kind_and_row(request):
    """(kind, a function making a row of it): every test below runs on both kinds."""
    return (RUN_JOB, new_run) if request.param == "run" else (EVAL_JOB, new_eval)


def test_both_job_models_have_the_fields_the_core_moves():
    assert jobs.missing_job_fields(Run) == [] and jobs.missing_job_fields(EvalJob) == []
    from webapp.runs.models import WorkerCapacity
    assert "status" in jobs.missing_job_fields(WorkerCapacity)  # (the check can fail)


def test_a_kind_whose_table_misses_a_status_is_refused_when_declared():
    with pytest.raises(ValueError, match="lost"):
        jobs.JobKind("import", EvalJob, {"queued": frozenset({"running"}), "running": frozenset({"lost"})},
                     frozenset(), "cancel_requested_at")


def test_a_claim_starts_a_queued_job_once_and_a_second_delivery_skips(kind_and_row):
    kind, make = kind_and_row
    job = make()
    assert jobs.claim(kind, pk=job.pk, worker="w:1") == "start"
    job.refresh_from_db()
    assert (job.status, job.worker, job.attempts, job.error) == ("running", "w:1", 1, "")
    assert job.heartbeat_at is not None and job.started_at is not None
    assert jobs.claim(kind, pk=job.pk, worker="w:2") == "skip"  # held by a live slot
    job.refresh_from_db()
    assert (job.worker, job.attempts) == ("w:1", 1)


def test_a_stale_or_lost_job_is_resumed_by_its_redelivered_task(kind_and_row, settings):
    kind, make = kind_and_row
    stale = make(status="running", worker="w:1", attempts=1,
                 heartbeat_at=timezone.now() - timedelta(seconds=settings.SEEDBED_LOST_AFTER_S + 5))
    lost = make(status="lost", attempts=1, error="no heartbeat")
    assert jobs.claim(kind, pk=stale.pk, worker="w:2") == "resume"
    assert jobs.claim(kind, pk=lost.pk, worker="w:2") == "resume"
    for job in (stale, lost):
        job.refresh_from_db()
        assert (job.status, job.worker, job.attempts, job.error) == ("running", "w:2", 2, "")


def test_a_job_asked_to_stop_or_ended_is_skipped(kind_and_row):
    kind, make = kind_and_row
    stopping = make(**{kind.stop_field: timezone.now()})
    ended = make(status="succeeded")
    assert jobs.claim(kind, pk=stopping.pk, worker="w:1") == "skip"
    assert jobs.claim(kind, pk=ended.pk, worker="w:1") == "skip"
    assert kind.model.objects.get(pk=stopping.pk).status == "queued"


def test_the_task_skeleton_says_missing_for_a_job_that_is_gone(kind_and_row):
    kind, make = kind_and_row
    job = make()
    pk = job.pk
    job.delete()
    assert jobs.claimed(kind, pk=pk, take=lambda: jobs.claim(kind, pk=pk, worker="w:1")) == "missing"


def test_the_heartbeat_is_refused_once_the_job_is_not_this_workers(kind_and_row):
    kind, make = kind_and_row
    job = make()
    jobs.claim(kind, pk=job.pk, worker="w:1")
    assert jobs.heartbeat(kind, pk=job.pk, worker="w:1") is True
    assert jobs.heartbeat(kind, pk=job.pk, worker="w:2") is False
    kind.model.objects.filter(pk=job.pk).update(status="lost")
    assert jobs.heartbeat(kind, pk=job.pk, worker="w:1") is False


def test_the_lost_pass_declares_stale_jobs_lost_and_leaves_fresh_ones(kind_and_row):
    kind, make = kind_and_row
    old = timezone.now() - timedelta(seconds=120)
    stale, fresh = make(status="running", heartbeat_at=old), make(status="running", heartbeat_at=timezone.now())
    assert jobs.mark_lost(kind, older_than_s=60) == [stale.pk]
    stale.refresh_from_db()
    assert stale.status == "lost" and stale.ended_at is not None and "no heartbeat since" in stale.error
    assert kind.model.objects.get(pk=fresh.pk).status == "running"
    seen = []
    assert jobs.mark_lost(kind, older_than_s=0, on_stale=lambda job, age: seen.append(job.pk)) == [fresh.pk]
    assert seen == [fresh.pk]  # the kind decides what a stale job becomes (a run restarts, say)


def test_the_resend_pass_sends_again_what_the_broker_never_took_unless_it_started_meanwhile(kind_and_row):
    kind, make = kind_and_row
    long_ago = timezone.now() - timedelta(seconds=60)
    never, started = make(enqueued_at=long_ago), make(enqueued_at=long_ago)
    make(enqueued_at=long_ago, dispatched_at=long_ago)  # taken: not listed
    make(enqueued_at=timezone.now())  # sent just now: not yet
    pending = jobs.never_taken(kind, older_than_s=5)
    assert sorted(pk for pk, _ in pending) == sorted([never.pk, started.pk])
    jobs.claim(kind, pk=started.pk, worker="w:1")
    sent = []
    assert jobs.send_again(kind, pending, lambda pk, queue: sent.append((pk, queue))) == [never.pk]
    assert sent == [(never.pk, "cpu")]


def test_an_illegal_move_raises_the_one_transition_error(kind_and_row):
    kind, make = kind_and_row
    job = make(status="succeeded")
    with pytest.raises(jobs.TransitionError, match=f"{kind.name} {job.pk} is succeeded; it cannot become running"):
        kind.move(job, "running")


def test_a_kind_declared_elsewhere_gets_the_core_by_its_declaration():
    """A dataset import, say, declared over a model with the job fields: its own table says a lost import is
    never resumed, and the core's claim obeys it rather than the evaluations'."""
    imports = jobs.JobKind("import", EvalJob, {
        "queued": frozenset({"running", "cancelled"}), "running": frozenset({"succeeded", "lost", "running"}),
        "lost": frozenset(), "succeeded": frozenset(), "cancelled": frozenset()},
        frozenset({"succeeded", "lost", "cancelled"}), "cancel_requested_at")
    job = new_eval(status="lost")
    with pytest.raises(jobs.TransitionError, match="import .* is lost; it cannot become running"):
        jobs.claim(imports, pk=job.pk, worker="w:1")
    queued = new_eval()
    assert jobs.claim(imports, pk=queued.pk, worker="w:1") == "start"


def test_a_refused_transition_is_shown_on_the_page_for_both_kinds(user, model_dir):
    from webapp.runs import services as run_services

    client = logged_in(user)
    run = run_services.run_create(config={"preset": "grpo", "model_path": model_dir, "total_steps": 2}, user=user)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
    response = client.post(f"/runs/{run.pk}/kill/", follow=True)
    assert f"run {run.pk} already ended (succeeded)" in response.content.decode()
    job = new_eval(status=EvalStatus.SUCCEEDED)
    EvalJob.objects.filter(pk=job.pk).update(project=run.project)
    response = client.post(f"/evals/{job.pk}/resume/", follow=True)
    assert f"eval {job.pk} is succeeded; it cannot become queued" in response.content.decode()
    assert Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED


def broken_pass():
    raise RuntimeError("the broker is down")


def test_the_maintenance_beat_runs_every_declared_kinds_pass_and_one_failure_stops_none(settings, monkeypatch):
    """Runs and evaluations are recovered by the one maintenance beat because RUN_JOB and EVAL_JOB, declared at the
    top of their apps' models, name their passes (the runs' first: their app comes first); a kind whose pass fails
    is reported as such and the others still run."""
    import webapp.evals.models as eval_models

    assert jobs.kinds()["eval"] is EVAL_JOB and list(jobs.kinds())[:2] == ["run", "eval"]
    assert jobs.kinds()["run"].recover == "webapp.runs.services.runs_recover"
    stale = new_eval(status="running", attempts=1,
                     heartbeat_at=timezone.now() - timedelta(seconds=settings.SEEDBED_LOST_AFTER_S + 5))
    monkeypatch.setattr(eval_models, "BROKEN_JOB", jobs.JobKind(
        "broken", EvalJob, EVAL_JOB.transitions, EVAL_JOB.ended, "cancel_requested_at",
        recover="tests.jobs.test_job_core.broken_pass"), raising=False)
    done = jobs.recover_all()
    assert done["eval"]["lost"] == [stale.pk] and done["eval"]["resumed"] == [stale.pk]
    assert done["run"] == {"lost": [], "redispatched": [], "disk_restarted": []}
    assert done["broken"] == {"error": "RuntimeError: the broker is down"}
    assert EvalJob.objects.get(pk=stale.pk).status == EvalStatus.QUEUED


TOY_PASS = """calls = []


def recover():
    calls.append(1)
    return {"looked_at": len(calls)}
"""


def test_a_new_job_kind_is_one_declaration_whose_pass_the_maintenance_task_runs(tmp_path, monkeypatch):
    """A kind declared at the top level of an app's models module (here an evaluation-like kind whose pass is a
    function of a module written by the test) is found by the walk of the apps and run by the maintenance task
    itself, its result reported beside the others'; two kinds of one name are refused."""
    import sys

    import webapp.evals.models as eval_models
    from workers import tasks

    import webapp.status

    monkeypatch.setattr(tasks, "close_old_connections", lambda: None)  # the test's connection stays open
    recorded = []
    monkeypatch.setattr(webapp.status, "write_maintenance_pass", recorded.append)  # not into this home's status
    (tmp_path / "toy_kind_pass.py").write_text(TOY_PASS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "toy_kind_pass", raising=False)
    toy = jobs.JobKind("toy", EvalJob, EVAL_JOB.transitions, EVAL_JOB.ended, "cancel_requested_at",
                       recover="toy_kind_pass.recover")
    assert "toy" not in jobs.kinds()
    monkeypatch.setattr(eval_models, "TOY_JOB", toy, raising=False)
    assert jobs.kinds()["toy"] is toy
    assert tasks.maintenance()["toy_jobs"] == {"looked_at": 1} == recorded[0]["toy_jobs"]
    monkeypatch.setattr(eval_models, "OTHER_TOY_JOB", dataclasses.replace(toy, recover="toy_kind_pass.recover "),
                        raising=False)
    with pytest.raises(RuntimeError, match="two job kinds are named 'toy'"):
        jobs.kinds()
