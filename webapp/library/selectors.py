"""Reads of the library (the judge verifier's endpoint provider)."""
from __future__ import annotations

from training.verifiers.judge import JudgeEndpoint as Endpoint

from .models import JudgeEndpoint


def judge_endpoints() -> dict[str, Endpoint]:
    """Every registered judge endpoint, as the training core knows them (a small table, read each time)."""
    return {row.name: Endpoint(name=row.name, base_url=row.base_url, model=row.model,
                               local_model_path=row.local_model_path, secret=row.secret)
            for row in JudgeEndpoint.objects.all()}
