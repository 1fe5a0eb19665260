"""What the API answers with: plain dictionaries of runs, sweeps and projects, read through the same
membership checks as the pages (webapp.projects.selectors)."""
from __future__ import annotations

from webapp.projects.models import Membership
from webapp.projects.selectors import role_in, visible, visible_projects
from webapp.runs.models import Checkpoint, Run
from webapp.sweeps.models import Sweep
from webapp.sweeps.selectors import sweep_alerts, sweep_decisions


def _iso(value) -> str | None:
    return value.isoformat() if value else None


def projects_of(user) -> list[dict]:
    roles = dict(Membership.objects.filter(user=user).values_list("project_id", "role"))
    return [{"name": p.name, "role": roles.get(p.pk) or role_in(user, p.pk), "personal": p.personal_for_id == user.pk}
            for p in visible_projects(user).distinct().order_by("name")]


def visible_checkpoint(user, checkpoint_id: int) -> Checkpoint | None:
    return visible(Checkpoint.objects.select_related("run"), user, field="run__project").filter(pk=checkpoint_id).first()


def run_summary(run: Run) -> dict:
    return {"id": run.pk, "name": run.name, "display_name": run.display_name, "project": run.project.name, "sweep": run.sweep_id,
            "status": run.status, "seed": run.seed, "last_step": run.last_step, "total_steps": run.total_steps,
            "created_by": run.created_by.get_username() if run.created_by else None,
            "created_at": _iso(run.created_at), "ended_at": _iso(run.ended_at), **run_stall(run)}


def run_stall(run: Run) -> dict:
    """The stall rule's state (webapp.runs.stall): whether the running run is stalled, for how long, and the two
    fields it is decided from."""
    idle = run.stalled_for_s
    return {"stalled": idle is not None, "stalled_for_s": None if idle is None else round(idle, 1),
            "step_advanced_at": _iso(run.step_advanced_at), "median_step_s": run.median_step_s}


def run_detail(run: Run) -> dict:
    return {**run_summary(run), "uid": str(run.uid), "folder": str(run.folder), "config": run.config,
            "engine_config": run.engine_config, "queue": run.queue, "worker": run.worker, "ranks": run.ranks,
            "warnings": run.warnings, "tags": run.tags, "notes": run.notes, "archived_at": _iso(run.archived_at),
            "started_at": _iso(run.started_at), "heartbeat_at": _iso(run.heartbeat_at), "attempts": run.attempts,
            "kill_requested": run.kill_requested_at is not None, "killed_by": run.killed_by,
            "kill_reason": run.kill_reason, "error": run.error, "failure_kind": run.failure_kind,
            "dispatch_note": run.dispatch_note, "preemptions": run.preemptions, "restarts": run.restarts,
            "packed_with": run.packed_with,
            "slurm": {"job_id": run.slurm_job_id, "state": run.slurm_state, "reason": run.slurm_reason}
            if run.slurm_job_id else None,
            "recovery": run.recovery_note,
            "parent_run": run.parent_run_id, "parent_step": run.parent_step, "copied_from": run.copied_from_id,
            "checkpoints": [{"id": c.pk, "step": c.step} for c in run.checkpoints.order_by("step")]}


def sweep_summary(sweep: Sweep) -> dict:
    return {"id": sweep.pk, "name": sweep.name, "project": sweep.project.name, "seeds": sweep.seeds,
            "concurrency": sweep.concurrency, "pack": sweep.pack, "policy": sweep.policy or {"name": "manual"},
            "created_at": _iso(sweep.created_at)}


def sweep_detail(sweep: Sweep) -> dict:
    runs = [{"id": r.pk, "seed": r.seed, "status": r.status, "last_step": r.last_step, "total_steps": r.total_steps,
             "killed_by": r.killed_by, "kill_reason": r.kill_reason}
            for r in sweep.runs.order_by("pk")]
    return {**sweep_summary(sweep), "config": sweep.config, "runs": runs, "copied_from": sweep.copied_from_id,
            "ended": all(r["status"] in ("succeeded", "failed", "killed", "lost") for r in runs),
            "decisions": sweep_decisions(sweep_id=sweep.pk), "alerts": sweep_alerts(sweep_id=sweep.pk),
            "warnings": list(getattr(getattr(sweep, "plan", None), "warnings", None) or []),
            "stopped_at": _iso(sweep.stopped_at), "stopped_by": sweep.stopped_by, "stop_reason": sweep.stop_reason,
            "new_seeds_halted": getattr(getattr(sweep, "plan", None), "new_seeds_halted", "")}


def dataset_summary(entry) -> dict:
    return {"id": entry.pk, "name": entry.name, "task": entry.task, "project": entry.project.name,
            "rows": entry.rows, "source": entry.source, "size_bytes": entry.size_bytes,
            "created_at": _iso(entry.created_at)}


def dataset_detail(entry) -> dict:
    return {**dataset_summary(entry), "path": entry.path, "columns": entry.columns, "preview": entry.preview,
            "prompt_field": entry.prompt_field, "answer_field": entry.answer_field, "fields": entry.fields,
            "held_out_fraction": entry.held_out_fraction, "split_seed": entry.split_seed}
