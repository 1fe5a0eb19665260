"""What a run's page and the compare page offer and show only once it makes sense, through Django's test client:
Resume names the checkpoint it continues from, and a run that saved none (killed while queued at step 0) is
offered "Start again from step 0" instead; a run's Final shows once it has ended ("–" while it runs). Before:
"Resume from last checkpoint" for a run with none, and a running run's final-so-far shown as its Final."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.sweeps.conftest import log_points, make_running
from webapp.runs import services
from webapp.runs.models import Checkpoint, RunStatus

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def resume_button(client, run) -> str:
    html = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    found = re.search(r'<button type="submit" id="resume"[^>]*>([^<]*)</button>', html)
    return found.group(1) if found else ""


def test_resume_is_offered_only_with_a_checkpoint(client_in, config, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        queued = services.run_create(config=config, name="killed in the queue")
    services.run_kill(run_id=queued.pk, reason="changed my mind")
    queued.refresh_from_db()
    assert queued.status == RunStatus.KILLED and queued.last_step == 0
    assert resume_button(client_in, queued) == "Start again from step 0"
    Checkpoint.objects.create(run=queued, step=4, path="/nowhere/step-4")
    Checkpoint.objects.create(run=queued, step=2, path="/nowhere/step-2")
    assert resume_button(client_in, queued) == "Resume from last checkpoint (step 4)"


def test_the_compare_pages_final_shows_once_a_run_has_ended(client_in, config, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        running, ended = (services.run_create(config=config, name=n) for n in ("running", "ended"))
    for run in (running, ended):
        log_points(make_running(run), "reward/mean", [0.25] * 6)  # (total_steps 6)
    services.run_finish(run_id=ended.pk, status=RunStatus.SUCCEEDED)
    html = client_in.get(reverse("runs:compare"), {"ids": f"{running.pk},{ended.pk}",
                                                   "metric": "reward/mean"}).content.decode()
    cells = {int(pk): final for pk, final in re.findall(
        r'<tr data-run="(\d+)">.*?<td class="final">(.*?)</td>', html, re.S)}
    assert cells[ended.pk] == "0.25" and "–" in cells[running.pk] and "0.25" not in cells[running.pk]
