"""The sweep page's Activity (its audit rows: sweep.launch, the runs' kills) refreshes while the sweep is live, as
its other live sections do (htmx polling its fragment; 286 and no polling once the sweep has ended)."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.conftest import logged_in
from tests.sweeps.conftest import make_running
from webapp.runs import services as run_services
from webapp.runs.models import RunStatus
from webapp.sweeps import services

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]  # run_kill and run_finish lock rows: again on PostgreSQL


def audit_section(html: str) -> str:
    """The opening tag of the Activity section."""
    return re.search(r'<section id="audit"[^>]*>', html).group(0)


def test_a_kill_recorded_after_the_page_was_rendered_shows_in_the_polled_activity(
        config, client_in, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        sweep = services.sweep_create(config=config, seeds=[1, 2], concurrency=2)
    first, second = (make_running(run) for run in sweep.runs.order_by("pk"))
    url = reverse("sweeps:activity", args=[sweep.pk])
    page = client_in.get(reverse("sweeps:detail", args=[sweep.pk])).content.decode()
    tag = audit_section(page)
    assert f'hx-get="{url}"' in tag and 'hx-trigger="every 2s"' in tag and 'hx-swap="outerHTML"' in tag
    assert 'data-action="sweep.launch"' in page and 'data-action="run.kill"' not in page

    run_services.run_kill(run_id=first.pk, reason="diverged")  # after the page was rendered
    live = client_in.get(url)
    assert live.status_code == 200
    html = live.content.decode()
    assert f'hx-get="{url}"' in audit_section(html)  # still live: it polls on
    assert 'data-action="run.kill"' in html and f"run {first.pk}" in html and 'data-action="sweep.launch"' in html

    for run in (first, second):  # the sweep ends: the last answer stops the polling (286) and polls no more
        run_services.run_finish(run_id=run.pk, status=RunStatus.KILLED if run == first else RunStatus.FAILED)
    ended = client_in.get(url)
    assert ended.status_code == 286 and "hx-get" not in audit_section(ended.content.decode())
    assert 'data-action="run.kill"' in ended.content.decode()
    page = client_in.get(reverse("sweeps:detail", args=[sweep.pk])).content.decode()
    assert "hx-get" not in audit_section(page) and 'data-action="run.kill"' in page


def test_the_activity_fragment_is_the_sweeps_readers_only(config, client, django_user_model,
                                                          django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        sweep = services.sweep_create(config=config, seeds=[1], concurrency=1)
    url = reverse("sweeps:activity", args=[sweep.pk])
    answer = client.get(url)
    assert answer.status_code in (302, 404) and b"sweep.launch" not in answer.content
    outsider = django_user_model.objects.create_user(username="out", password="pw-for-tests-only")
    answer = logged_in(outsider).get(url)
    assert answer.status_code == 404 and b"sweep.launch" not in answer.content
