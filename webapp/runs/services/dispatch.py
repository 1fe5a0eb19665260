"""Creating a run and sending its task (ids only, on commit), and the reconciler's pass that sends again what the
broker never took or lost (docs/architecture.md#a-runs-life)."""
from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from training.config import TrainConfig
from training.fields import require_no_control_characters
from webapp import jobs
from webapp.projects.models import Role
from webapp.projects.services import audit, project_for_launch, require_role
from webapp.runs.models import RUN_JOB, Queue, QueueKind, Run, RunStatus

from .config import as_config, queue_named

log = logging.getLogger("seedbed.runs")


@transaction.atomic
def run_create(*, config: TrainConfig | dict, user=None, project=None, name: str = "", sweep=None,
               parent_run: Run | None = None, parent_step: int | None = None, copied_from: Run | None = None,
               queue: str = "") -> Run:
    """Validate ``config`` and create a queued run in ``project`` (default: the user's personal project; a
    sweep's run: the sweep's, checked when the sweep was made); a run outside a sweep is enqueued at once (on
    commit), a sweep's run when its sweep gives it a slot. ``user`` must be a member of the project and able to
    read ``parent_run`` and ``copied_from`` (the run whose config the form was filled with: its lineage,
    docs/architecture.md "A run's life"). ``queue``: where it runs (``queue_named``: a registered queue, or by
    default the one its device needs). A name with a control character is a field error (``fields``)."""
    require_no_control_characters(name=name)
    if sweep is not None:
        project = sweep.project
    else:
        project = project_for_launch(user=user, project=project)
        if parent_run is not None and user is not None:
            require_role(user, parent_run.project_id, Role.VIEWER)
        if copied_from is not None and user is not None:
            require_role(user, copied_from.project_id, Role.VIEWER)
    # a sweep's runs: checked (and their rewards dry-run) with the sweep
    cfg = as_config(config, user=user if sweep is None else None, project=project, dry_run=sweep is None, queue=queue)
    run = Run.objects.create(name=name, project=project, sweep=sweep, config=cfg.to_dict(), seed=cfg.seed,
                             queue=queue_named(queue, cfg), created_by=user, parent_run=parent_run, parent_step=parent_step,
                             copied_from=copied_from)
    if sweep is None:
        audit(project=project, user=user, action="run.launch", target_type="run", target_id=run.pk,
              **({"from_run": parent_run.pk, "from_step": parent_step} if parent_run is not None else {}),
              **({"copied_from": copied_from.pk} if copied_from is not None else {}))
        run_dispatch(run=run)
    return run


WAITING_FOR_QUEUE = "waiting for the queue"


def run_dispatch(*, run: Run) -> None:
    """Mark the run as to be sent and send its task once the transaction commits (ids only). When the broker
    cannot take it, the run stays queued with a "waiting for the queue" note and the reconciler
    (``runs_redispatch``) sends it again: the request that made it never fails for that."""
    run.enqueued_at, run.dispatched_at, run.dispatch_note, run.retry_at = timezone.now(), None, "", None
    run.save(update_fields=["enqueued_at", "dispatched_at", "dispatch_note", "retry_at"])
    send_run(run.pk, run.queue)


def send_run(run_id: int, queue: str) -> None:
    import uuid

    from workers.port import send_on_commit

    dispatch = uuid.uuid4().hex
    Run.objects.filter(pk=run_id).update(dispatch_id=dispatch)

    def sent() -> None:
        Run.objects.filter(pk=run_id, dispatched_at__isnull=True).update(dispatched_at=timezone.now(),
                                                                         dispatch_note="", retry_at=None)

    def failed(reason: str) -> None:
        Run.objects.filter(pk=run_id, status=RunStatus.QUEUED, dispatched_at__isnull=True).update(
            dispatch_note=f"{WAITING_FOR_QUEUE}: the broker did not take the run ({reason[:300]}); it is sent "
                          "again once the broker answers")

    if is_slurm_queue(queue):  # submitted with sbatch by the maintenance worker (workers.slurm_tasks), never here
        send_on_commit("workers.slurm_tasks.slurm_submit", args=[run_id], kwargs={"dispatch": dispatch},
                       queue="maintenance", sent=sent, failed=failed)
        return
    send_on_commit("workers.tasks.train_run", args=[run_id], kwargs={"dispatch": dispatch}, queue=queue, sent=sent,
                   failed=failed)


def is_slurm_queue(queue: str) -> bool:
    """Whether ``queue`` is a registered Slurm queue (its runs are batch jobs: no Celery slot holds them)."""
    return Queue.objects.filter(name=queue, kind=QueueKind.SLURM).exists()


WAITING_FOR_BUILD = "waiting for the built-in model's build"
BUILD_RECHECK_S = 5.0


def run_defer_for_build(*, run_id: int, dispatch: str, delay_s: float = BUILD_RECHECK_S) -> bool:
    """A worker took the message of a queued run that trains the built-in model while another process builds it
    (``workers.tasks.train_run``): the run gives its worker slot back instead of waiting in it. It stays queued
    with the message counted as not taken and a retry time ``delay_s`` on, so the reconciler
    (``runs_redispatch``) sends it again then and it asks again. Only the message last sent (``dispatch``) of a
    run still queued and not being killed defers it; True when it did (the worker then drops the message)."""
    return bool(Run.objects.filter(pk=run_id, status=RunStatus.QUEUED, dispatch_id=dispatch,
                                   kill_requested_at__isnull=True).update(
        dispatched_at=None, retry_at=timezone.now() + timedelta(seconds=delay_s),
        dispatch_note=f"{WAITING_FOR_BUILD}: it holds no worker slot meanwhile"))


def runs_redispatch(*, older_than_s: float = 5.0) -> list[int]:
    """The reconciler's pass (maintenance, every few seconds; safe in several processes at once): queued runs
    whose task the broker never took are sent again (the job core's ``never_taken`` and ``send_again``,
    webapp.jobs.passes). A duplicate delivery is harmless: the task claims the run (``run_start``) and a second
    copy finds it held and does nothing. A launch whose message the broker holds but whose dispatch was never
    recorded (the web process died between the send and ``sent()``) is stamped, not sent twice; a run a worker
    started (or a kill reached) since it was listed is left alone. A restart waiting out its backoff waits."""
    pending = jobs.never_taken(RUN_JOB, older_than_s=older_than_s,
                               also=Q(retry_at__isnull=True) | Q(retry_at__lte=timezone.now()))
    pending = unless_sent_unrecorded(pending)
    pending += runs_whose_message_was_lost(exclude={pk for pk, _ in pending})
    sent_again = jobs.send_again(RUN_JOB, pending, send_run)
    if sent_again:
        log.info("runs sent again (the broker had not taken them, or lost them): %s", sent_again)
    return sent_again


def unless_sent_unrecorded(pending: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """``pending`` (never-stamped queued runs) less the fresh launches whose message the broker holds: their
    send succeeded but its ``sent()`` never ran (the web process died in between). Those are stamped sent, so
    no second copy goes out. Only runs never started nor restarted (a restart's old message may linger
    unacknowledged), and only when the broker can be read."""
    fresh = set(Run.objects.filter(pk__in=[pk for pk, _ in pending], attempts=0, restarts=0,
                                   retry_at__isnull=True).values_list("pk", flat=True))
    if not fresh:
        return pending
    from workers.port import task_ids_in_broker

    held = task_ids_in_broker("workers.tasks.train_run", sorted({queue for pk, queue in pending if pk in fresh}))
    if not held:
        return pending
    stamped = fresh & held
    Run.objects.filter(pk__in=stamped, dispatched_at__isnull=True).update(dispatched_at=timezone.now(),
                                                                          dispatch_note="", retry_at=None)
    if stamped:
        log.info("runs whose message the broker holds, their dispatch unrecorded: stamped %s", sorted(stamped))
    return [(pk, queue) for pk, queue in pending if pk not in stamped]


def runs_whose_message_was_lost(*, exclude: set[int]) -> list[tuple[int, str]]:
    """Queued runs the broker took a while ago but no longer holds (its data was lost: a Redis restarted without
    its append-only file, or flushed): sent again. Asked only when such runs exist, and never concluded from a
    broker that cannot be read."""
    cutoff = timezone.now() - timedelta(seconds=settings.SEEDBED_QUEUE_CHECK_S)
    taken = list(Run.objects.filter(status=RunStatus.QUEUED, dispatched_at__lt=cutoff, kill_requested_at__isnull=True)
                 .exclude(pk__in=exclude).exclude(queue__in=Queue.objects.filter(kind=QueueKind.SLURM).values("name"))
                 .values_list("pk", "queue"))  # (a Slurm run's job is Slurm's: workers.slurm_tasks reads it)
    if not taken:
        return []
    from workers.port import task_ids_in_broker

    held = task_ids_in_broker("workers.tasks.train_run", sorted({queue for _, queue in taken}))
    if held is None:
        return []
    lost = [(pk, queue) for pk, queue in taken if pk not in held]
    for pk, _ in lost:
        Run.objects.filter(pk=pk).update(dispatch_note=f"{WAITING_FOR_QUEUE}: the broker lost the run's message; "
                                                       "sent again")
    return lost
