"""A multi-rank run's ranks as they last reported (docs/architecture.md#engines-and-distribution)."""
from __future__ import annotations

from webapp.runs.models import Run


MAX_RANKS_STORED = 1024


def run_ranks_set(*, run_id: int, ranks: list[dict]) -> None:
    """Store a multi-rank run's ranks as they last reported (host, pid, step, time: their heartbeat), at most
    ``MAX_RANKS_STORED``, already bounded field by field by the event contract (training.engines.events)."""
    Run.objects.filter(pk=run_id).update(ranks=list(ranks)[:MAX_RANKS_STORED])
