"""What a run that has not trained yet waits for (webapp/runs/waiting.py): the run holding the worker slot it will
get, named only where the viewer may read it, and the built-in model's build shown as ``waiting``."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from webapp.projects.services import personal_project
from webapp.runs import services
from webapp.runs.capacity import capacity_report
from webapp.runs.models import Run, RunStatus
from webapp.runs.waiting import build_wait, queue_reasons

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.usefixtures("no_worker_reports")]


def running(run: Run, *, last_step: int, trained_s: float) -> Run:
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=now - timedelta(seconds=trained_s + 60),
                                         first_step_at=now - timedelta(seconds=trained_s), last_step=last_step)
    run.refresh_from_db()
    return run


def sent(run: Run) -> Run:
    Run.objects.filter(pk=run.pk).update(enqueued_at=timezone.now())
    run.refresh_from_db()
    return run


def test_a_queued_run_names_the_run_holding_its_slot_only_where_the_viewer_may_read_it(config, django_user_model,
                                                                                        django_capture_on_commit_callbacks):
    ada = django_user_model.objects.create_user(username="ada", password="x")
    bob = django_user_model.objects.create_user(username="bob", password="x")
    capacity_report(worker="cpu@test", queues=["cpu"], slots=2, cores=2, memory_mb=4096, gpus=0)
    with django_capture_on_commit_callbacks(execute=False):
        demo = services.run_create(config={**config, "total_steps": 60}, user=ada, name="SmolLM2 demo")
        other = services.run_create(config={**config, "total_steps": 60}, user=bob, name="bob's run")
        first = services.run_create(config=config, user=ada, name="first in line")
        second = services.run_create(config=config, user=ada, name="second in line")
        third = services.run_create(config=config, user=ada, name="third in line")
    # ada's demo: 10 of 60 steps in 230 s, 1150 s left; bob's run: 30 of 60 in 290 s, 290 s left
    running(demo, last_step=10, trained_s=230)
    running(other, last_step=30, trained_s=290)
    for run in (first, second, third):
        sent(run)
    queued = [first, second, third]

    for_ada = queue_reasons(runs=queued, viewer=ada)
    assert for_ada[first.pk] == "cpu slot busy"  # bob's run: neither named nor its time left told
    assert for_ada[second.pk] == f"cpu slot held by run {demo.pk}, SmolLM2 demo, about 20 min left"
    assert for_ada[third.pk] == "waiting for a cpu slot: 2 runs ahead of it, every slot taken"
    for_bob = queue_reasons(runs=queued, viewer=bob)
    assert for_bob[first.pk] == f"cpu slot held by run {other.pk}, bob's run, about 5 min left"
    assert for_bob[second.pk] == "cpu slot busy"
    assert personal_project(ada).pk == demo.project_id != other.project_id

    # a free slot: the first in line is being taken, the others wait for the runs' ends
    Run.objects.filter(pk=other.pk).update(status=RunStatus.SUCCEEDED, ended_at=timezone.now())
    later = queue_reasons(runs=queued, viewer=ada)
    assert first.pk not in later
    assert later[second.pk] == f"cpu slot held by run {demo.pk}, SmolLM2 demo, about 20 min left"


def test_with_no_worker_reporting_a_queued_run_says_so(config, django_user_model, django_capture_on_commit_callbacks):
    ada = django_user_model.objects.create_user(username="ada", password="x")
    with django_capture_on_commit_callbacks(execute=False):
        run = sent(services.run_create(config=config, user=ada))
    assert queue_reasons(runs=[run], viewer=ada) == {
        run.pk: "waiting for a worker: no worker of queue cpu has reported lately"}


def test_a_run_waiting_for_the_model_build_shows_waiting_until_its_first_step(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        run = services.run_create(config={"task": "arithmetic"})  # the built-in tiny model
    building = {"state": "building", "step": 40, "pass1": 0.05, "target": 0.15}
    assert build_wait(run, building) == ""  # queued: its queue says why
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=timezone.now())
    run.refresh_from_db()
    assert build_wait(run, building) == ("waiting: the built-in model is being built (SFT step 40, pass@1 0.050 "
                                         "of 0.15)")
    assert build_wait(run, {"state": "ready"}) == ""
    run.last_step = 1
    assert build_wait(run, building) == ""


def test_a_runs_duration_counts_from_its_first_step_not_from_its_wait(user, config, django_capture_on_commit_callbacks):
    from webapp.runs import search, selectors

    with django_capture_on_commit_callbacks(execute=False):
        waited, unstarted = (services.run_create(config=config, user=user) for _ in range(2))
    now = timezone.now()
    # a worker took it 5 min ago; it waited for the model's build and trained its first step 40 s ago
    Run.objects.filter(pk=waited.pk).update(status=RunStatus.SUCCEEDED, started_at=now - timedelta(minutes=5),
                                            first_step_at=now - timedelta(seconds=40), ended_at=now, last_step=6)
    Run.objects.filter(pk=unstarted.pk).update(status=RunStatus.RUNNING, started_at=now - timedelta(minutes=5))
    durations = dict(selectors.run_search(user=user, query=search.parse_query("")).values_list("pk", "duration"))
    assert durations[waited.pk] == timedelta(seconds=40) and durations[unstarted.pk] is None
    waited.refresh_from_db()
    unstarted.refresh_from_db()
    assert selectors.run_duration_s(waited, now) == 40.0 and selectors.run_duration_s(unstarted, now) is None
