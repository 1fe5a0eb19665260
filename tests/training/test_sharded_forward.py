"""The training forward of an FSDP2-sharded model on 2 real gloo ranks whose rows differ (training.completion_forward:
single_call): rank 0's completions fit one packed sequence, rank 1's are too long to pack, which in one process
takes a prefill and a call per length group. Each call of a sharded model is an all-gather (and a reduce-scatter
in the backward) that both ranks must make, so the forward must be one call on both; the log-probs and the
(averaged, reduce-scattered) gradients must equal one process's."""
from __future__ import annotations

import datetime
import os
import socket

import torch
import torch.multiprocessing

from tests.training.test_memory import random_batch, random_llama
from training.completion_forward import PACK_MAX_TOKENS
from training.rollout import RolloutBatch, sequence_logprobs

TIMEOUT_S = 30  # a rank waiting longer for its peer's collective fails (before: they waited for each other for ever)


def rank_batch(rank: int) -> RolloutBatch:
    if rank == 0:
        return random_batch(B=4, T=6, group=2)  # 2 prompts, packs of a few tokens
    g = torch.Generator().manual_seed(7)
    T = PACK_MAX_TOKENS + 40  # one prompt's two completions: a pack of 5 + 1,063 + 299 tokens does not fit
    comp = torch.randint(1, 50, (2, T), generator=g)
    mask = torch.zeros(2, T)
    mask[0], mask[1, :300] = 1.0, 1.0
    prompts = torch.randint(1, 50, (1, 5), generator=g).repeat(2, 1)
    return RolloutBatch(prompts, torch.ones(2, 5, dtype=torch.long), comp, mask,
                        torch.zeros(2, T, dtype=torch.float64), torch.zeros(2, dtype=torch.bool))


def sharded_rank(rank: int, port: int, out_dir: str) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from training.distributed import decoder_layers

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=2,
                                         timeout=datetime.timedelta(seconds=TIMEOUT_S))
    try:
        model = random_llama()  # the same weights on both ranks (seeded)
        mesh = init_device_mesh("cpu", (2,))
        for layer in decoder_layers(model):
            fully_shard(layer, mesh=mesh, reshard_after_forward=False)
        fully_shard(model, mesh=mesh, reshard_after_forward=False)
        batch = rank_batch(rank)
        logp, _ = sequence_logprobs(model, batch, temperature=1.0)
        (logp * batch.completion_mask).sum().backward()
        grads = {n: p.grad.full_tensor() for n, p in model.named_parameters()}
        torch.save({"logp": logp.detach(), "grads": grads}, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        torch.distributed.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_of_other_lengths_make_the_same_calls_and_one_process_s_numbers(tmp_path):
    torch.multiprocessing.start_processes(sharded_rank, args=(free_port(), str(tmp_path)), nprocs=2,
                                          start_method="spawn")  # raises when a rank failed (a timed-out wait)
    model = random_llama()
    expected = {}
    for rank in (0, 1):
        batch = rank_batch(rank)
        got = torch.load(tmp_path / f"rank{rank}.pt")
        model.zero_grad()
        logp, _ = sequence_logprobs(model, batch, temperature=1.0)
        real = batch.completion_mask
        assert torch.allclose(got["logp"] * real, logp.detach() * real, rtol=1e-9, atol=1e-12), rank
        (logp * real).sum().backward()
        for n, p in model.named_parameters():
            expected[n] = expected.get(n, 0) + p.grad / 2  # FSDP averages the ranks' gradients
    for n, grad in got["grads"].items():
        assert torch.allclose(grad, expected[n], rtol=1e-6, atol=1e-6), n
