"""Every write to runs (HackSoft style): keyword-only, atomic, status checked before it changes; one module per
concern, each re-exported here so ``from webapp.runs import services`` keeps working (docs/architecture.md#layers).

Tasks are enqueued with ``transaction.on_commit`` and carry ids only; the worker re-reads the row. A run that
belongs to a sweep is sent to a worker by its sweep (webapp.sweeps.services.sweep_fill_slots), which hears of
freed slots through ``signals.slots_changed``.

- ``config``: a request's config validated, and the queue it needs;
- ``dispatch``: creating a run, sending its task, and the reconciler's pass that sends it again;
- ``lifecycle``: claim, heartbeat, how a run ended, requeue, kill, resume; ``packing``: the runs one slot's process
  trains together (packed seeds);
- ``recovery``: the lost-run pass and automatic restarts; ``disk_full``: restarts once a full disk has room;
- ``disk_budget``: a run past its disk budget or its project's fails;
- ``slurm``: what the Slurm executor records of a run's batch job;
- ``annotations``: names, notes, tags, archive;
- ``metrics``, ``samples``, ``engine_config``, ``run_warnings``, ``ranks``, ``checkpoints``: what training reports.
"""
from __future__ import annotations

from .annotations import MAX_NAME, MAX_NOTES, MAX_TAG, MAX_TAGS, TAG_CHARS, parse_tags, run_annotate, run_archive
from .checkpoints import best_checkpoint_steps, run_checkpoint_add, run_checkpoints_prune
from .config import as_config, parse_config, queue_choices, queue_for, queue_named
from .disk_budget import run_budget_error, run_disk_check
from .disk_full import runs_restart_after_disk_full
from .dispatch import (WAITING_FOR_BUILD, is_slurm_queue, WAITING_FOR_QUEUE, runs_whose_message_was_lost, send_run,
                       unless_sent_unrecorded, run_create, run_defer_for_build, run_dispatch, runs_redispatch)
from .engine_config import (MAX_ENGINE_CONFIG_CHARS, MAX_ENGINE_VALUE_CHARS, bounded_engine_config,
                            run_engine_config_set)
from .lifecycle import (KILLABLE_STATUSES, run_finish, run_heartbeat, run_held_by, run_kill, run_record_exit,
                        run_preempted, run_requeue, run_resume, run_start)
from .logged import run_metrics_log, run_samples_log
from .metrics import METRIC_ROWS_PER_INSERT, finite_or_none, run_discard_after, run_metrics_append
from .packing import run_claim_packed, run_pack_claim, run_pack_members
from .ranks import MAX_RANKS_STORED, run_ranks_set
from .recover import runs_recover
from .recovery import count_restart, record_lost, restart_backoff_s, restart_run, runs_mark_lost
from .run_warnings import run_warning_add
from .slurm import (WAITING_FOR_SLURM, run_slurm_ended, run_slurm_job_gone, run_slurm_refused, run_slurm_state,
                    run_slurm_submitted, run_slurm_to_submit, run_slurm_unreachable, run_slurm_vanished, runs_on_slurm,
                    slurm_queue)
from .samples import run_samples_append
from .transitions import TransitionError, after_end, locked_run, move_status

__all__ = [
    "is_slurm_queue", "WAITING_FOR_SLURM", "run_slurm_ended", "run_slurm_job_gone", "run_slurm_refused",
    "run_slurm_state", "run_slurm_submitted", "run_slurm_to_submit", "run_slurm_unreachable", "run_slurm_vanished",
    "runs_on_slurm", "slurm_queue",
    "KILLABLE_STATUSES", "MAX_ENGINE_CONFIG_CHARS", "MAX_ENGINE_VALUE_CHARS", "MAX_NAME", "MAX_NOTES",
    "MAX_RANKS_STORED", "MAX_TAG", "MAX_TAGS", "METRIC_ROWS_PER_INSERT", "TAG_CHARS", "TransitionError",
    "WAITING_FOR_BUILD", "WAITING_FOR_QUEUE", "as_config", "bounded_engine_config", "parse_config", "parse_tags", "queue_for", "queue_named", "queue_choices",
    "count_restart", "finite_or_none", "record_lost", "restart_backoff_s", "run_annotate", "run_archive", "run_budget_error", "run_checkpoint_add",
    "run_checkpoints_prune", "run_create", "run_defer_for_build", "run_discard_after", "run_disk_check", "run_dispatch",
    "run_engine_config_set", "run_finish", "run_heartbeat", "run_held_by", "run_kill", "run_metrics_append",
    "run_metrics_log", "run_samples_log",
    "run_claim_packed", "run_pack_claim", "run_pack_members",
    "run_ranks_set", "run_record_exit", "run_preempted", "run_requeue",
    "run_resume", "run_samples_append", "run_start", "run_warning_add", "runs_mark_lost", "runs_redispatch",
    "runs_restart_after_disk_full", "runs_recover",
    # (private helpers a few tests call directly)
    "after_end", "best_checkpoint_steps", "locked_run", "move_status", "restart_run",
    "runs_whose_message_was_lost", "send_run", "unless_sent_unrecorded",
]
