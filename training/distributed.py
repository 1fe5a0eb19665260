"""Training beyond one process (docs/architecture.md#engines-and-distribution): torchrun ranks, DDP or FSDP2, sharded (DCP) checkpoints.

A Seedbed run with ``nproc_per_node × nnodes`` > 1 is ``torchrun ... -m training.engines.entry.seedbed <run folder>``
(``training.engines.seedbed.run_distributed`` builds and supervises the command; ``training.engines.entry.seedbed``
is one rank; this module is what the loop needs to share a step, below it). Every rank runs the same loop
(``training.loop.train``) with a ``World`` saying which share of the step is its own:

- the step's prompts and every row's sampling seed are drawn from generators that are identical on every rank,
  and rank r generates and scores groups [r·k, (r+1)·k) of them (k = prompts_per_step / world size): a group
  never spans ranks, so group advantages stay local, and a row's completion depends on its seed alone
  (``training.rollout.row_uniforms``), so 2 ranks draw exactly the completions 1 rank would;
- dynamic sampling: ranks sum their informative groups after each generation batch and stop together;
- the step's metrics are computed from every rank's rewards, lengths and verdicts (gathered), the update's
  statistics averaged over ranks; only rank 0 writes to the sink (the JSONL events the supervisor tails);
- gradients: ``ddp`` wraps the training forward in DistributedDataParallel (all-reduce); ``fsdp`` shards every
  decoder layer and the root with FSDP2 ``fully_shard`` on an explicit device mesh (reduce-scatter), and keeps
  an unsharded copy for sampling, refreshed from the full state after every optimizer step (as the vLLM
  engine's weights are). Each rank's loss is its share of the global loss (``World.loss_scale``: the global
  normaliser of the aggregation, times the world size that DDP/FSDP average over), so the update equals the
  single-process update of the same global batch;
- stop: rank 0 reads the stop file (and every rank its own SIGTERM); the ranks agree every step (all-reduce
  MAX), so they stop at the same step and write one checkpoint together;
- checkpoints (``training.checkpoint``): the optimizer state through ``torch.distributed.checkpoint`` (sharded,
  keyed by parameter name: it loads at any world size) plus the full model as a plain Hugging Face folder
  (rank 0), so a checkpoint evaluates, seeds a new run and resumes at 1, 2 or N ranks.

CPU runs use gloo, CUDA runs NCCL (one GPU per local rank; more ranks than GPUs share them over gloo). The mesh
is passed explicitly: the default device mesh is CUDA whenever a GPU is present, which a gloo group cannot use.
"""
from __future__ import annotations

import contextlib
import copy
import datetime
import os
import re
import signal
import socket
import threading
import time
import traceback
from dataclasses import dataclass, field

import torch

from training.sink import NullSink


@dataclass
class World:
    """Which rank this process is, of how many; collective helpers that are identities for one process."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    comm_s: float = 0.0  # seconds this rank spent blocked in collectives (with SEEDBED_COMM_TIMING, DDP's too)
    hosts: list | None = None  # every rank's host name, gathered once (rank_report)
    timeout_s: float = 1800.0  # how long a collective waits for the other ranks (init_process_group's timeout)
    step: int = 0  # the step the loop is in (a timed-out collective's error names it)

    def _timed(self, fn, *args):
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.comm_s += time.perf_counter() - t0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def shard(self, n: int) -> range:
        """This rank's contiguous block of ``n`` items (``n`` divisible by the world size: config validation)."""
        k = n // self.size
        return range(self.rank * k, (self.rank + 1) * k)

    def all_reduce(self, values, op: str = "sum") -> torch.Tensor:
        t = torch.as_tensor(values, dtype=torch.float64).clone()
        if self.size > 1:
            ops = {"sum": torch.distributed.ReduceOp.SUM, "max": torch.distributed.ReduceOp.MAX}
            self._timed(torch.distributed.all_reduce, t, ops[op])
        return t

    def agree(self, flag: bool) -> bool:
        """True on every rank when it is true on any."""
        return bool(self.all_reduce([1.0 if flag else 0.0], "max")[0] > 0)

    def gather_cat(self, t: torch.Tensor) -> torch.Tensor:
        """Every rank's ``t`` (same shape on all) concatenated along dim 0, in rank order."""
        if self.size == 1:
            return t
        parts = [torch.empty_like(t) for _ in range(self.size)]
        self._timed(torch.distributed.all_gather, parts, t.contiguous())
        return torch.cat(parts)

    def gather_objects(self, obj) -> list:
        if self.size == 1:
            return [obj]
        out = [None] * self.size
        self._timed(torch.distributed.all_gather_object, out, obj)
        return out

    def barrier(self) -> None:
        if self.size > 1:
            self._timed(torch.distributed.barrier)

    def loss_scale(self, weight: float) -> float:
        """The factor that turns this rank's aggregated loss (normalised by its own ``weight``: tokens,
        sequences or rows, ``training.algorithms.aggregation_weight``) into its share of the global loss, given
        that DDP and FSDP average gradients over ranks: size · weight / Σ weights (0 when no rank has any)."""
        if self.size == 1:
            return 1.0
        total = float(self.all_reduce([weight])[0])
        return self.size * weight / total if total > 0 else 0.0

    def mean_stats(self, stats: dict[str, float]) -> dict[str, float]:
        """Per-rank statistics of an update (entropy, clip fractions, losses) averaged over ranks."""
        if self.size == 1 or not stats:
            return stats
        keys = sorted(stats)
        means = self.all_reduce([stats[k] for k in keys]) / self.size
        return dict(zip(keys, means.tolist()))


SINGLE = World()


def world_from_env(device: str = "auto", timeout_s: float = 1800.0) -> World:
    """This process's World from torchrun's environment; joins the process group when there are several ranks:
    NCCL for CUDA tensors with a GPU per local rank (gloo for the loop's CPU tensors: its gathers and agreements),
    gloo alone on CPUs, and gloo alone when a node has more ranks than GPUs (they share the GPUs round-robin:
    NCCL refuses two ranks on one GPU; ddp only, ``training.ranks.placement_errors``). ``timeout_s``: how long
    one collective waits for its peers (gloo then raises in the waiting rank, ``collective_timeout`` rewords it;
    NCCL's watchdog aborts the process)."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    gpus = torch.cuda.device_count() if cuda else 0
    shared = cuda and int(os.environ.get("LOCAL_WORLD_SIZE", "1")) > gpus
    dev = torch.device(f"cuda:{local % max(gpus, 1)}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(dev)
    if size > 1 and not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend="cpu:gloo,cuda:nccl" if cuda and not shared else "gloo",
                                             timeout=datetime.timedelta(seconds=timeout_s))
    return World(rank=rank, size=size, local_rank=local, device=dev, timeout_s=timeout_s)


class CollectiveTimeoutError(RuntimeError):
    """A collective that did not complete within the run's ``collective_timeout_s``: the run fails with it."""


#: gloo's words for an operation that waited past the process group's timeout
TIMED_OUT = re.compile(r"Timed out waiting \d+ ?ms for \w+ operation")
#: the torch.distributed functions that are collectives (or their point-to-point parts)
COLLECTIVE = re.compile(r"(all_reduce|all_gather|reduce_scatter|broadcast|barrier|all_to_all|gather|scatter|"
                        r"reduce|send|recv)\w*")


def collective_timeout(exc: BaseException, world: World) -> CollectiveTimeoutError | None:
    """``exc`` reworded when it is a collective that timed out (None otherwise): "rank R waited S s in NAME at
    step N", NAME the innermost torch.distributed function of its traceback that is a collective
    (``all_reduce``, FSDP2's ``all_gather_into_tensor`` …), else the innermost function of Seedbed's own that
    was waiting in one."""
    if not TIMED_OUT.search(str(exc)):
        return None
    frames = traceback.extract_tb(exc.__traceback__)[::-1]
    names = [f.name for f in frames if f"{os.sep}torch{os.sep}distributed{os.sep}" in f.filename
             and COLLECTIVE.fullmatch(f.name)]
    ours = [f.name for f in frames if f"{os.sep}training{os.sep}" in f.filename
            and f"{os.sep}site-packages{os.sep}" not in f.filename]
    where = names[0] if names else f"a collective of {ours[0]}" if ours else "a collective"
    return CollectiveTimeoutError(f"rank {world.rank} waited {world.timeout_s:g} s in {where} at step {world.step}")


# ----------------------------------------------------------------------------------------------------------
# Models across ranks
# ----------------------------------------------------------------------------------------------------------

class PolicyForward(torch.nn.Module):
    """The training forward (``sequence_logprobs``) as one module call, so DDP sees one forward per backward
    (the forward itself may call the model several times: a packed sequence, or the shared prompt prefill and
    then the completions by length; exactly once under fsdp, ``training.completion_forward.completion_states``)."""

    def __init__(self, model, temperature: float, use_kept_mask: bool, checkpoint: bool = False):
        super().__init__()
        self.model, self.temperature, self.use_kept_mask = model, temperature, use_kept_mask
        self.checkpoint = checkpoint  # gradient_checkpointing

    def forward(self, batch):
        from training.rollout import sequence_logprobs

        return sequence_logprobs(self.model, batch, temperature=self.temperature, use_kept_mask=self.use_kept_mask,
                                 with_entropy=True, checkpoint=self.checkpoint)


def sparse_tied_embedding(model) -> bool:
    """A tied input embedding's backward as a sparse gradient (the rows of the batch's tokens), added in place to
    the output layer's dense [V, H] one: one V x H tensor in each backward instead of three (the head's, the
    embedding's own, their sum), 0.2 GB on SmolLM2 (none with ``head_grad_in_place``: the head's goes straight
    into ``weight.grad``, the sparse rows after it). Only in one process (DDP expects the dense gradients it was
    built for) and only when tied (the head's dense share makes the parameter's gradient dense, as fused AdamW
    needs); True when set."""
    emb, head = model.get_input_embeddings(), model.get_output_embeddings()
    if type(emb) is torch.nn.Embedding and head is not None and emb.weight is head.weight:
        emb.sparse = True
        return True
    return False


def head_grad_in_place(model) -> bool:
    """The output layer's weight gradient accumulated in place into ``weight.grad`` by the chunked training
    forward (``training.rollout.HeadGradInPlace``): no fresh V x H tensor per backward beside it, 0.11 GB on
    SmolLM2. Only in one process (DDP's and FSDP's hooks reduce the gradients autograd hands them); True when
    set (a plain ``Linear`` head)."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if type(head) is torch.nn.Linear:
        head.grad_in_place = True
        return True
    return False


class Parallel:
    """The policy as the loop uses it, whatever the strategy:

    ``model``: the module the optimizer steps (the sharded FSDP2 module under fsdp) · ``forward(batch)``: the
    training forward (DDP-wrapped under ddp) · ``full_model``: an unsharded model for sampling, evaluation and
    the Hugging Face export (the same module except under fsdp) · ``sync()``: refresh ``full_model`` after an
    optimizer step · ``clip_grad_norm(max)``: the global gradient norm, clipped."""

    def __init__(self, model, cfg, world: World):
        self.world = world
        self.strategy = cfg.strategy if world.size > 1 else "none"
        self.model = self.full_model = model
        self._forward = PolicyForward(model, cfg.temperature, cfg.keep_sampling_mask, cfg.gradient_checkpointing)
        if self.strategy == "none":
            sparse_tied_embedding(model)
            head_grad_in_place(model)
        if self.strategy == "ddp":
            from torch.nn.parallel import DistributedDataParallel

            ids = [world.device.index] if world.device.type == "cuda" else None
            self._forward = DistributedDataParallel(self._forward, device_ids=ids)
            if os.environ.get("SEEDBED_COMM_TIMING") == "1":  # bench/distributed.py: time the gradient all-reduce
                self._forward.register_comm_hook(world, timed_allreduce_hook)
        elif self.strategy == "fsdp":
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import fully_shard

            self.full_model = copy.deepcopy(model).requires_grad_(False)
            mesh = init_device_mesh(world.device.type, (world.size,))
            layers = decoder_layers(model)
            if not layers:
                raise ValueError("strategy fsdp: the model names no decoder layer class (transformers' "
                                 "_no_split_modules) to shard; use strategy ddp")
            # parameters stay gathered from a layer's forward to its backward (no second all-gather in the backward);
            # the training forward calls the sharded model exactly once a micro-batch whatever its rows, so every
            # rank makes the same all-gathers and reduce-scatters (training.completion_forward: single_call)
            for layer in layers:
                fully_shard(layer, mesh=mesh, reshard_after_forward=False)
            fully_shard(model, mesh=mesh, reshard_after_forward=False)

    def forward(self, batch):
        return self._forward(batch)

    def accumulating(self, more: bool):
        """The context of a micro-batch's forward and backward: under ddp, with ``more`` micro-batches of the
        same optimizer step to come, no gradient all-reduce yet (``no_sync``: the last one reduces the sum)."""
        if more and self.strategy == "ddp":
            return self._forward.no_sync()
        return contextlib.nullcontext()

    def sync(self) -> None:
        if self.strategy != "fsdp":
            return
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        full = self.world._timed(lambda: get_model_state_dict(self.model,
                                                              options=StateDictOptions(full_state_dict=True)))
        missing, unexpected = self.full_model.load_state_dict(full, strict=False)
        tied = {k for k in missing if k.endswith("lm_head.weight")}  # tied to the embedding: one tensor
        if set(missing) - tied or unexpected:
            raise RuntimeError(f"fsdp: the gathered state does not fit the sampling copy (missing "
                               f"{sorted(set(missing) - tied)[:5]}, unexpected {sorted(unexpected)[:5]})")

    def clip_grad_norm(self, max_norm: float) -> float:
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm if max_norm > 0 else float("inf"))
        return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)


def timed_allreduce_hook(world: World, bucket):
    """A DDP communication hook that averages a gradient bucket with a blocking all-reduce and counts its time
    in ``world.comm_s``: the gradient traffic measured on its own, without overlap with the backward (used by
    bench/distributed.py through SEEDBED_COMM_TIMING=1; DDP's own hook overlaps it)."""
    buffer = bucket.buffer()
    t0 = time.perf_counter()
    torch.distributed.all_reduce(buffer)
    buffer.div_(world.size)
    world.comm_s += time.perf_counter() - t0
    fut = torch.futures.Future()
    fut.set_result(buffer)
    return fut


def decoder_layers(model) -> list:
    """The modules FSDP2 shards one by one: instances of the classes the model declares unsplittable
    (transformers' ``_no_split_modules``, e.g. LlamaDecoderLayer)."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    return [m for m in model.modules() if type(m).__name__ in names]


# ----------------------------------------------------------------------------------------------------------
# One rank's sink and stop (the rank itself: training.engines.entry.seedbed)
# ----------------------------------------------------------------------------------------------------------

class EventSink(NullSink):
    """Rank 0's sink: the loop's events as lines of the JSONL contract (training.engines.events), which the
    supervising process (``training.engines.seedbed.run_distributed``) forwards to the run's own sink."""

    def __init__(self, writer):
        self.writer = writer

    def truncate_after(self, step):  # the supervisor did it before starting the ranks
        pass

    def on_metrics(self, step, metrics):
        self.writer.metrics(step, metrics)

    def on_samples(self, step, rows):
        self.writer.write({"step": step, "samples": rows})

    def on_checkpoint(self, step, path):
        self.writer.write({"step": step, "checkpoint": path})

    def on_log(self, line):
        self.writer.write({"log": line})

    def on_ranks(self, step, ranks):
        self.writer.write({"step": step, "ranks": ranks})

    def flush(self):
        pass


def _exit_after(seconds: float) -> None:
    time.sleep(seconds)
    os._exit(128 + signal.SIGTERM)


class RankStop:
    """should_stop() of a rank: rank 0 reads the stop file, every rank its own SIGTERM (torchrun forwards it);
    the ranks agree, so all stop after the same step."""

    def __init__(self, world: World, stop_file: str):
        self.world, self.stop_file, self.signalled = world, stop_file, False
        signal.signal(signal.SIGTERM, self._on_signal)

    def _on_signal(self, signum, frame) -> None:
        """The stop is cooperative (the ranks agree and end after the same step), but a rank whose peers are gone
        (torchrun's SIGTERM after one failed) may never reach that agreement: it exits on its own once
        ``world.timeout_s`` has passed (a rank blocked in a collective sees the signal only when the collective
        ends, which the same timeout bounds)."""
        if not self.signalled:
            threading.Thread(target=_exit_after, args=(self.world.timeout_s,), daemon=True).start()
        self.signalled = True

    def __call__(self) -> bool:
        mine = self.signalled or (self.world.is_main and bool(self.stop_file) and os.path.exists(self.stop_file))
        return self.world.agree(mine)


def rank_report(world: World, step: int) -> list[dict] | None:
    """Every rank's host, pid, clock and peak memory at this step (rank 0 gets the list; the run page's ranks
    table): one tensor gather a step; the host names, which do not change, are gathered once."""
    import resource

    if world.hosts is None:
        world.hosts = world.gather_objects(socket.gethostname())
    mine = torch.tensor([world.rank, world.local_rank, os.getpid(), step, time.time(),
                         resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024], dtype=torch.float64)
    rows = world.gather_cat(mine).view(world.size, -1).tolist()
    if not world.is_main:
        return None
    return [{"rank": int(r), "local_rank": int(lr), "host": world.hosts[int(r)], "pid": int(pid), "step": int(s),
             "time": t, "rss_mb": rss} for r, lr, pid, s, t, rss in rows]

