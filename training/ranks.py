"""How many ranks a Seedbed run has and how they start: the config's rules for them and the torchrun command
(training.engines.seedbed runs the ranks). No torch here: the web process validates configs with it."""
from __future__ import annotations

import sys

STRATEGIES = ("none", "ddp", "fsdp")
TORCHRUN_MODULE = "training.engines.torchrun"  # torch.distributed.run, recording its failed ranks' exits


def world_size(cfg) -> int:
    return cfg.nproc_per_node * cfg.nnodes


def distributed_errors(cfg) -> dict[str, str]:
    """Field errors of a seedbed-engine config's ranks and strategy."""
    e: dict[str, str] = {}
    n = world_size(cfg)
    if n == 1:
        if cfg.strategy != "none":
            e["strategy"] = f"{cfg.strategy} needs several ranks: set nproc_per_node (or nnodes) above 1, or use none"
        return e
    if cfg.strategy == "none":
        e["strategy"] = (f"{n} ranks (nproc_per_node × nnodes) need a strategy: ddp (every rank holds the model) or "
                         "fsdp (sharded)")
    if cfg.prompts_per_step % n:
        e["prompts_per_step"] = (f"{cfg.prompts_per_step} groups a step cannot be split evenly over {n} ranks "
                                 f"(nproc_per_node × nnodes); a group never spans ranks: use a multiple of {n}")
    if cfg.strategy == "fsdp" and cfg.keep_routing:
        e["keep_routing"] = "keep routing replays experts in one unsharded forward; use strategy ddp"
    if cfg.rollout_engine == "vllm" and n > 1 and cfg.device == "cpu":
        e["rollout_engine"] = "vllm needs CUDA"
    return e


def placement_errors(cfg, gpus: int) -> dict[str, str]:
    """Field errors of starting ``cfg``'s ranks on a node with ``gpus`` CUDA devices (0 for a CPU run). Ranks that
    outnumber the GPUs share them and talk over gloo (NCCL refuses two ranks on one GPU). DDP works there; FSDP2
    does not: gathering its full state dict (``get_model_state_dict(full_state_dict=True)``, which the loop's
    ``Parallel.sync`` calls after every step) over gloo on CUDA tensors kills the rank with SIGSEGV inside torch's
    functional collectives, on an H200 with torch 2.11, for a two-layer model as for the tiny one (while each of
    gloo's collectives on CUDA tensors, FSDP2's forward and its backward work alone;
    bench/curves/gpu_check_2026-12-04.txt). So fsdp is refused before any rank starts.

    >>> from types import SimpleNamespace as C
    >>> placement_errors(C(strategy="fsdp", nproc_per_node=2), 1)["strategy"][:60]
    'fsdp shards over one GPU a rank: this node has 1 GPU for npr'
    >>> placement_errors(C(strategy="fsdp", nproc_per_node=2), 2), placement_errors(C(strategy="ddp", nproc_per_node=2), 1)
    ({}, {})
    """
    n = cfg.nproc_per_node
    if cfg.strategy == "fsdp" and gpus and n > gpus:
        return {"strategy": f"fsdp shards over one GPU a rank: this node has {gpus} GPU{'s' if gpus != 1 else ''} "
                            f"for nproc_per_node {n}; use strategy ddp (its ranks may share a GPU) or nproc_per_node "
                            f"at most {gpus}"}
    return {}


def torchrun_command(cfg, out_dir: str, *, node_rank: int = 0, master: tuple[str, int] | None = None) -> list[str]:
    """torchrun for one node of the run: ``--standalone`` for a one-node run, else a static rendezvous at rank
    0's host and port (``master``); ``--max-restarts 0``: a failed rank fails the run (Seedbed resumes it from
    its checkpoint, not torchrun from scratch). torchrun through ``training.engines.torchrun``, which records how
    each failed rank ended (a signal it did not ask for is a lost attempt, not the run's error)."""
    cmd = [sys.executable, "-m", TORCHRUN_MODULE, "--nproc-per-node", str(cfg.nproc_per_node),
           "--max-restarts", "0"]
    if cfg.nnodes == 1:
        cmd += ["--standalone"]
    else:
        host, port = master
        cmd += ["--nnodes", str(cfg.nnodes), "--node-rank", str(node_rank), "--master-addr", host,
                "--master-port", str(port)]
    return cmd + ["-m", "training.engines.entry.seedbed", out_dir]
