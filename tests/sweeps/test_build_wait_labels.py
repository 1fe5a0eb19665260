"""A sweep's runs a worker took while the built-in model is being built, through Django's test client: the sweeps
list, the sweep dashboard and the runs list give them one label, "waiting" (``runs.waiting.build_waits``). Before,
the sweeps list and the dashboard counted them "2 running" while the runs list said "waiting" for the same runs."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.conftest import tiny_config
from tests.e2e.test_build_wait import building  # noqa: F401 (the fixture: the build's lock held)
from webapp.runs.models import Run, RunStatus
from webapp.sweeps import services as sweep_services

pytestmark = pytest.mark.django_db


def text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_runs_waiting_for_the_model_build_are_waiting_in_every_list(client_in, building,  # noqa: F811
                                                                   django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        sweep = sweep_services.sweep_create(config=tiny_config(device="cuda"), seeds=[0, 1, 2], concurrency=3,
                                            name="demo", policy={"name": "manual"})
    held, queued = list(sweep.runs.order_by("pk")[:2]), sweep.runs.order_by("pk").last()
    Run.objects.filter(pk__in=[r.pk for r in held]).update(status=RunStatus.RUNNING, started_at=timezone.now(),
                                                           heartbeat_at=timezone.now(), worker="test:1")
    Run.objects.filter(pk=queued.pk).update(status=RunStatus.QUEUED)

    row = re.search(r"<tr>\s*<td><a href=\"/sweeps/%d/\">.*?</tr>" % sweep.pk,
                    client_in.get(reverse("sweeps:list")).content.decode(), re.S).group(0)
    cell = re.search(r'<td class="n-running">(.*?)</td>', row, re.S).group(1)
    assert text(cell) == "0 2 waiting" and 'data-status="waiting"' in cell

    dashboard = client_in.get(reverse("sweeps:panel", args=[sweep.pk])).content.decode()
    assert "0 running, 2 waiting for the model build, 1 queued" in text(dashboard)
    for run in held:
        run_row = re.search(r'<tr data-run="%d".*?</tr>' % run.pk, dashboard, re.S).group(0)
        assert re.search(r'data-status="waiting"[^>]*>waiting</span>', run_row) and ">running<" not in run_row

    runs_list = client_in.get(reverse("runs:list")).content.decode()
    for run in held:
        run_row = re.search(r'<tr[^>]*data-run="%d".*?</tr>' % run.pk, runs_list, re.S).group(0)
        assert re.search(r'data-status="waiting"[^>]*>waiting</span>', run_row)

    Run.objects.filter(pk=held[0].pk).update(last_step=1)  # its first step: running everywhere
    cell = re.search(r'<td class="n-running">(.*?)</td>', client_in.get(reverse("sweeps:list")).content.decode(),
                     re.S).group(1)
    assert text(cell) == "1 1 waiting"
