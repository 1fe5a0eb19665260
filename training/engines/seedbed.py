"""``engine: seedbed``: Seedbed's own loop (``training.loop.train``), docs/architecture.md#engines-and-distribution.

One rank trains in the run's process; ``nproc_per_node × nnodes`` > 1 is ``torchrun ... -m training.engines.entry.seedbed
<run folder>`` on each node (``run_distributed`` builds and supervises the command, ``entry/seedbed.py`` is one rank), every
rank running the same loop with a ``training.distributed.World``. This module sits above both the loop and
``training.distributed`` (which holds what the loop needs to share a step: World, Parallel, the rank's sink).
"""
from __future__ import annotations

import json
import os
import sys
from typing import Callable

from training.engines import METRICS_IN_PROCESS, Engine
from training.ranks import distributed_errors, world_size


def run_seedbed(cfg, out_dir: str, sink, should_stop: Callable[[], bool], *, node_rank: int | None = None,
                master: tuple[str, int] | None = None) -> tuple[str, int]:
    """Train ``cfg`` with the loop: in this process at one rank, else as this node's torchrun; (status, step)."""
    if node_rank is None and world_size(cfg) == 1:
        from training.loop import train

        result = train(cfg, out_dir, sink, should_stop)
        return result.status, result.step
    return run_distributed(cfg, out_dir, sink, should_stop, node_rank=node_rank or 0, master=master)


def node_gpus(device: str) -> int:
    """The CUDA devices this node's ranks train on: 0 for a CPU run (``device`` cpu, or auto without CUDA)."""
    import torch

    return torch.cuda.device_count() if device != "cpu" and torch.cuda.is_available() else 0


def run_distributed(cfg, out_dir: str, sink, should_stop: Callable[[], bool], *, node_rank: int = 0,
                    master: tuple[str, int] | None = None):
    """Run (or resume, from the newest checkpoint) a multi-rank Seedbed run as this node's torchrun; returns
    (status, last step). Node 0's rank 0 writes the events; on other nodes the sink only gets the log."""
    from training.checkpoint import latest_checkpoint
    from training.engines.process import run_process
    from training.fields import FieldErrors
    from training.ranks import placement_errors, torchrun_command

    errors = placement_errors(cfg, node_gpus(cfg.device))
    if errors:
        raise FieldErrors(errors)
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "seedbed_config.json"), "w", encoding="utf-8") as fh:
        json.dump(cfg.to_dict(), fh, indent=2, sort_keys=True)
    if not cfg.model_path:  # the built-in tiny model: built once, before any rank loads it
        from training.tiny import ensure_tiny_model

        ensure_tiny_model(cfg.resolved_model_path(), log=sink.on_log)
    resume = latest_checkpoint(out_dir)
    start = resume[0] if resume else 0
    if node_rank == 0:
        sink.truncate_after(start)
    sink.on_log(f"{'resuming at step ' + str(start) if resume else 'starting'}: {cfg.total_steps} steps on "
                f"{world_size(cfg)} ranks ({cfg.nnodes} node(s) × {cfg.nproc_per_node}, strategy {cfg.strategy})")
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", os.environ.get("SEEDBED_TORCH_THREADS", "1"))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    # node 0's files are the run folder's own; another node's go beside them (one machine may run two nodes)
    proc_dir = out_dir if node_rank == 0 else os.path.join(out_dir, "nodes", str(node_rank))
    status, step = run_process(torchrun_command(cfg, out_dir, node_rank=node_rank, master=master), out_dir=out_dir,
                               sink=sink, should_stop=should_stop, env=env, proc_dir=proc_dir,
                               on_ranks=sink.on_ranks)
    sink.flush_ranks()
    return status, max(step, start)


ENGINE = Engine(
    name="seedbed", label="seedbed: Seedbed's own loop", run=run_seedbed, order=0,
    lacks={"command": "only for engine command"}, errors=distributed_errors,
    launch="the loop in the run's process; several ranks: torchrun -m training.engines.entry.seedbed on each node",
    metrics=METRICS_IN_PROCESS + " (several ranks: rank 0's events file)", nodes=True, resumes_on_other_ranks=True)
