"""A run created but whose dispatch was never recorded (the web process died after the broker took its message,
before ``sent()`` stamped ``dispatched_at``): the reconciler finds its message in the broker and stamps it instead
of sending a second copy, the worker stamps it when it starts the run, and a run the reconciler was about to
send but a worker started meanwhile is neither sent again nor marked "waiting for the queue"."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

import workers.dispatch
from webapp.runs import services
from webapp.runs.services import dispatch
from webapp.runs.models import Run, RunStatus

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


@pytest.fixture
def broker(monkeypatch):
    """A broker stand-in: what send_task sent (name, run id) and which run ids it holds."""
    class Broker:
        sent: list[tuple[str, int]] = []
        held: set[int] | None = set()
        down = ""

    def send_task(name, *, args, queue=None, kwargs=None):
        if Broker.down:
            return Broker.down
        Broker.sent.append((name, args[0]))
        if Broker.held is not None:
            Broker.held.add(args[0])
        return ""

    Broker.sent, Broker.held = [], set()
    monkeypatch.setattr(workers.dispatch, "send_task", send_task)
    monkeypatch.setattr(workers.dispatch, "task_ids_in_broker", lambda name, queues: Broker.held)
    return Broker


def _launched_but_never_stamped(config, broker) -> Run:
    """The web process's launch: the run committed and its message in the broker, but the process died before
    the ``sent`` callback ran (on_commit callbacks are not run in this test's transaction)."""
    run = services.run_create(config=config)
    broker.held.add(run.pk)
    Run.objects.filter(pk=run.pk).update(enqueued_at=timezone.now() - timedelta(seconds=60))
    return Run.objects.get(pk=run.pk)


def test_the_reconciler_stamps_a_run_whose_message_the_broker_holds_instead_of_sending_it_twice(
        config, broker, django_capture_on_commit_callbacks):
    run = _launched_but_never_stamped(config, broker)
    assert run.dispatched_at is None
    with django_capture_on_commit_callbacks(execute=True):
        assert services.runs_redispatch() == []
    assert broker.sent == []  # no second copy
    assert Run.objects.get(pk=run.pk).dispatched_at is not None


def test_a_run_whose_message_is_not_in_the_broker_is_sent_again(config, broker, django_capture_on_commit_callbacks):
    run = _launched_but_never_stamped(config, broker)
    broker.held.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert services.runs_redispatch() == [run.pk]
    assert broker.sent == [("workers.tasks.train_run", run.pk)]
    assert Run.objects.get(pk=run.pk).dispatched_at is not None
    # a broker that cannot be read: sent again (a duplicate is skipped by run_start), never left unsent
    run2 = _launched_but_never_stamped(config, broker)
    broker.held = None
    with django_capture_on_commit_callbacks(execute=True):
        assert services.runs_redispatch() == [run2.pk]


def test_the_worker_stamps_dispatched_at_when_it_starts_a_run_never_stamped(config, broker):
    run = _launched_but_never_stamped(config, broker)
    assert services.run_start(run_id=run.pk, worker="w:1") == "start"
    Run.objects.filter(pk=run.pk).update(last_step=run.total_steps)  # it trained every step
    services.run_finish(run_id=run.pk, status=RunStatus.SUCCEEDED)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.dispatched_at is not None
    assert run.dispatched_at <= run.started_at


def test_a_run_started_while_the_reconciler_was_about_to_send_it_is_left_alone(
        config, broker, monkeypatch, django_capture_on_commit_callbacks):
    run = _launched_but_never_stamped(config, broker)
    broker.held.clear()
    broker.down = "ConnectionError: broker down"
    original = dispatch.runs_whose_message_was_lost

    def worker_starts_it_meanwhile(*, exclude):  # after the reconciler listed it as pending
        services.run_start(run_id=run.pk, worker="w:1")
        return original(exclude=exclude)

    monkeypatch.setattr(dispatch, "runs_whose_message_was_lost", worker_starts_it_meanwhile)
    with django_capture_on_commit_callbacks(execute=True):
        services.runs_redispatch()
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.dispatched_at is not None
    assert "waiting for the queue" not in run.dispatch_note
    broker.down = ""
    assert broker.sent == []
