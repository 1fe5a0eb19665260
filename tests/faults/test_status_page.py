"""The /status page: the supervised services (./seedbed up's services.json), the queues, the last reconciler pass,
the runs waiting for the queue; for a user's own projects only."""
from __future__ import annotations

import json

import pytest
from django.test import Client

from tests.conftest import tiny_config

pytestmark = pytest.mark.django_db


def test_the_status_page_shows_services_queues_the_reconciler_and_waiting_runs(user, settings, tmp_path, model_dir,
                                                                               django_user_model):
    from webapp.runs import services
    from webapp.runs.models import Run
    from webapp.status import write_maintenance_pass

    settings.SEEDBED_HOME = tmp_path
    (tmp_path / "services.json").write_text(json.dumps({"written_at": "2026-11-23T10:00:00Z", "supervisor_pid": 7,
        "services": [{"name": "web server", "pid": 11, "restarts": 2, "up_s": 5, "last_exit": "exit code 1 at 10:00:00",
                      "log": "/x/web.log"}]}))
    write_maintenance_pass({"lost": [], "redispatched": [3], "stopped": {}})
    run = services.run_create(config=tiny_config(model_path=model_dir), user=user)
    Run.objects.filter(pk=run.pk).update(dispatch_note="waiting for the queue: the broker did not take the run")
    client = Client()
    client.force_login(user)
    page = client.get("/status/").content.decode()
    assert 'data-service="web server"' in page and '<td class="restarts">2</td>' in page
    assert "exit code 1 at 10:00:00" in page and "sent again: [3]" in page and "s ago" in page
    assert 'data-queue="cpu"' in page and "waiting for the queue: the broker did not take the run" in page
    stranger = django_user_model.objects.create_user(username="sam", password="x")
    client.force_login(stranger)
    assert "waiting for the queue" not in client.get("/status/").content.decode()
