"""A step's update (docs/architecture.md#the-training-core): ``ppo_epochs`` passes of minibatch steps over the
step's rollouts, each minibatch in micro-batches whose gradients accumulate, then the clipped optimizer step.

``update_group`` updates every member of a group (``training.loop.train_group``): the i-th micro-batches of the
members' j-th minibatches go through the group's forward together (``training.seed_group``: one batched call
for a packed group), their losses are summed and take one backward (a member's loss depends on its own weights
alone, so each gets its own gradient), and each member's optimizer steps on its own.
"""
from __future__ import annotations

import torch

from training.algorithms import (aggregate_loss, aggregation_weight, kl_penalty, masked_mean,
                                 off_policy_sequence_mask, policy_loss)
from training.distributed import SINGLE, World
from training.rollout import RolloutBatch


def update_group(members, group, rolls: list, ref_logps: list, world: World = SINGLE) -> list[dict]:
    """Each member's update (``{}`` for one whose step has nothing to train on): its metrics, means over its
    minibatches and ranks. Each rank trains on its own rows of each minibatch, its loss scaled to its share of
    the global loss (``World.loss_scale``); its rows go through the model ``micro`` sequences at a time
    (``training.memory.micro_batch_size``), their gradients accumulated (``MinibatchStep``)."""
    plans = {id(m): minibatch_plan(m.cfg, m.policy, roll, m.gens["shuffle"], world)
             for m, roll in zip(members, rolls) if roll.batch is not None}
    totals = {id(m): {} for m in members}
    for j in range(max((len(p) for p in plans.values()), default=0)):
        taking = []
        for m, roll, ref in zip(members, rolls, ref_logps):
            if id(m) in plans and j < len(plans[id(m)]):
                idx, live, micro, n_parts = plans[id(m)][j]
                taking.append((m, MinibatchStep(m.cfg, m.policy, m.optimizer, roll, ref, idx, live, micro, world,
                                                n_parts, slot=m.slot)))
        for (m, _), stats in zip(taking, run_minibatch_steps([s for _, s in taking], group)):
            acc = totals[id(m)]
            for k, v in stats.items():
                acc[k] = acc.get(k, 0.0) + v
    return [world.mean_stats({k: v / len(plans[id(m)]) for k, v in totals[id(m)].items()}) if id(m) in plans
            else {} for m in members]  # one collective a step


def minibatch_plan(cfg, policy, roll, shuffle_gen, world: World) -> list[tuple]:
    """This rank's minibatches of the step: (rows, live, micro-batch size, micro-batches every rank runs) each, the
    global batch shuffled by the member's own generator (``ppo_epochs`` passes of ``minibatch_size`` rows)."""
    batch, n = roll.batch, roll.n_total
    size = cfg.minibatch_size or n
    micro = micro_batch_for(cfg, policy.model, batch, world)
    where = torch.full((n,), -1, dtype=torch.long)  # global row -> this rank's row
    mine = roll.index >= 0
    where[roll.index[mine]] = torch.nonzero(mine).flatten()
    chunks = [where[c] for _ in range(cfg.ppo_epochs) for c in torch.randperm(n, generator=shuffle_gen).split(size)]
    mine = [idx[idx >= 0] for idx in chunks]
    calls = micro_batch_counts([len(idx) for idx in mine], micro, world)
    plan = []
    for idx, n_parts in zip(mine, calls):
        live = len(idx) > 0
        if not live:  # none of this minibatch is ours: zero-weight forwards keep the ranks' collectives aligned
            idx = torch.zeros(1, dtype=torch.long)
        plan.append((idx.to(batch.completion_ids.device), live, micro, n_parts))
    return plan


def micro_batch_counts(rows: list[int], micro: int, world: World) -> list[int]:
    """How many micro-batches (forward and backward) every rank runs in each minibatch: the most any rank needs,
    max over ranks of ⌈rows_r / micro_r⌉ (at least 1), agreed in one all-reduce a step. Each forward and
    backward is a set of collectives (FSDP's all-gathers and reduce-scatters, DDP's buffer broadcast) that every
    rank must make together, and a rank's rows (dynamic sampling keeps other groups on each) and its micro-batch
    size (the memory model reads its batch's widths) depend on its data; a rank with fewer runs zero-weight
    micro-batches (``minibatch_step``)."""
    own = [max(1, -(-r // micro)) for r in rows]
    if world.size == 1 or not own:
        return own
    return [int(c) for c in world.all_reduce(own, "max").tolist()]


def micro_batch_for(cfg, model, batch: RolloutBatch, world: World) -> int:
    """Sequences per forward/backward: ``micro_batch_size``, or (0) the memory model's choice for this batch's
    prompt and completion widths (training.memory)."""
    if cfg.micro_batch_size:
        return cfg.micro_batch_size
    from training.memory import auto_micro_batch, model_shape_of

    return auto_micro_batch(cfg, model_shape_of(model.config), prompt_tokens=batch.prompt_ids.shape[1],
                            completion_tokens=batch.completion_ids.shape[1], ranks=world.size)


class MinibatchStep:
    """One optimizer step on this rank's rows ``idx`` of a minibatch, in micro-batches of ``micro`` rows, then
    zero-weight ones (its first row, masked out) up to ``n_parts``, the count every rank runs
    (``micro_batch_counts``).

    The loss is the minibatch's: each micro-batch's aggregated loss L_m, normalised by its own weight w_m
    (tokens, sequences or rows: ``aggregation_weight``), enters as (w_m / W)·L_m with W = Σ_m w_m, so the
    accumulated gradient is that of one pass over the minibatch (token-mean stays a mean over all its tokens).
    Off-policy sequence masking decides W only once every micro-batch has run: there each backward takes w_m·L_m
    and the gradients are scaled by 1/W before clipping. The statistics are the minibatch's too (weighted means of
    the micro-batches')."""

    def __init__(self, cfg, policy, optimizer, roll, ref_logp, idx: torch.Tensor, live: bool, micro: int,
                 world: World, n_parts: int = 0, *, slot: int = 0):
        self.cfg, self.policy, self.optimizer, self.roll, self.ref_logp = cfg, policy, optimizer, roll, ref_logp
        self.world, self.slot = world, slot
        if len(idx) > micro:  # rows of a group together: each micro-batch prefills few distinct prompts
            idx = idx.sort().values
        parts = list(idx.split(micro))
        self.real = len(parts) if live else 0  # micro-batches whose rows count
        self.parts = parts + [idx[:1]] * (n_parts - len(parts))
        self.masks = [mask_of(roll, part, i < self.real) for i, part in enumerate(self.parts)]
        self.deferred = cfg.opsm_delta is not None  # the weights depend on the forward: known after the last one
        self.total = 0.0 if self.deferred or not live else float(
            sum(aggregation_weight(m, cfg.loss_agg) for m in self.masks[:self.real]))
        self.scale = 1.0 if self.deferred else world.loss_scale(self.total)
        self.sums: dict[str, list[float]] = {}  # statistic -> [weighted sum, weight]
        optimizer.zero_grad(set_to_none=True)

    def add(self, key: str, value: float, weight: float) -> None:
        acc = self.sums.setdefault(key, [0.0, 0.0])
        acc[0] += value * weight
        acc[1] += weight

    def micro_batch(self, i: int) -> RolloutBatch:
        return self.roll.batch.index(self.parts[i])

    def loss(self, i: int, mb: RolloutBatch, logp: torch.Tensor, entropy: torch.Tensor) -> torch.Tensor:
        """Micro-batch i's share of the minibatch loss, from the forward's log π and entropy."""
        cfg, part, mask, counts = self.cfg, self.parts[i], self.masks[i], i < self.real
        adv = self.roll.advantages[part]
        self.add("entropy", masked_mean(entropy, mb.completion_mask).item(),
                 float(mb.completion_mask.sum()) if counts else 0.0)
        if self.deferred:  # DeepSeek-V3.2 off-policy sequence masking
            keep = off_policy_sequence_mask(mb.sampling_logp, logp.detach(), adv, mask, cfg.opsm_delta)
            self.add("opsm/masked_frac", 1.0 - keep.float().mean().item(), len(part) if counts else 0)
            mask = mask * keep[:, None]
        loss, pstats = policy_loss(logp, mb.sampling_logp, adv, mask, eps_low=cfg.eps_low, eps_high=cfg.eps_high,
                                   dual_clip=cfg.dual_clip, agg=cfg.loss_agg, max_len=cfg.max_new_tokens)
        weight = float(aggregation_weight(mask, cfg.loss_agg)) if counts else 0.0
        self.add("loss/policy", loss.item(), weight)
        clip_keys = [k for k in pstats if k.startswith("clip/")]
        # one device sync for the clip fractions the run logs (the other statistics are not read)
        for k, v in zip(clip_keys, torch.stack([pstats[k] for k in clip_keys]).tolist()):
            self.add(k, v, float(mask.sum()))
        if self.ref_logp is not None:
            kl = kl_penalty(logp, self.ref_logp[part], cfg.kl_estimator,
                            old_logp=mb.sampling_logp if cfg.unbiased_kl else None)
            kl_loss = aggregate_loss(kl, mask, cfg.loss_agg, max_len=cfg.max_new_tokens)
            self.add("kl", kl_loss.item(), weight)
            loss = loss + cfg.kl_coef * kl_loss
        if self.deferred:
            self.total += weight
            loss = loss * weight
        elif len(self.parts) > 1:
            loss = loss * (weight / self.total if self.total > 0 else 0.0)
        return loss * self.scale

    def finish(self) -> dict:
        """The optimizer step on the accumulated gradients; the minibatch's statistics."""
        if self.deferred:  # the gradients of Σ w_m·L_m, scaled to those of the minibatch's loss
            share = self.world.loss_scale(self.total)  # (a collective: every rank calls it)
            torch._foreach_mul_([p.grad for p in self.policy.model.parameters() if p.grad is not None],
                                share / self.total if self.total > 0 else 0.0)
        stats = {k: (v / w if w > 0 else 0.0) for k, (v, w) in self.sums.items()}
        stats["grad_norm"] = self.policy.clip_grad_norm(self.cfg.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)  # no gradients held while sampling the next step
        return stats


def run_minibatch_steps(steps: list[MinibatchStep], group) -> list[dict]:
    """The members' minibatch steps together: micro-batch i of every step that has one through one forward of
    the ``group`` and one backward of their summed losses, then each step's optimizer step."""
    n = max(len(s.parts) for s in steps)
    for i in range(n):
        live = [s for s in steps if i < len(s.parts)]
        mbs = [s.micro_batch(i) for s in live]
        with group.micro(live, mbs, more=i < n - 1):
            outs = group.forward(live, mbs)
            loss = sum(s.loss(i, mb, logp, entropy) for s, mb, (logp, entropy) in zip(live, mbs, outs))
            loss.backward()
    stats = []
    for s in steps:
        group.grads_to(s.slot)
        stats.append(s.finish())
    group.zero_grad()
    return stats


def minibatch_step(cfg, policy, optimizer, roll, ref_logp, idx: torch.Tensor, live: bool, micro: int,
                   world: World, *, n_parts: int = 0) -> dict:
    """One member's minibatch step on its own (a group of one, ``training.seed_group.SoloGroup``'s forward)."""
    from training.seed_group import SoloGroup

    step = MinibatchStep(cfg, policy, optimizer, roll, ref_logp, idx, live, micro, world, n_parts)
    return run_minibatch_steps([step], SoloGroup(cfg, roll.batch.completion_ids.device, world))[0]


def mask_of(roll: Rollouts, part: torch.Tensor, live: bool) -> torch.Tensor:
    """The loss mask of rows ``part``: generated tokens of usable completions (all 0 on a padding minibatch)."""
    return roll.batch.completion_mask[part] * roll.loss_mask[part][:, None] * (1.0 if live else 0.0)
