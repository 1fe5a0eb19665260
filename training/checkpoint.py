"""Checkpoints: a model folder (loadable by transformers, usable as a new run's model_path) plus the trainer
state (optimizer, scheduler, RNG generators, step) and the run's config, for exact resume.

Layout: ``<out_dir>/checkpoints/step_000012/`` with ``config.json`` + weights + tokenizer (the model),
``seedbed_config.json`` (the TrainConfig), ``trainer_state.pt`` (step, schedule, generators) and ``optim/`` (the
optimizer state as a torch.distributed.checkpoint, sharded by rank; training.distributed). Written to a temporary folder and renamed,
so a crash mid-write never leaves a half checkpoint that resume would pick.
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import warnings

import torch

_STEP_DIR = re.compile(r"^step_(\d+)$")
_ENGINE_DIR = re.compile(r"^checkpoint-(\d+)$")  # TRL's (transformers Trainer's) checkpoint folders


def checkpoint_dir(out_dir: str) -> str:
    return os.path.join(out_dir, "checkpoints")


def latest_checkpoint(out_dir: str) -> tuple[int, str] | None:
    root = checkpoint_dir(out_dir)
    if not os.path.isdir(root):
        return None
    found = [(int(m.group(1)), os.path.join(root, d)) for d in os.listdir(root) if (m := _STEP_DIR.match(d))]
    found = [(s, p) for s, p in found if os.path.isfile(os.path.join(p, "trainer_state.pt"))]
    return max(found) if found else None


def discard_checkpoints_except(out_dir: str, keep_steps, keep_paths=()) -> list[int]:
    """Remove the checkpoints of ``out_dir`` the run's record does not know: a Seedbed ``step_N`` whose step is
    not in ``keep_steps``, an external engine's ``checkpoint-N`` (TRL; N counts the engine's own steps) whose
    path is not in ``keep_paths``. A folder left by something else (an earlier run with the same id, a save
    whose record never landed) must not be resumed from. Returns the numbers removed."""
    root = checkpoint_dir(out_dir)
    if not os.path.isdir(root):
        return []
    keep = set(keep_steps)
    keep_names = {os.path.basename(os.path.normpath(p)) for p in keep_paths}
    removed = []
    for d in os.listdir(root):
        m, ext = _STEP_DIR.match(d), _ENGINE_DIR.match(d)
        if (m and int(m.group(1)) not in keep) or (ext and d not in keep_names):
            shutil.rmtree(os.path.join(root, d), ignore_errors=True)
            removed.append(int((m or ext).group(1)))
    return sorted(removed)


def prune_checkpoints(out_dir: str, keep: int) -> list[int]:
    """Keep ``out_dir``'s newest ``keep`` whole checkpoints (``step_N`` with its trainer state: the newest is what
    resume reads) and remove the older ones; ``keep`` 0 keeps all. A folder being written (``step_N.tmp``) is left
    alone. The CLI's retention (``keep_checkpoints``); the web app's also keeps the ones its records need
    (webapp.runs.services.run_checkpoints_prune). Returns the steps removed."""
    root = checkpoint_dir(out_dir)
    if keep <= 0 or not os.path.isdir(root):
        return []
    whole = sorted((int(m.group(1)), d) for d in os.listdir(root)
                   if (m := _STEP_DIR.match(d)) and os.path.isfile(os.path.join(root, d, "trainer_state.pt")))
    for _, d in whole[:-keep]:
        shutil.rmtree(os.path.join(root, d), ignore_errors=True)
    return [step for step, _ in whole[:-keep]]


def save_checkpoint(out_dir: str, step: int, *, model, tokenizer, optimizer, scheduler, generators: dict,
                    config_dict: dict, world=None, export_model=None) -> str:
    """Write ``step_N``: every rank its shards of the optimizer state (``optim/``, torch.distributed.checkpoint,
    keyed by parameter name, so it loads at any world size); rank 0 the model as a Hugging Face folder
    (``export_model``: an unsharded copy when ``model`` is FSDP-sharded), the config and the trainer state
    (step, schedule, generators: the same on every rank). Renamed into place once every rank has written."""
    from training.distributed import SINGLE

    world = world or SINGLE
    final = os.path.join(checkpoint_dir(out_dir), f"step_{step:06d}")
    tmp = final + ".tmp"
    if world.is_main:
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
    world.barrier()
    try:
        _write_checkpoint(tmp, final, step, model=model, tokenizer=tokenizer, optimizer=optimizer,
                          scheduler=scheduler, generators=generators, config_dict=config_dict, world=world,
                          export_model=export_model)
    except BaseException:
        # a write that failed (a full disk) leaves no half checkpoint taking the space a resume needs
        if world.is_main:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _write_checkpoint(tmp: str, final: str, step: int, *, model, tokenizer, optimizer, scheduler, generators: dict,
                      config_dict: dict, world, export_model) -> None:
    _dcp_save({"optim": _optimizer_state(model, optimizer)}, os.path.join(tmp, "optim"))
    world.barrier()
    if world.is_main:
        (export_model or model).save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        with open(os.path.join(tmp, "seedbed_config.json"), "w", encoding="utf-8") as fh:
            json.dump(config_dict, fh, indent=2, sort_keys=True)
        torch.save({"step": step, "scheduler": scheduler.state_dict(), "world_size": world.size,
                    "generators": {k: g.get_state() for k, g in generators.items()},
                    "torch_rng": torch.get_rng_state(), "python_rng": random.getstate()},
                   os.path.join(tmp, "trainer_state.pt"))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
    world.barrier()


def load_trainer_state(path: str, *, model, optimizer, scheduler, generators: dict, world=None) -> int:
    """Restore the optimizer (its shards for this world size), schedule and generators of checkpoint ``path``
    into a model already holding the checkpoint's weights; returns its step."""
    from training.distributed import SINGLE

    world = world or SINGLE
    # weights_only: tensors, numbers, strings and containers only; a planted pickle in a checkpoint runs nothing
    state = torch.load(os.path.join(path, "trainer_state.pt"), weights_only=True)
    if "optimizer" in state:  # written before sharded checkpoints: one process's state, by parameter position
        from torch.distributed.fsdp import FSDPModule

        if isinstance(model, FSDPModule):
            raise RuntimeError(f"{path} predates sharded checkpoints: resume it with one process (nproc_per_node 1) "
                               "or strategy ddp")
        optimizer.load_state_dict(state["optimizer"])
    else:
        from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict

        target = {"optim": _optimizer_state(model, optimizer)}
        _dcp_load(target, os.path.join(path, "optim"))
        set_optimizer_state_dict(model, optimizer, optim_state_dict=target["optim"])
    scheduler.load_state_dict(state["scheduler"])
    for k, g in generators.items():
        g.set_state(state["generators"][k])
    torch.set_rng_state(state["torch_rng"])
    random.setstate(state["python_rng"])
    return int(state["step"])


def _optimizer_state(model, optimizer) -> dict:
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    return get_optimizer_state_dict(model, optimizer)


def _dcp_save(state: dict, path: str) -> None:
    import torch.distributed.checkpoint as dcp

    with warnings.catch_warnings():  # one process: DCP says it assumes one process, which is the case
        warnings.filterwarnings("ignore", message=".*torch.distributed is disabled.*")
        dcp.save(state, checkpoint_id=path)


def _dcp_load(state: dict, path: str) -> None:
    import torch.distributed.checkpoint as dcp

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*torch.distributed is disabled.*")
        dcp.load(state, checkpoint_id=path)
