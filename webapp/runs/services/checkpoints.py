"""Checkpoints a run saved, and their retention (keep_checkpoints, keep_best; docs/architecture.md#where-state-lives)."""
from __future__ import annotations

import bisect
import logging
import math

from django.db import transaction

from webapp.runs.models import Checkpoint, MetricPoint, Run

log = logging.getLogger("seedbed.runs")


@transaction.atomic
def run_checkpoint_add(*, run_id: int, step: int, path: str) -> Checkpoint:
    ckpt, _ = Checkpoint.objects.update_or_create(run_id=run_id, step=step, defaults={"path": path})
    run_checkpoints_prune(run_id=run_id)
    return ckpt


def best_checkpoint_steps(run: Run, checkpoints: list[Checkpoint]) -> set[int]:
    """Of ``checkpoints``, the steps of the run's ``keep_best`` best by ``keep_best_metric`` (its value at the last
    logged step at or before the checkpoint's; one with no value ranks last), ties to the later step."""
    count = int(run.config.get("keep_best") or 0)
    if count <= 0 or not checkpoints:
        return set()
    metric = str(run.config.get("keep_best_metric") or "reward/mean")
    sign = -1.0 if metric.startswith("min:") else 1.0
    key = metric[4:] if metric.startswith("min:") else metric
    points = list(MetricPoint.objects.filter(run_id=run.pk, key=key, value__isnull=False,
                                             step__lte=max(c.step for c in checkpoints))
                  .order_by("step").values_list("step", "value"))
    steps = [step for step, _ in points]

    def score(ckpt: Checkpoint) -> tuple[float, int]:
        at = bisect.bisect_right(steps, ckpt.step) - 1
        return (sign * points[at][1] if at >= 0 else -math.inf, ckpt.step)
    return {ckpt.step for ckpt in sorted(checkpoints, key=score, reverse=True)[:count]}


def run_checkpoints_prune(*, run_id: int) -> list[int]:
    """Checkpoint retention (the run's ``keep_checkpoints``: its newest N, and with ``keep_best`` the N whose
    ``keep_best_metric`` was best at their step): remove the other checkpoints' folders and rows, except one a run
    started from (a child's parent_step, or a model_path naming it) or an evaluation read, and never a folder
    outside the run's own. Runs in the training process, which has the folder. Returns the steps removed."""
    import os
    import shutil

    from django.apps import apps

    run = Run.objects.only("config", "uid").get(pk=run_id)
    keep = int(run.config.get("keep_checkpoints") or 0)
    if keep <= 0:
        return []
    older = list(Checkpoint.objects.filter(run_id=run_id).order_by("-step")[keep:])
    best = best_checkpoint_steps(run, older)
    older = [ckpt for ckpt in older if ckpt.step not in best]
    if not older:
        return []
    children = set(Run.objects.filter(parent_run_id=run_id).values_list("parent_step", flat=True))
    named = set(Run.objects.filter(config__model_path__in=[c.path for c in older])
                .values_list("config__model_path", flat=True))
    evaluated = set(apps.get_model("evals", "EvalModel").objects.filter(checkpoint__in=older)
                    .values_list("checkpoint_id", flat=True))  # (evals depend on runs: looked up by name)
    root = os.path.realpath(run.folder)
    removed = []
    for ckpt in older:
        if ckpt.step in children or ckpt.path in named or ckpt.pk in evaluated:
            continue
        if os.path.realpath(ckpt.path).startswith(root + os.sep):
            shutil.rmtree(ckpt.path, ignore_errors=True)
        ckpt.delete()
        removed.append(ckpt.step)
    if removed:
        log.info("run %s: removed checkpoints of steps %s (keep_checkpoints %s)", run_id, sorted(removed), keep)
    return sorted(removed)
