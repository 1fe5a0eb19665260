"""How many of a sweep's seeds share one training process (docs/architecture.md#packed-seeds): ``Sweep.pack``.

The sweep form and the API take ``pack``: 1 (each seed its own process, as before), a number (at most
``training.memory.MAX_PACK``), or 0, chosen here: enough seeds a process that the sweep's ``concurrency`` fills
its queue's slots (ceil(concurrency / slots)), as many as the memory model says one slot's share of the largest
worker holds (``training.memory.seeds_that_fit``), 1 where the runs cannot be packed (``training.packing``: the
engine, the ranks, the sampler, the model's family). A worker then trains up to ``pack`` of the sweep's started
seeds in one process (``workers.tasks.train_here``).
"""
from __future__ import annotations

import math

from django.utils import timezone

from training.config import TrainConfig
from training.fields import FieldErrors
from training.memory import MAX_PACK, read_model_config, read_model_shape, seeds_that_fit
from training.packing import PACKABLE_MODEL_TYPES, solo_only


def unpackable(cfg: TrainConfig) -> str | None:
    """Why runs of ``cfg`` train one per process (None when they may be packed): ``training.packing.solo_only``,
    or a model outside the Llama family."""
    reason = solo_only(cfg)
    if reason:
        return reason
    model_type = (read_model_config(cfg.resolved_model_path()) or {}).get("model_type")
    if model_type not in PACKABLE_MODEL_TYPES:
        return f"a {model_type or 'unreadable'} model is trained one seed per process (packing takes llama, " \
               "mistral or qwen2 models)"
    return None


def queue_slots(queue: str) -> tuple[int, int]:
    """(slots, memory MiB) of the largest worker reporting lately for ``queue`` (when none does, this host's cores
    and memory: a worker's default is a slot a core)."""
    from datetime import timedelta

    from webapp.runs.capacity import FRESH_FOR_S, queue_capacity
    from webapp.runs.models import WorkerCapacity

    cutoff = timezone.now() - timedelta(seconds=FRESH_FOR_S)
    rows = [r for r in WorkerCapacity.objects.filter(updated_at__gte=cutoff) if queue in r.queues]
    if rows:
        best = max(rows, key=lambda r: r.memory_mb)
        return max(best.slots, 1), best.memory_mb
    here = queue_capacity(queue)
    return max(here.cores, 1), here.memory_mb


def resolve_pack(pack: int, *, cfg: TrainConfig, queue: str, concurrency: int) -> int:
    """The sweep's ``pack`` from what was asked (0: chosen); FieldErrors naming ``pack`` for one it cannot have."""
    if not 0 <= pack <= MAX_PACK:
        raise FieldErrors({"pack": f"must lie in [0, {MAX_PACK}] (0: chosen for the queue's workers); got {pack}"})
    if pack == 1:
        return 1
    reason = unpackable(cfg)
    if reason and pack > 1:
        raise FieldErrors({"pack": f"these seeds cannot share a process: {reason}; use pack 1"})
    if reason:
        return 1
    from webapp.runs.models import Queue, QueueKind

    if Queue.objects.filter(name=queue, kind=QueueKind.SLURM).exists():
        if pack > 1:
            raise FieldErrors({"pack": f"queue {queue} is a Slurm queue: each batch job trains one run; use pack 1"})
        return 1
    slots, memory_mb = queue_slots(queue)
    shape = read_model_shape(cfg.resolved_model_path())
    fits = seeds_that_fit(cfg, shape, memory_mb * 2**20 // slots) if shape is not None else 1
    if pack > 1:
        if fits and pack > fits:
            raise FieldErrors({"pack": f"at most {fits} seeds of this config fit one slot's share of the memory "
                                       f"({memory_mb // slots} MiB of {memory_mb} over {slots} slots); got {pack}"})
        return pack
    return max(1, min(fits, math.ceil(concurrency / slots), MAX_PACK))
