"""One job core for every kind of long task a worker slot runs (docs/architecture.md#extension-points): a training
run (webapp.runs), an evaluation (webapp.evals), and whatever kind comes next.

A kind declares its states (``JobKind``: its model, status names, transition table, ended statuses and the field
a stop request sets); the core gives it, for any model with the job fields (``JOB_FIELDS``):

- ``states``: the checked status move (``move``) and its ``TransitionError``;
- ``claims``: the claim a task makes before it works (start, resume a stale one, or skip), the heartbeat, and the
  task's claim-or-skip skeleton (``claimed``);
- ``passes``: the maintenance passes: stale heartbeats found and declared lost (``mark_lost``), and tasks the
  broker never took sent again (``never_taken``, ``send_again``); ``recover_all``: every declared kind's
  maintenance pass, run by the one maintenance beat (workers.tasks.maintenance);
- ``views``: the POST view of a user's transition (kill, cancel, resume): refused loudly, in a message.

The core has no models and imports no app: the apps import it.
"""
from __future__ import annotations

from .claims import claim, claimed, heartbeat
from .passes import declare_lost, mark_lost, never_taken, recover_all, send_again, stale_why
from .states import JOB_FIELDS, JobKind, TransitionError, kinds, missing_job_fields

__all__ = ["JOB_FIELDS", "kinds", "JobKind", "TransitionError", "claim", "claimed", "declare_lost", "heartbeat", "mark_lost",
           "missing_job_fields", "never_taken", "recover_all", "send_again", "stale_why"]
