"""What a kind of job declares, and the one checked status move (docs/architecture.md#extension-points)."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Mapping

# The fields the core reads and writes on a job's row (Run and EvalJob have them, with their own help texts).
JOB_FIELDS = ("status", "queue", "enqueued_at", "dispatched_at", "started_at", "ended_at", "worker", "heartbeat_at",
              "attempts", "error")


class TransitionError(Exception):
    """A service was asked for a status change the job's current status does not allow (or an action its state
    refuses: killing a run that ended, cancelling one already being cancelled)."""


@dataclass(frozen=True)
class JobKind:
    """A kind of job, as it declares itself: ``name`` (in messages and logs: "run", "eval"), its ``model`` (a
    model with ``JOB_FIELDS``), its ``transitions`` (from-status -> statuses a service may move it to; anything else
    is refused), its ``ended`` statuses, and ``stop_field``: the field a stop request (a kill, a cancel) sets,
    which makes a claim skip the job. The status names the core moves between are ``queued``, ``running`` and
    ``lost``. ``recover``: the dotted path of the kind's maintenance pass (no arguments; returns what it did, for
    the status page): a kind that names one, declared at the top level of its app's models module, is found by
    ``kinds`` and the one maintenance beat runs it (``passes.recover_all``)."""

    name: str
    model: type
    transitions: Mapping[str, frozenset]
    ended: frozenset
    stop_field: str
    queued: str = "queued"
    running: str = "running"
    lost: str = "lost"
    recover: str = ""
    log: logging.Logger = field(default=logging.getLogger("seedbed.jobs"), compare=False)

    def __post_init__(self) -> None:
        unknown = {s for targets in self.transitions.values() for s in targets} - set(self.transitions)
        if unknown or not {self.queued, self.running, self.lost} <= set(self.transitions):
            raise ValueError(f"{self.name}: every status must have a row in its transition table "
                             f"(missing: {sorted(unknown | {self.queued, self.running, self.lost} - set(self.transitions))})")
        if not self.ended <= set(self.transitions):
            raise ValueError(f"{self.name}: ended statuses {sorted(self.ended - set(self.transitions))} are not statuses")

    def move(self, job, new_status: str) -> None:
        """Change ``job.status`` in memory after checking the transition is legal (the caller saves); an illegal
        one raises TransitionError naming the job, its status and the one refused.

        >>> from types import SimpleNamespace as Row
        >>> kind = JobKind("job", object, {"queued": frozenset({"running"}), "running": frozenset({"lost"}),
        ...                               "lost": frozenset()}, frozenset({"lost"}), "stop_requested_at")
        >>> job = Row(pk=7, status="queued"); kind.move(job, "running"); job.status
        'running'
        >>> kind.move(job, "queued")
        Traceback (most recent call last):
        ...
        webapp.jobs.states.TransitionError: job 7 is running; it cannot become queued
        """
        if new_status not in self.transitions[job.status]:
            raise TransitionError(f"{self.name} {job.pk} is {job.status}; it cannot become {new_status}")
        job.status = new_status

    def is_ended(self, job) -> bool:
        return job.status in self.ended

    def locked(self, pk: int):
        """The job's row, locked until the transaction ends (``select_for_update``)."""
        return self.model.objects.select_for_update().get(pk=pk)


def missing_job_fields(model) -> list[str]:
    """The JOB_FIELDS ``model`` lacks: [] for a model the core can run."""
    names = {f.name for f in model._meta.get_fields()}
    return [name for name in JOB_FIELDS if name not in names]


def kinds() -> dict[str, JobKind]:
    """Every kind with a maintenance pass (``recover``), by name, as the installed apps' models modules declare them
    at their top level (``RUN_JOB = JobKind(...)`` in ``webapp/runs/models.py``), in the apps' order: Django's app
    registry is the walk (it imports each app's models at start-up), so no list of kinds is kept. A kind another
    models module imports is the same kind; two kinds of one name are an error."""
    from django.apps import apps

    found: dict[str, JobKind] = {}
    for config in apps.get_app_configs():
        for value in vars(config.models_module).values() if config.models_module else ():
            if not isinstance(value, JobKind) or not value.recover:
                continue
            if found.setdefault(value.name, value) is not value:
                raise RuntimeError(f"two job kinds are named {value.name!r}")
    return found
