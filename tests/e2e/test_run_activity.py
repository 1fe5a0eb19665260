"""The run page's Activity follows the run while the page is open: a kill asked for elsewhere (the API, another
tab) shows there, and so does the run's end when its worker was found gone, without a reload."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.conftest import log_in
from webapp.projects.services import default_project
from webapp.runs import services as run_services
from webapp.runs.models import Run, RunStatus

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_a_kill_asked_through_the_api_shows_in_the_open_pages_activity(live_server, django_user_model,
                                                                       browser_page, model_dir):
    # running on a worker that is gone (no task sent: a worker another test started must not take it)
    config = run_services.as_config({"preset": "grpo", "model_path": model_dir, "total_steps": 6,
                                     "max_restarts": 2}).to_dict()
    run = Run.objects.create(project=default_project(), config=config, seed=0, name="orphan",
                             status=RunStatus.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now(),
                             worker="gone:1")
    page = browser_page
    log_in(page, live_server, django_user_model, start=f"/runs/{run.pk}/")
    page.wait_for_selector(".run-head .status[data-status=running]")
    assert page.query_selector("#audit-table tr[data-action='run.kill']") is None

    ada = django_user_model.objects.get(username="ada")
    run_services.run_kill(run_id=run.pk, user=ada, reason="its worker is gone")  # what the API does
    page.wait_for_selector("#audit-table tr[data-action='run.kill']", timeout=15_000)  # no reload
    assert page.text_content("#audit-table tr[data-action='run.kill'] .actor") == "ada"
    assert "its worker is gone" in page.text_content("#audit-table tr[data-action='run.kill']")

    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=120))
    assert run_services.runs_mark_lost() == [run.pk]  # the reconciler sees the worker gone
    page.wait_for_selector(".run-head .status[data-status=killed]", timeout=15_000)
    assert "user:ada (its worker is gone)" in page.text_content("#killed-by")
    assert page.query_selector("#audit-table tr[data-action='run.kill']") is not None
    assert page.query_selector("#audit-table tr[data-action='run.restart']") is None
