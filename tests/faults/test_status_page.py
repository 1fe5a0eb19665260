"""The /status page: the supervised services (./seedbed up's services.json), the queues, the last reconciler pass,
the runs waiting for the queue; all of it for staff, the queues and their own projects' runs for anyone else."""
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
    user.is_staff = True  # the services and the reconciler's details are staff's (an ordinary user's view: below)
    user.save()
    client = Client()
    client.force_login(user)
    page = client.get("/status/").content.decode()
    assert 'data-service="web server"' in page and '<td class="restarts">2</td>' in page
    assert "exit code 1 at 10:00:00" in page and "sent again: [3]" in page and "s ago" in page
    assert 'data-queue="cpu"' in page and "waiting for the queue: the broker did not take the run" in page
    stranger = django_user_model.objects.create_user(username="sam", password="x")
    client.force_login(stranger)
    assert "waiting for the queue" not in client.get("/status/").content.decode()


def _hostile_setup(settings, tmp_path, model_dir, django_user_model):
    """Supervisor state with pids and log paths, a reconciler pass naming runs, and two users' waiting and running
    runs, each in the user's personal project."""
    from webapp.runs import services
    from webapp.runs.models import Run, RunStatus
    from webapp.status import write_maintenance_pass

    settings.SEEDBED_HOME = tmp_path
    (tmp_path / "services.json").write_text(json.dumps({"written_at": "2026-11-23T10:00:00Z", "supervisor_pid": 4242,
        "services": [{"name": "web server", "pid": 31337, "restarts": 0, "up_s": 5, "last_exit": None,
                      "log": "/srv/seedbed/logs/web-secret.log"}]}))
    write_maintenance_pass({"lost": [9911], "redispatched": [9922], "stopped": {}})
    ann = django_user_model.objects.create_user(username="ann", password="x")
    ben = django_user_model.objects.create_user(username="ben", password="x")
    runs = {}
    for owner in (ann, ben):
        waiting = services.run_create(config=tiny_config(model_path=model_dir), user=owner, name=f"{owner}-waiting")
        Run.objects.filter(pk=waiting.pk).update(dispatch_note=f"waiting for the queue ({owner})")
        running = services.run_create(config=tiny_config(model_path=model_dir), user=owner, name=f"{owner}-running")
        Run.objects.filter(pk=running.pk).update(status=RunStatus.RUNNING, worker=f"cpu-{owner}@node7")
        runs[owner.username] = (waiting, running)
    return ann, ben, runs


def test_an_ordinary_user_sees_only_their_own_runs_queue_state(settings, tmp_path, model_dir, django_user_model):
    ann, _, runs = _hostile_setup(settings, tmp_path, model_dir, django_user_model)
    client = Client()
    client.force_login(ann)
    response = client.get("/status/")
    page = response.content.decode()
    assert response.status_code == 200
    # their own runs, waiting and running, and the queues' depths as numbers
    assert "ann-waiting" in page and "waiting for the queue (ann)" in page and "ann-running" in page
    assert 'data-queue="cpu"' in page
    # nothing about the machine or other users: no pids, log paths, supervisor, workers, reconciler's run ids
    for secret in ("31337", "4242", "web-secret.log", "/srv/seedbed", 'data-service="web server"', "9911", "9922",
                   "ben-waiting", "ben-running", "waiting for the queue (ben)", "cpu-ben@node7"):
        assert secret not in page, secret
    assert 'id="services"' not in page and 'id="workers"' not in page


def test_staff_see_everything(settings, tmp_path, model_dir, django_user_model):
    _, _, runs = _hostile_setup(settings, tmp_path, model_dir, django_user_model)
    staff = django_user_model.objects.create_user(username="root", password="x", is_staff=True)
    client = Client()
    client.force_login(staff)
    page = client.get("/status/").content.decode()
    for shown in ("31337", "4242", "/srv/seedbed/logs/web-secret.log", 'data-service="web server"', "9911", "9922",
                  "ann-waiting", "ben-waiting", "ben-running", "cpu-ben@node7", 'id="workers"'):
        assert shown in page, shown


def test_the_status_page_shows_the_free_space_of_seedbed_home_with_a_warning_when_low(user, settings, tmp_path):
    """Staff see how much space $SEEDBED_HOME has left, with a warning under SEEDBED_DISK_WARN_MB."""
    import shutil

    settings.SEEDBED_HOME = tmp_path
    user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    free_mb = shutil.disk_usage(tmp_path).free / 1e6
    settings.SEEDBED_DISK_WARN_MB = free_mb * 10  # less free than that: warned
    page = client.get("/status/").content.decode()
    assert f'data-disk="{tmp_path}" class="warning"' in page and " free: warning, under " in page
    settings.SEEDBED_DISK_WARN_MB = 1  # plenty
    page = client.get("/status/").content.decode()
    assert f'data-disk="{tmp_path}">' in page and "warning, under" not in page
