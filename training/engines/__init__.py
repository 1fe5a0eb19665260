"""Training engines behind one interface (docs/architecture.md#engines-and-distribution): ``run_engine(cfg, out_dir, sink, should_stop)``.

- ``seedbed``: Seedbed's own loop (``training.loop.train``), in this process;
- ``trl``: TRL's ``GRPOTrainer`` under ``torchrun --nproc-per-node N`` (``training.engines.trl``);
- ``verl``: ``python -m verl.trainer.main_ppo`` with hydra overrides (``training.engines.verl``; GPU only);
- ``command``: a trainer of the operator's, registered by name (``training.engines.command``), that writes
  the JSONL event contract (``training.engines.events``).

The external ones are processes Seedbed owns (``training.engines.process``). A config names its engine and
the engine's own knobs come from Seedbed's: a knob the engine does not have is a field error naming the
engine (``engine_errors``), never silently dropped.
"""
from __future__ import annotations

import importlib.util
from typing import Callable

ENGINES = ("seedbed", "trl", "verl", "command")


def engine_errors(cfg) -> dict[str, str]:
    """Field errors of ``cfg`` for its engine: knobs the engine lacks, settings it needs."""
    e: dict[str, str] = {}
    if cfg.engine == "seedbed":
        from training.ranks import distributed_errors

        e.update(distributed_errors(cfg))
        if cfg.command:
            e["command"] = "only for engine command"
        return e
    if cfg.nnodes != 1:
        e["nnodes"] = f"the {cfg.engine} engine runs on one node here; several nodes are for engine seedbed"
    if cfg.strategy == "fsdp":
        e["strategy"] = f"the {cfg.engine} engine chooses its own parallelism; fsdp is for engine seedbed"
    if cfg.engine != "command" and cfg.command:
        e["command"] = "only for engine command"
    if cfg.engine == "trl":
        from training.engines.trl import trl_errors

        e.update(trl_errors(cfg))
    elif cfg.engine == "verl":
        from training.engines.verl import verl_errors

        e.update(verl_errors(cfg))
    elif cfg.engine == "command":
        from training.engines.command import command_errors

        e.update(command_errors(cfg))
    return e


def available_engines() -> list[str]:
    """The engines this machine can run: seedbed always; trl when TRL is installed; verl when verl is
    installed and a CUDA GPU is present; command when the operator registered at least one command."""
    found = ["seedbed"]
    if importlib.util.find_spec("trl") is not None:
        found.append("trl")
    from training.engines.verl import verl_available

    if verl_available():
        found.append("verl")
    from training.engines.command import registered_commands

    if registered_commands():
        found.append("command")
    return found


def run_engine(cfg, out_dir: str, sink, should_stop: Callable[[], bool] = lambda: False):
    """Train ``cfg`` with its engine; returns a ``training.loop.TrainResult``."""
    from training.loop import TrainResult, train

    if cfg.engine == "seedbed":
        from training.distributed import run_distributed
        from training.ranks import world_size

        if world_size(cfg) == 1:
            return train(cfg, out_dir, sink, should_stop)
        status, step = run_distributed(cfg, out_dir, sink, should_stop)
        return TrainResult(status, step, out_dir)
    if cfg.engine == "trl":
        from training.engines.trl import run_trl as run
    elif cfg.engine == "verl":
        from training.engines.verl import run_verl as run
    elif cfg.engine == "command":
        from training.engines.command import run_command as run
    else:
        raise ValueError(f"unknown engine {cfg.engine!r}")
    status, step = run(cfg, out_dir, sink, should_stop)
    return TrainResult(status, step, out_dir)
