"""Stop on a sweep that has ended (every run of it ended: halting.sweep_stop): the page offers no Stop, and the
service (the page, the API and the CLI all go through it) refuses it and changes nothing."""
from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from tests.api.conftest import Api
from tests.conftest import join_default_project
from tests.sweeps.conftest import make_running
from webapp.api.services import token_create
from webapp.projects.models import AuditEvent
from webapp.runs import services as run_services
from webapp.runs.models import Run, RunStatus
from webapp.sweeps import halting, services
from webapp.sweeps.models import FreeSlotUse, Sweep

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def ended_sweep(config, capture, **kwargs) -> Sweep:
    """A sweep of one seed whose run trained to its end."""
    with capture(execute=False):
        sweep = services.sweep_create(config=config, seeds=[1], concurrency=1, **kwargs)
    run = make_running(sweep.runs.get())
    Run.objects.filter(pk=run.pk).update(last_step=run.total_steps)
    with capture(execute=False):
        run_services.run_finish(run_id=run.pk, status=RunStatus.SUCCEEDED)
    return Sweep.objects.get(pk=sweep.pk)


def assert_unchanged(sweep: Sweep) -> None:
    sweep.refresh_from_db()
    assert (sweep.is_stopped, sweep.stopped_by, sweep.stop_reason) == (False, "", "")
    assert not AuditEvent.objects.filter(action="sweep.stop", target_id=sweep.pk).exists()


def test_the_stop_service_refuses_an_ended_sweep_and_leaves_it_ended(config, user,
                                                                     django_capture_on_commit_callbacks):
    sweep = ended_sweep(config, django_capture_on_commit_callbacks)
    with pytest.raises(run_services.TransitionError, match=f"sweep {sweep.pk} has ended: every run of it has ended"):
        halting.sweep_stop(sweep_id=sweep.pk, user=user, reason="too late")
    with pytest.raises(run_services.TransitionError, match="has ended"):
        halting.sweep_stop(sweep_id=sweep.pk)  # the system's stop too
    assert_unchanged(sweep)


def test_a_sweep_whose_ended_run_started_a_new_seed_has_not_ended_and_stops(config,
                                                                          django_capture_on_commit_callbacks):
    sweep = ended_sweep(config, django_capture_on_commit_callbacks, free_slot_use=FreeSlotUse.NEW_SEED, budget=3)
    assert sweep.runs.filter(status=RunStatus.QUEUED).count() == 1 and not sweep.is_ended
    with django_capture_on_commit_callbacks(execute=False):
        _, killed = halting.sweep_stop(sweep_id=sweep.pk, reason="enough")
    assert Sweep.objects.get(pk=sweep.pk).is_stopped and len(killed) == 1


def test_the_api_answers_409_naming_why_for_an_ended_sweep(config, django_user_model,
                                                          django_capture_on_commit_callbacks):
    sweep = ended_sweep(config, django_capture_on_commit_callbacks)
    member = django_user_model.objects.create_user(username="mem", password="pw-for-tests-only")
    join_default_project(member, role="member")
    response = Api(Client(), token_create(user=member, name="tests")[1]).post(f"/sweeps/{sweep.pk}/stop")
    assert response.status_code == 409, response.content
    assert "has ended: every run of it has ended" in response.json()["detail"]
    assert_unchanged(sweep)


def test_the_page_of_an_ended_sweep_offers_no_stop_and_a_post_changes_nothing(
        config, client_in, django_capture_on_commit_callbacks):
    sweep = ended_sweep(config, django_capture_on_commit_callbacks)
    page = client_in.get(reverse("sweeps:detail", args=[sweep.pk])).content.decode()
    assert '<span class="status" id="sweep-state" data-ended="true">ended</span>' in page
    assert 'id="stop-form"' not in page and 'id="stop-sweep"' not in page
    answer = client_in.post(reverse("sweeps:stop", args=[sweep.pk]), follow=True).content.decode()
    assert "has ended: every run of it has ended" in answer and "Sweep stopped" not in answer
    assert_unchanged(sweep)
    page = client_in.get(reverse("sweeps:detail", args=[sweep.pk])).content.decode()
    assert '>ended</span>' in page and 'id="sweep-stopped"' not in page
