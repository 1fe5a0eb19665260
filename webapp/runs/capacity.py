"""What one config may ask of a worker: caps read from the workers' capacity reports (WorkerCapacity, written by
workers.capacity), checked where the web app validates a config before launch (services.parse_config, a resume on
other ranks, a sweep's grid) beside the schema's own checks (training/ knows nothing of workers).

For the run's queue, the largest worker reporting lately bounds ``nproc_per_node`` (its cores, or its GPUs for a
GPU run), the code sandbox (``processes`` at most its cores; ranks × processes × 2 × ``memory_mb`` at most its
memory: each execution is a program and its tests, two sandboxed processes each bounded by ``memory_mb``, the
program's bound covering its /tmp: a memory cgroup bounds each process tree as a whole, or the sandbox divides
``memory_mb`` among its processes), the processes the programs may fork (ranks × processes × ``max_processes``
at most SANDBOX_TASKS_PER_CORE a core). ``nnodes`` > 1 needs a Slurm queue (a Celery worker trains a run on one
node), at most the nodes it is registered with. A Slurm queue's registered resources stand for the worker. The
operator lowers them with SEEDBED_MAX_RANKS_PER_NODE, SEEDBED_MAX_SANDBOX_PROCS, SEEDBED_MAX_SANDBOX_MB and
SEEDBED_MAX_NODES. With no worker reporting for the queue (workers down, or not started yet), those settings
alone decide where set, else this host's cores and memory stand in: a launch is never refused only because no
worker has reported.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from training.config import TrainConfig
from training.fields import FieldErrors
from workers.port import REPORT_EVERY_S, measure

from .models import Queue, QueueKind, WorkerCapacity

# a report older than this is a worker gone without saying so (killed): ignored
FRESH_FOR_S = 4 * REPORT_EVERY_S
# Each process a sandboxed program forks may spin for the whole timeout_s (RLIMIT_CPU is per process): ranks ×
# processes × max_processes of them at most this many a core of the worker.
SANDBOX_TASKS_PER_CORE = 64


@transaction.atomic
def capacity_report(*, worker: str, queues: list[str], slots: int, cores: int, memory_mb: int, gpus: int) -> None:
    """A worker's capacity as it reports it now (replacing its last report)."""
    WorkerCapacity.objects.update_or_create(worker=worker[:200], defaults={
        "queues": sorted(str(q) for q in queues), "slots": max(int(slots), 1), "cores": max(int(cores), 1),
        "memory_mb": max(int(memory_mb), 0), "gpus": max(int(gpus), 0), "updated_at": timezone.now()})


def capacity_forget(*, worker: str) -> None:
    """A worker shutting down: it no longer counts."""
    WorkerCapacity.objects.filter(worker=worker[:200]).delete()


@dataclass(frozen=True)
class QueueCapacity:
    """The largest worker of a queue, dimension by dimension, and how many workers report for it (0: none did
    lately, and the numbers are this host's)."""

    queue: str
    workers: int
    cores: int
    memory_mb: int
    gpus: int
    registered: bool = False
    """A Slurm queue: the numbers are its registered resources (``Queue``: its nodes, CPUs, memory, GPUs)."""

    def has(self, what: str) -> str:
        """"its largest worker has 2 cores", or this host's when no worker reported."""
        if self.registered:
            return f"its registered nodes have {what}"
        if self.workers:
            return f"its largest worker has {what}"
        return f"no worker of queue {self.queue} has reported: this host has {what}"


def queue_capacity(queue: str) -> QueueCapacity:
    """A Slurm queue's registered resources (its CPUs and memory per node, where it registers none, this host's);
    else the largest worker reporting lately for ``queue``, or this host's when none does."""
    slurm = Queue.objects.filter(name=queue, kind=QueueKind.SLURM).first()
    if slurm is not None:
        here = measure()
        return QueueCapacity(queue, slurm.nodes, slurm.cpus_per_task or here["cores"],
                             slurm.mem_per_node_mb or here["memory_mb"], slurm.gpus_per_node, registered=True)
    cutoff = timezone.now() - timedelta(seconds=FRESH_FOR_S)
    rows = [row for row in WorkerCapacity.objects.filter(updated_at__gte=cutoff) if queue in row.queues]
    if not rows:
        here = measure()
        return QueueCapacity(queue, 0, here["cores"], here["memory_mb"], here["gpus"])
    return QueueCapacity(queue, len(rows), max(r.cores for r in rows), max(r.memory_mb for r in rows),
                         max(r.gpus for r in rows))


def _lowest(measured: int, operator: int | None, name: str, *, reported: bool = True) -> tuple[int, str | None]:
    """The cap and, when the operator's setting decides it, its name: the lower of the two; with no worker
    reporting (``reported`` False), the operator's setting alone when there is one (it knows its workers; this
    host may be a small web server)."""
    if operator is not None and (operator < measured or not reported):
        return max(operator, 1 if name != "SEEDBED_MAX_SANDBOX_MB" else 0), name
    return measured, None


def _code_rewards(cfg: TrainConfig) -> list[tuple[int, dict]]:
    """(index, params) of each code verifier the run scores with (its rewards, else its task's own)."""
    from training.data import default_rewards

    spec = cfg.rewards or default_rewards(cfg.task)
    return [(i, item.get("params") or {}) for i, item in enumerate(spec)
            if isinstance(item, dict) and item.get("name") == "code"]


def slurm_queues_named() -> str:
    """The Slurm queues a multi-node run may pick, in words."""
    names = list(Queue.objects.filter(kind=QueueKind.SLURM).values_list("name", flat=True))
    return f"the Slurm queues: {', '.join(names)}" if names else \
        "no Slurm queue is registered (staff register one: manage.py queue_register NAME --kind slurm)"


def cap_errors(cfg: TrainConfig, *, queue: str) -> dict[str, str]:
    """What in ``cfg`` asks more of a worker of ``queue`` than the largest one has (or the operator allows):
    field -> message naming the limit; {} when it fits."""
    from training.verifiers.code import CodeVerifier

    cap = queue_capacity(queue)
    errors: dict[str, str] = {}
    # ranks per node: one per GPU for a GPU run on a worker that has GPUs, else one per core
    on_gpus = cfg.device == "cuda" or cfg.rollout_engine == "vllm" or (cfg.device == "auto" and cap.gpus > 0)
    slots, unit = (cap.gpus, "GPU") if on_gpus and cap.gpus else (cap.cores, "core")
    limit, setting = _lowest(slots, settings.SEEDBED_MAX_RANKS_PER_NODE, "SEEDBED_MAX_RANKS_PER_NODE",
                             reported=bool(cap.workers))
    if cfg.nproc_per_node > limit:
        why = f"the operator's {setting}" if setting else cap.has(f"{slots} {unit}{'s' if slots != 1 else ''}")
        errors["nproc_per_node"] = f"at most {limit} on queue {queue} ({why}); got {cfg.nproc_per_node}"
    # nodes: a Celery worker trains one node; several are a Slurm queue's (its registered nodes, the operator's cap)
    if cfg.nnodes > 1 and not cap.registered:
        errors["nnodes"] = (f"a run over {cfg.nnodes} machines goes to a Slurm queue (queue {queue} is a Celery "
                            f"queue: its workers train runs on one node); {slurm_queues_named()}")
    elif cfg.nnodes > 1:
        limit, setting = _lowest(cap.workers, settings.SEEDBED_MAX_NODES, "SEEDBED_MAX_NODES")
        if cfg.nnodes > limit:
            why = f"the operator's {setting}" if setting else \
                f"queue {queue} is registered with {cap.workers} node{'s' if cap.workers != 1 else ''}"
            errors["nnodes"] = f"at most {limit} on queue {queue} ({why}); got {cfg.nnodes}"
    # the code sandbox: each rank starts its own servers (one per core of its worker unless ``processes`` says)
    defaults = CodeVerifier.__init__.__kwdefaults__
    procs_limit, procs_setting = _lowest(cap.cores, settings.SEEDBED_MAX_SANDBOX_PROCS, "SEEDBED_MAX_SANDBOX_PROCS",
                                         reported=bool(cap.workers))
    mb_limit, mb_setting = _lowest(cap.memory_mb, settings.SEEDBED_MAX_SANDBOX_MB, "SEEDBED_MAX_SANDBOX_MB",
                                   reported=bool(cap.workers))
    total, parts = 0, []
    for index, params in _code_rewards(cfg):
        processes = params.get("processes") or defaults["processes"]
        memory = int(params.get("memory_mb") or defaults["memory_mb"])
        if processes is not None and int(processes) > procs_limit:
            why = f"the operator's {procs_setting}" if procs_setting else cap.has(f"{cap.cores} cores")
            errors["rewards"] = (f"item {index} (code): processes at most {procs_limit} on queue {queue} ({why}); "
                                 f"got {processes}")
            return errors
        processes = int(processes) if processes is not None else cap.cores
        tasks = cfg.nproc_per_node * processes * int(params.get("max_processes") or defaults["max_processes"])
        if tasks > SANDBOX_TASKS_PER_CORE * cap.cores:
            errors["rewards"] = (f"item {index} (code): the sandbox's programs may run {cfg.nproc_per_node} rank"
                                 f"{'s' if cfg.nproc_per_node != 1 else ''} × {processes} process"
                                 f"{'es' if processes != 1 else ''} × max_processes "
                                 f"{int(params.get('max_processes') or defaults['max_processes'])} = {tasks:,} "
                                 f"processes at once; at most {SANDBOX_TASKS_PER_CORE} a core, "
                                 f"{SANDBOX_TASKS_PER_CORE * cap.cores:,} on queue {queue} "
                                 f"({cap.has(f'{cap.cores} cores')}): lower max_processes or processes")
            return errors
        # each execution is two sandboxed processes alive together, the program and its tests, each bounded by
        # memory_mb (the program's bound covers its /tmp too)
        total += cfg.nproc_per_node * processes * 2 * memory
        parts.append(f"{cfg.nproc_per_node} rank{'s' if cfg.nproc_per_node != 1 else ''} × {processes} "
                     f"process{'es' if processes != 1 else ''} × 2 × {memory:,} MB")
    if total > mb_limit:
        why = f"the operator's {mb_setting}" if mb_setting else cap.has(f"{cap.memory_mb:,} MB of memory")
        errors["rewards"] = (f"the code sandbox may take {' + '.join(parts)} (memory_mb, for a program and for its "
                             f"tests) = {total:,} MB; at most "
                             f"{mb_limit:,} MB on queue {queue} ({why}): lower processes or memory_mb")
    if not on_gpus and cap.memory_mb:  # training in the worker's memory (on a GPU the model lives on the GPU)
        errors.update(training_memory_errors(cfg, cap, queue))
    return errors


def training_memory_errors(cfg: TrainConfig, cap: QueueCapacity, queue: str) -> dict[str, str]:
    """The training processes' estimated peak (training.memory: per rank, nproc_per_node ranks a node) must fit
    the largest worker's memory (the code sandbox's own cap is checked apart): else an error on micro_batch_size
    when the model state alone fits (smaller micro-batches or gradient_checkpointing would), on model_path when it
    does not."""
    from training.memory import estimate_for_config

    estimate = estimate_for_config(cfg, cfg.resolved_model_path(), ranks=cfg.nproc_per_node * cfg.nnodes)
    if estimate is None:  # the model's shape is unknown (no config.json yet: the tiny model before it is built)
        return {}
    need_mb = cfg.nproc_per_node * estimate.total // 2**20
    if need_mb <= cap.memory_mb:
        return {}
    state = sum(estimate.parts.get(k, 0) for k in ("runtime", "weights", "gradients", "optimizer", "reference"))
    what = (f"training takes about {need_mb:,} MB ({cfg.nproc_per_node} × {estimate.text()}) on queue {queue}; "
            f"{cap.has(f'{cap.memory_mb:,} MB of memory')}")
    if cfg.nproc_per_node * state // 2**20 <= cap.memory_mb:
        return {"micro_batch_size": f"{what}: lower micro_batch_size or set gradient_checkpointing"}
    return {"model_path": f"{what}: the model's weights, gradients and optimizer state alone do not fit; use a "
                          "smaller model or fewer ranks a node"}


def check_caps(cfg: TrainConfig, *, queue: str) -> None:
    """Raise FieldErrors when ``cap_errors`` finds anything."""
    errors = cap_errors(cfg, queue=queue)
    if errors:
        raise FieldErrors(errors)
