"""Packed seeds (docs/architecture.md#packed-seeds): which runs a worker slot trains together in one process.

A sweep whose ``pack`` is above 1 lets a slot that claims one of its runs (the *leader*) claim up to ``pack`` − 1
more of its started seeds (queued and sent to the broker: the sweep's concurrency already counts them) whose
configs pack with the leader's (``training.packing.pack_conflict``). Each member is claimed as its own task would
claim it (``run_start``: its worker, attempt and heartbeat), its ``pack_leader`` set to the leader (the leader's
to itself); the message the sweep sent for it later finds it running and is dropped. While the group trains, a
freed place takes the sweep's next started seed the same way (``run_claim_packed``, from the training process).
"""
from __future__ import annotations

from training.config import TrainConfig
from training.packing import pack_conflict, solo_only

from ..models import Run, RunStatus
from .lifecycle import run_start


def run_pack_claim(*, leader_id: int, worker: str) -> int:
    """After ``worker`` claimed run ``leader_id``: how many seeds its process trains at most (0: the run alone), the
    first of its sweep's packable started seeds claimed beside it."""
    run = Run.objects.select_related("sweep").get(pk=leader_id)
    pack = run.sweep.pack if run.sweep_id is not None else 1
    if pack <= 1 or solo_only(TrainConfig.from_dict(run.config, check_paths=False)) is not None:
        return 0
    Run.objects.filter(pk=leader_id).update(pack_leader_id=leader_id, pack_attempt=run.attempts)
    run_claim_packed(leader_id=leader_id, worker=worker, limit=pack - 1)
    return pack


def run_claim_packed(*, leader_id: int, worker: str, limit: int) -> list[int]:
    """Up to ``limit`` more of the leader's sweep's started seeds that pack with it, claimed for ``worker`` (the
    leader's slot) in seed order; returns their ids."""
    leader = Run.objects.filter(pk=leader_id).only("config", "sweep_id", "pack_attempt").first()
    if leader is None or leader.sweep_id is None or limit <= 0:
        return []
    mine = TrainConfig.from_dict(leader.config, check_paths=False)
    taken = []
    # (the leader itself too: killed and resumed, it rejoins the process it started)
    waiting = Run.objects.filter(sweep_id=leader.sweep_id, status=RunStatus.QUEUED, enqueued_at__isnull=False,
                                 kill_requested_at__isnull=True).order_by("pk")
    for run in waiting.only("pk", "config"):
        if len(taken) >= limit:
            break
        if pack_conflict([mine, TrainConfig.from_dict(run.config, check_paths=False)]) is not None:
            continue
        if run_start(run_id=run.pk, worker=worker) not in ("start", "resume"):
            continue
        Run.objects.filter(pk=run.pk).update(pack_leader_id=leader_id, pack_attempt=leader.pack_attempt)
        taken.append(run.pk)
    return taken


def run_pack_members(*, leader_id: int, worker: str) -> list[int]:
    """The runs ``worker``'s process trains for leader ``leader_id`` that are still running (the leader among
    them while it runs); just the leader's id for a run trained alone."""
    ids = list(Run.objects.filter(pack_leader_id=leader_id, status=RunStatus.RUNNING, worker=worker)
               .order_by("pk").values_list("pk", flat=True))
    return ids or [leader_id]
