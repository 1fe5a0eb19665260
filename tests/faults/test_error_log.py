"""Every 500 and every failed task leaves its traceback in $SEEDBED_HOME/logs/errors.log (rotated), with the
request path or the task's arguments: the run, sweep or job it was about."""
from __future__ import annotations

import logging

import pytest
from django.test import Client

from tests.conftest import tiny_config

def errors_log() -> str:
    handler = next(h for h in logging.getLogger("django.request").handlers if hasattr(h, "baseFilename"))
    handler.flush()
    try:
        with open(handler.baseFilename, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:  # (opened on the first error)
        return ""


@pytest.mark.django_db
def test_a_500_is_logged_with_its_traceback_and_path(user, monkeypatch, model_dir):
    from webapp.runs import selectors, services

    run = services.run_create(config=tiny_config(model_path=model_dir), user=user)

    def broken(*args, **kwargs):
        raise RuntimeError("injected fault in the run page")

    monkeypatch.setattr(selectors, "run_checkpoints", broken)
    client = Client(raise_request_exception=False)
    client.force_login(user)
    before = len(errors_log())
    response = client.get(f"/runs/{run.pk}/")
    assert response.status_code == 500
    logged = errors_log()[before:]
    assert f"Internal Server Error: /runs/{run.pk}/" in logged and "Traceback" in logged
    assert "RuntimeError: injected fault in the run page" in logged


@pytest.mark.django_db(transaction=True)
def test_a_failed_task_is_logged_with_its_traceback_and_arguments(celery_worker, worker_env):
    from tests.conftest import wait_for
    from workers.library_tasks import import_model

    log = worker_env[1] / "logs" / "errors.log"
    import_model.apply_async(args=[987654], queue="cpu")  # no such model entry: the task raises
    wait_for(lambda: log.exists() and "987654" in log.read_text(), timeout=60, what="the failure in errors.log")
    text = log.read_text()
    assert "workers.tasks.import_model" in text and "Traceback" in text and "DoesNotExist" in text
    assert "failed: args=[987654] kwargs={}: DoesNotExist" in text
