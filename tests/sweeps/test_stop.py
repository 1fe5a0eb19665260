"""A sweep that cannot run away (webapp.sweeps.halting, policies.budget): a started run spends at least one step of
the budget, three new seeds in a row failing before their first step end the sweep's new seeds (said on its page
and in the API), and Stop (page, API) ends the whole sweep: its live runs killed, nothing of it started again."""
from __future__ import annotations

import json

import pytest
from django.urls import reverse

from tests.conftest import join_default_project, logged_in
from tests.sweeps.conftest import make_running
from webapp.projects.models import AuditEvent
from webapp.runs import services as run_services
from webapp.runs.models import Run, RunStatus
from webapp.sweeps import halting, services
from webapp.sweeps.models import FreeSlotUse, Sweep, SweepPlan

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

BAD_ROW = "data.jsonl:1001: expected an object, got list"


def launch(config, capture, *, seeds=(1,), concurrency=1, **kwargs):
    with capture(execute=False):
        return services.sweep_create(config=config, seeds=list(seeds), concurrency=concurrency, **kwargs)


def fail_at_step_0(run: Run, capture) -> None:
    """What the worker does with a seed whose data file has a bad row past the checked ones."""
    make_running(run)
    with capture(execute=False):
        run_services.run_finish(run_id=run.pk, status=RunStatus.FAILED, error=f"loading data\n{BAD_ROW}")


def test_a_run_that_fails_at_step_0_spends_a_step_so_a_budget_of_1_run_starts_no_new_seed(
        config, django_capture_on_commit_callbacks):
    sweep = launch(config, django_capture_on_commit_callbacks, free_slot_use=FreeSlotUse.NEW_SEED, budget=1)
    fail_at_step_0(sweep.runs.get(), django_capture_on_commit_callbacks)
    # b1d04b3: spent 0 steps, so a fresh seed started, and another after it failed, without end
    assert sweep.runs.count() == 1
    use = services.budget_use(sweep, SweepPlan.objects.get(sweep=sweep))
    assert (use.spent, use.committed, use.may_start_seed) == (1, 0, False)


def test_a_seed_killed_in_the_queue_costs_nothing_and_a_running_one_at_step_0_commits_its_run_in_all(
        config, django_capture_on_commit_callbacks):
    sweep = launch(config, django_capture_on_commit_callbacks, seeds=(1, 2), free_slot_use=FreeSlotUse.NEW_SEED,
                   budget=3)
    first, second = sweep.runs.order_by("pk")
    make_running(first)
    with django_capture_on_commit_callbacks(execute=False):
        run_services.run_kill(run_id=second.pk, reason="not needed")
    use = services.budget_use(sweep, SweepPlan.objects.get(sweep=sweep))
    # the running run: 1 step used + 19 committed = its 20; the killed queued one: 0 (its slot was never taken)
    assert (use.spent, use.committed) == (1, 19)


def test_three_new_seeds_in_a_row_failing_before_their_first_step_end_new_seeds_and_say_why(
        config, client_in, django_capture_on_commit_callbacks):
    # a budget of 10 runs of 20 steps: 200 failed seeds' worth of single steps, were it not for the rule
    sweep = launch(config, django_capture_on_commit_callbacks, free_slot_use=FreeSlotUse.NEW_SEED, budget=10)
    for _ in range(1 + halting.FAILED_IN_A_ROW + 2):
        live = sweep.runs.filter(status=RunStatus.QUEUED).first()
        if live is None:
            break
        fail_at_step_0(live, django_capture_on_commit_callbacks)
    runs = list(sweep.runs.order_by("pk"))
    assert len(runs) == 1 + halting.FAILED_IN_A_ROW  # b1d04b3: a new seed after every failure
    plan = SweepPlan.objects.get(sweep=sweep)
    assert plan.new_seeds_started == halting.FAILED_IN_A_ROW
    assert plan.new_seeds_halted.startswith("3 new seeds in a row failed before their first step (runs "
                                            f"{runs[1].pk}, {runs[2].pk}, {runs[3].pk}; the last: {BAD_ROW})")
    page = client_in.get(reverse("sweeps:detail", args=[sweep.pk])).content.decode()
    assert 'id="new-seeds-halted"' in page and "3 new seeds in a row failed" in page
    from webapp.api.selectors import sweep_detail

    assert sweep_detail(Sweep.objects.get(pk=sweep.pk))["new_seeds_halted"] == plan.new_seeds_halted
    assert AuditEvent.objects.filter(action="sweep.new_seeds_halted", target_id=sweep.pk).count() == 1


def test_a_new_seed_that_succeeds_breaks_the_row(config, django_capture_on_commit_callbacks):
    sweep = launch(config, django_capture_on_commit_callbacks, free_slot_use=FreeSlotUse.NEW_SEED, budget=10)
    fail_at_step_0(sweep.runs.get(), django_capture_on_commit_callbacks)   # the initial seed
    fail_at_step_0(sweep.runs.get(status=RunStatus.QUEUED), django_capture_on_commit_callbacks)  # new seed 1
    fresh = make_running(sweep.runs.get(status=RunStatus.QUEUED))  # new seed 2 trains a step, then fails
    Run.objects.filter(pk=fresh.pk).update(last_step=1)
    with django_capture_on_commit_callbacks(execute=False):
        run_services.run_finish(run_id=fresh.pk, status=RunStatus.FAILED, error="out of memory")
    fail_at_step_0(sweep.runs.get(status=RunStatus.QUEUED), django_capture_on_commit_callbacks)  # new seed 3
    assert sweep.runs.filter(status=RunStatus.QUEUED).count() == 1  # new seed 4 started: not 3 in a row
    assert SweepPlan.objects.get(sweep=sweep).new_seeds_halted == ""


def stopped_sweep_scene(config, capture):
    """A new-seed sweep of 2 seeds, 1 at a time: the first running, the second waiting in the queue."""
    sweep = launch(config, capture, seeds=(1, 2), free_slot_use=FreeSlotUse.NEW_SEED, budget=8)
    first, second = sweep.runs.order_by("pk")
    return sweep, make_running(first), second


def test_stop_from_the_page_kills_every_live_run_and_nothing_of_the_sweep_starts_again(
        config, client_in, user, django_capture_on_commit_callbacks):
    sweep, running, waiting = stopped_sweep_scene(config, django_capture_on_commit_callbacks)
    page = client_in.get(reverse("sweeps:detail", args=[sweep.pk])).content.decode()
    assert 'id="stop-sweep"' in page
    with django_capture_on_commit_callbacks(execute=False) as sent:
        response = client_in.post(reverse("sweeps:stop", args=[sweep.pk]), {"reason": "bad data"})
    assert response.status_code == 302 and sent == []  # nothing sent to a worker
    sweep.refresh_from_db()
    assert (sweep.stopped_by, sweep.stop_reason, sweep.is_stopped) == ("user:ada", "bad data", True)
    running.refresh_from_db()
    waiting.refresh_from_db()
    assert running.kill_requested_at is not None and running.killed_by == "user:ada"
    assert waiting.status == RunStatus.KILLED and "stopped: bad data" in waiting.kill_reason
    # the running run stops at its next step and ends killed: its slot starts no seed (b1d04b3 had no Stop; killing
    # the live run started a fresh seed)
    with django_capture_on_commit_callbacks(execute=False) as sent:
        run_services.run_finish(run_id=running.pk, status=RunStatus.KILLED)
    assert sweep.runs.count() == 2 and sent == [] and SweepPlan.objects.get(sweep=sweep).new_seeds_started == 0
    with pytest.raises(run_services.TransitionError, match="which user:ada stopped"):
        run_services.run_resume(run_id=waiting.pk, user=user)
    page = client_in.get(reverse("sweeps:detail", args=[sweep.pk])).content.decode()
    assert 'id="sweep-stopped"' in page and "Stopped by user:ada" in page and 'id="stop-sweep"' not in page
    assert '<span class="status" id="sweep-state" data-ended="true">stopped</span>' in page
    again = client_in.post(reverse("sweeps:stop", args=[sweep.pk]), follow=True).content.decode()
    assert "was already stopped by user:ada" in again
    assert AuditEvent.objects.filter(action="sweep.stop", target_id=sweep.pk).count() == 1


def test_killing_the_live_run_of_a_stopped_sweep_starts_nothing(config, django_capture_on_commit_callbacks):
    sweep = launch(config, django_capture_on_commit_callbacks, free_slot_use=FreeSlotUse.NEW_SEED, budget=8)
    run = make_running(sweep.runs.get())
    halting.sweep_stop(sweep_id=sweep.pk, reason="enough")
    with django_capture_on_commit_callbacks(execute=False):
        run_services.run_finish(run_id=run.pk, status=RunStatus.KILLED)
    note = services.use_freed_slot(sweep=Sweep.objects.get(pk=sweep.pk), freed_run=run)
    assert sweep.runs.count() == 1 and "the sweep was stopped by system" in note


def test_a_viewer_cannot_stop_a_sweep_and_an_outsider_does_not_find_it(
        config, django_user_model, django_capture_on_commit_callbacks):
    sweep, running, _ = stopped_sweep_scene(config, django_capture_on_commit_callbacks)
    viewer = django_user_model.objects.create_user(username="vic", password="pw-for-tests-only")
    join_default_project(viewer, role="viewer")
    outsider = django_user_model.objects.create_user(username="out", password="pw-for-tests-only")
    assert 'id="stop-sweep"' not in logged_in(viewer).get(reverse("sweeps:detail", args=[sweep.pk])).content.decode()
    assert logged_in(viewer).post(reverse("sweeps:stop", args=[sweep.pk])).status_code == 403
    assert logged_in(outsider).post(reverse("sweeps:stop", args=[sweep.pk])).status_code == 404
    assert not Sweep.objects.get(pk=sweep.pk).is_stopped and Run.objects.get(pk=running.pk).kill_requested_at is None


def test_stop_through_the_api_and_its_refusals(config, django_user_model, django_capture_on_commit_callbacks):
    from tests.api.conftest import Api
    from django.test import Client
    from webapp.api.services import token_create

    sweep, running, waiting = stopped_sweep_scene(config, django_capture_on_commit_callbacks)

    def api_of(name: str, role: str | None) -> Api:
        user = django_user_model.objects.create_user(username=name, password="pw-for-tests-only")
        if role:
            join_default_project(user, role=role)
        return Api(Client(), token_create(user=user, name="tests")[1])

    member, viewer, outsider = api_of("mem", "member"), api_of("vic", "viewer"), api_of("out", None)
    assert viewer.post(f"/sweeps/{sweep.pk}/stop").status_code == 403
    assert outsider.post(f"/sweeps/{sweep.pk}/stop").status_code == 404
    with django_capture_on_commit_callbacks(execute=False):
        response = member.post(f"/sweeps/{sweep.pk}/stop", {"reason": "wrong lr"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["stopped_by"], body["stop_reason"], body["killed"]) == ("user:mem", "wrong lr",
                                                                         [running.pk, waiting.pk])
    again = member.post(f"/sweeps/{sweep.pk}/stop")
    assert again.status_code == 409 and "already stopped by user:mem" in again.json()["detail"]
    got = json.loads(member.get(f"/sweeps/{sweep.pk}").content)
    assert (got["stopped_by"], got["stop_reason"], got["stopped_at"]) == ("user:mem", "wrong lr", body["stopped_at"])
    assert member.post(f"/sweeps/{sweep.pk}/stop", {"reason": "x" * 1001}).status_code in (400, 422)
