"""The models a training loop steps (docs/architecture.md#packed-seeds): a group of one run, or a packed group.

``training.loop.train_group`` trains a list of runs (*members*) through one object, the group, which owns what
they share: how their completions are sampled, how their micro-batches go through the model, where their
gradients land. Everything else (data, generators, verifiers, optimizer, schedule, sink, checkpoints) is each
member's own.

- ``SoloGroup``: one member, the loop as it always was: its model under ``training.distributed.Parallel``
  (DDP or FSDP2 across ranks), the rollout engine its config names (hf or vLLM), routing replay for MoE models.
- ``StackGroup``: up to ``slots`` members of one Llama-family model in one process, their weights stacked
  (``training.seed_stack``): all their rows sampled in one decode loop (``training.stack_decode``), all their
  micro-batches in one batched forward (``training.stack_forward``), one backward.
"""
from __future__ import annotations

import contextlib

import torch

from training.distributed import SINGLE, Parallel, World
from training.rollout import RolloutBatch, kept_tokens
from training.rollout_engines import make_rollout_engine
from training.routing import RoutingReplay


def compute_precision(cfg, device):
    """The forwards' precision: bf16 runs them under bfloat16 autocast (the weights, their gradients and the
    optimizer state stay float32: mixed precision, no loss scaling needed); fp32 leaves them as they are."""
    device = torch.device(device)
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.precision == "bf16")


def sampling_options(cfg) -> dict:
    """The rollout engine's options from a config (a packed group's members share them: ``training.packing``)."""
    return dict(max_new_tokens=cfg.max_new_tokens, top_p=cfg.top_p, top_k=cfg.top_k,
                keep_sampling_mask=cfg.keep_sampling_mask, record_routing=cfg.keep_routing, stop=cfg.stop)


class SoloGroup:
    """One member: its model, its engine, its ranks."""

    slots = 1

    def __init__(self, cfg, device, world: World = SINGLE):
        self.cfg, self.device, self.world = cfg, torch.device(device), world
        self.free = [0]
        self.engine = None

    def place(self, member, model, tokenizer) -> None:
        member.slot = self.free.pop(0)
        member.policy = Parallel(model, member.cfg, self.world)  # DDP / FSDP2 across ranks; the model in one process
        self.engine = make_rollout_engine(member.cfg.rollout_engine, member.policy.full_model, tokenizer)

    def release(self, member) -> None:
        self.free.append(member.slot)

    def generate(self, requests: list) -> list[RolloutBatch]:
        """[(member, prompt rows, row seeds)] -> each member's sampled batch."""
        out = []
        for member, rows, seeds in requests:
            with compute_precision(member.cfg, self.device):
                out.append(self.engine.generate(rows, temperature=member.cfg.temperature,
                                                generator=member.gens["sampling"], row_seeds=seeds,
                                                **sampling_options(member.cfg)))
        return out

    def micro(self, steps, mbs, more: bool):
        """The context of a micro-batch's forward and backward (routing replay, precision, DDP's no_sync)."""
        (step,), (mb,) = steps, mbs
        ctx = contextlib.ExitStack()
        ctx.enter_context(RoutingReplay(step.policy.model, mb.routing if step.cfg.keep_routing else None))
        ctx.enter_context(compute_precision(step.cfg, mb.completion_ids.device))
        ctx.enter_context(step.policy.accumulating(more))
        return ctx

    def forward(self, steps, mbs) -> list:
        return [step.policy.forward(mb) for step, mb in zip(steps, mbs)]

    def grads_to(self, slot: int) -> None:  # the model's own parameters hold them
        pass

    def zero_grad(self) -> None:
        pass

    def after_update(self, member, updated: bool) -> None:
        if updated:
            member.policy.sync()  # fsdp: the sampling copy gets the new weights
        self.engine.sync_weights(member.policy.full_model)  # vLLM: push the new weights; hf: nothing to do


class StackGroup:
    """Up to ``slots`` members of one Llama-family model, their parameters stacked over the slots."""

    def __init__(self, cfg, device, slots: int):
        self.cfg, self.device, self.slots = cfg, torch.device(device), slots
        self.free = list(range(slots))
        self.stack = self.engine = None

    def place(self, member, model, tokenizer) -> None:
        from training.seed_stack import SeedStack
        from training.stack_decode import StackRolloutEngine

        if self.stack is None:
            from training.prefill import llama_family

            context = self.cfg.max_new_tokens + 1
            if not llama_family(model.config, context) or type(model.get_output_embeddings()) is not torch.nn.Linear:
                raise ValueError(f"packed seeds: a {getattr(model.config, 'model_type', '?')} model is trained one "
                                 "seed per process (packing takes a Llama-family model: llama, mistral, qwen2)")
            self.stack = SeedStack(model, self.slots)
            self.engine = StackRolloutEngine(self.stack, tokenizer)
        member.slot = self.free.pop(0)
        self.stack.load(member.slot, model)
        member.policy = Parallel(self.stack.models[member.slot], member.cfg, SINGLE)

    def release(self, member) -> None:
        self.free.append(member.slot)
        self.free.sort()

    def generate(self, requests: list) -> list[RolloutBatch]:
        """Every member's rows in one sampling call (each row at its member's temperature), then each member's
        rows cut back to its own widths: the batch its solo run samples."""
        rows, seeds, slots, temps, spans = [], [], [], [], []
        for member, r, s in requests:
            spans.append((len(rows), len(rows) + len(r)))
            rows += r
            seeds += s
            slots += [member.slot] * len(r)
            temps += [member.cfg.temperature] * len(r)
        temperature = temps[0] if len(set(temps)) == 1 else torch.tensor(temps, device=self.device)[:, None]
        with compute_precision(self.cfg, self.device):
            batch = self.engine.generate(rows, temperature=temperature, generator=None, row_seeds=seeds,
                                         slots=slots, **sampling_options(self.cfg))
        return [own_rows(batch, torch.arange(a, b, device=self.device)) for a, b in spans]

    def micro(self, steps, mbs, more: bool):
        return compute_precision(self.cfg, self.device)

    def forward(self, steps, mbs) -> list:
        from training.stack_forward import stack_logprobs

        parts = [(s.slot, mb, s.cfg.temperature, kept_tokens(mb) if s.cfg.keep_sampling_mask else None)
                 for s, mb in zip(steps, mbs)]
        return stack_logprobs(self.stack, parts, checkpoint=self.cfg.gradient_checkpointing)

    def grads_to(self, slot: int) -> None:
        self.stack.grads_to(slot)

    def zero_grad(self) -> None:
        self.stack.zero_grad()

    def after_update(self, member, updated: bool) -> None:  # the stacked tensors are what samples
        pass


def own_rows(batch: RolloutBatch, rows: torch.Tensor) -> RolloutBatch:
    """``rows`` of a batch, their prompts and completions cut to their own widths (the longest prompt, the
    longest completion): the shapes a batch of those rows alone has."""
    part = batch.index(rows)
    P = part.prompt_ids.shape[1]
    p = int(part.prompt_mask.sum(-1).max())
    t = int(part.lengths.max())
    return RolloutBatch(part.prompt_ids[:, P - p:], part.prompt_mask[:, P - p:], part.completion_ids[:, :t],
                        part.completion_mask[:, :t], part.sampling_logp[:, :t], part.truncated,
                        None if part.kept_mask is None else part.kept_mask[:, :t], None)


def make_group(cfg, device, world: World, slots: int):
    """A group of one (``SoloGroup``) or a packed group of ``slots`` (one process only)."""
    if slots <= 1:
        return SoloGroup(cfg, device, world)
    if world.size > 1:
        raise ValueError("a packed group trains in one process: nproc_per_node and nnodes 1")
    return StackGroup(cfg, device, slots)
