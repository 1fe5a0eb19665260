"""Sampled completions of a step with their rewards, as the training loop emits them
(docs/architecture.md#where-state-lives)."""
from __future__ import annotations

from django.db import transaction

from webapp.runs.models import Sample

from .metrics import finite_or_none


@transaction.atomic
def run_samples_append(*, run_id: int, step: int, rows: list[dict]) -> int:
    Sample.objects.filter(run_id=run_id, step=step).delete()
    Sample.objects.bulk_create([
        Sample(run_id=run_id, step=step, index=i, prompt=str(r.get("prompt", "")),
               completion=str(r.get("completion", "")), answer=str(r.get("answer", "") or ""),
               reward=None if r.get("reward") is None else finite_or_none(r["reward"]),
               details=r.get("details") or {})
        for i, r in enumerate(rows)])
    return len(rows)
