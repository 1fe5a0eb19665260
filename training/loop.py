"""The training loop (docs/architecture.md#the-training-core), one function to read top to bottom: ``train_group``.

Per step: sample prompts → G completions each (keeping sampling log-probs) → verifiers + overlong shaping →
group advantages, with DAPO dynamic sampling re-drawing until the batch has enough informative groups →
one or more minibatch optimizer steps → metrics, samples, checkpoints → ``should_stop()``.
Every algorithm is a config switch on this loop; the math lives in ``training.algorithms``.

The loop trains a *group* of runs (docs/architecture.md#packed-seeds): a solo run is a group of one (``train``);
a packed group is several seeds of one model in one process (``training.seed_group``), each a run of its own
(its data, generators, optimizer, metrics, samples, checkpoints, stop), their model calls batched together.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch

from training.allocator import mmap_threshold_from_env
from training.checkpoint import latest_checkpoint, load_trainer_state, save_checkpoint
from training.data import data_generator_seed, default_rewards, prompt_source
from training.distributed import SINGLE, World, rank_report
from training.evaluate import evaluate_examples
from training.rollout import sequence_logprobs
from training.seed_group import compute_precision, make_group
from training.sink import Sink, TrainResult
from training.step_rollouts import Rollouts, collect_group_rollouts
from training.step_update import minibatch_step, update_group
from training.tiny import ensure_tiny_model
from training.verifiers import build_reward

if TYPE_CHECKING:  # the loop takes a config; it never builds one (the config's check reads the engines)
    from training.config import TrainConfig

__all__ = ["Rollouts", "Seed", "compute_precision", "load_model", "minibatch_step", "train", "train_group"]


@dataclass
class Seed:
    """One run of a group: what ``train`` takes."""

    cfg: TrainConfig
    out_dir: str
    sink: Sink
    should_stop: Callable[[], bool] = lambda: False


def train(cfg: TrainConfig, out_dir: str, sink: Sink, should_stop: Callable[[], bool] = lambda: False,
          world: World = SINGLE) -> TrainResult:
    """Run (or resume) one training run; events go to ``sink``; returns when done or asked to stop. Under
    torchrun every rank calls it with its ``world`` (training.distributed): same steps, its share of each."""
    return train_group([Seed(cfg, out_dir, sink, should_stop)], world)[0]


def train_group(seeds: list[Seed], world: World = SINGLE, slots: int = 0,
                joining: Callable[[int], list[Seed]] | None = None,
                on_end: Callable[[Seed, TrainResult], None] | None = None) -> list[TrainResult]:
    """Run (or resume) ``seeds`` together, each a run of its own; returns each one's result (in the order they
    joined). ``slots``: how many may train at once (at least the seeds given); ``joining(free)``: called between
    steps with the number of free slots, the seeds that take them (each starts at its own step 0, or resumes);
    ``on_end(seed, result)``: called as each one leaves the group (its sink flushed), while the others go on."""
    cfg = seeds[0].cfg
    device = world.device if world.size > 1 else torch.device(
        "cuda" if cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available()) else "cpu")
    mmap_threshold_from_env()  # opt-in: freed tensors leave the resident memory at once (training.allocator)
    torch.manual_seed(cfg.seed)
    group = make_group(cfg, device, world, max(slots, len(seeds)))
    if not cfg.model_path:  # the built-in tiny model: on a fresh install the first run builds it (others wait)
        ensure_tiny_model(cfg.resolved_model_path(), log=seeds[0].sink.on_log)
    # the reference policy is the runs' starting model (its checkpoint parent for iterative RLVR)
    ref_model = load_model(cfg.resolved_model_path(), device)[0].eval().requires_grad_(False) if cfg.kl_coef > 0 else None
    members = [join(group, seed, device, world) for seed in seeds]
    results = {}
    while members:
        for m in [m for m in members if m.step >= m.cfg.total_steps or m.seed.should_stop()]:
            # (a stop is agreed across ranks: every rank stops after the same step)
            if m.step < m.cfg.total_steps and m.step > m.start and (
                    m.cfg.checkpoint_every == 0 or m.step % m.cfg.checkpoint_every):
                checkpoint(m, world)  # the last completed step, so a killed run can be resumed
            report_ranks(world, m.seed.sink, m.step)  # where the ranks ended (the sink keeps the last report)
            m.seed.sink.flush()
            results[id(m.seed)] = TrainResult("succeeded" if m.step >= m.cfg.total_steps else "stopped", m.step,
                                              m.seed.out_dir)
            members.remove(m)
            group.release(m)
            if on_end is not None:
                on_end(m.seed, results[id(m.seed)])
        for seed in (joining(len(group.free)) if joining and group.free else []):
            seeds.append(seed)
            members.append(join(group, seed, device, world))
        if not members:
            break
        for m in members:
            m.step += 1
        world.step = members[0].step  # (a collective that times out names it)
        t0, comm0 = time.perf_counter(), world.comm_s
        rolls = collect_group_rollouts(members, group, world)
        ref_logps = [reference_logprobs(ref_model, m.cfg, roll, device) for m, roll in zip(members, rolls)]
        updates = update_group(members, group, rolls, ref_logps, world)
        for m, roll in zip(members, rolls):
            if roll.batch is not None:  # no informative group at all: nothing to learn from this step
                m.scheduler.step()
            group.after_update(m, roll.batch is not None)
        seconds = time.perf_counter() - t0
        for m, roll, upd in zip(members, rolls, updates):
            metrics = {**roll.metrics, **upd, "lr": m.optimizer.param_groups[0]["lr"], "step_time_s": seconds,
                       "tokens_per_s": roll.metrics["length/mean"] * roll.n_generated / seconds}
            if world.size > 1:  # time blocked in collectives (the gradients' own only with SEEDBED_COMM_TIMING)
                metrics["dist/comm_s"] = world.comm_s - comm0
            if m.cfg.eval_every and m.step % m.cfg.eval_every == 0 and world.is_main:
                metrics.update(periodic_eval(m.cfg, m.policy.full_model, m.tokenizer, m.source, m.step))
            report_signals(m.seed.sink, m.step, roll, metrics)
            m.seed.sink.on_metrics(m.step, metrics)
            m.seed.sink.on_samples(m.step, roll.samples[:m.cfg.samples_per_step])
            report_ranks(world, m.seed.sink, m.step)
            if (m.cfg.checkpoint_every and m.step % m.cfg.checkpoint_every == 0) or m.step == m.cfg.total_steps:
                checkpoint(m, world)
    return [results[id(seed)] for seed in seeds]


class Member:
    """A run while it trains in a group: its seed (config, folder, sink, stop), its place in the group
    (``slot``), model and tokenizer, data, verifiers, optimizer, schedule, generators and step."""

    def __init__(self, seed: Seed):
        self.seed, self.cfg = seed, seed.cfg
        self.slot, self.policy = 0, None


def join(group, seed: Seed, device, world: World) -> Member:
    """A run into the group: its model loaded (its last checkpoint when it has one, else the starting model) into
    a free slot, its data source, verifiers, optimizer, schedule and generators, restored on a resume."""
    m, cfg = Member(seed), seed.cfg
    os.makedirs(seed.out_dir, exist_ok=True)
    resume = latest_checkpoint(seed.out_dir)
    if not cfg.model_path:
        ensure_tiny_model(cfg.resolved_model_path(), log=seed.sink.on_log)
    model, m.tokenizer = load_model(resume[1] if resume else cfg.resolved_model_path(), device)
    group.place(m, model, m.tokenizer)  # m.policy: what the optimizer steps, what samples and evaluates
    m.source = prompt_source(cfg)  # the run page shows its first draw (training.first_prompt.first_training_example)
    m.reward_fn = build_reward(cfg.rewards or default_rewards(cfg.task))
    m.optimizer = torch.optim.AdamW(m.policy.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay,
                                    **adamw_kernel(m.policy.strategy))
    m.scheduler = torch.optim.lr_scheduler.LambdaLR(m.optimizer, lambda s: min(1.0, (s + 1) / (cfg.warmup_steps + 1)))
    # the same on every rank: every rank draws the step's prompts and row seeds, then takes its share
    m.gens = {name: torch.Generator().manual_seed(data_generator_seed(cfg.seed) + i)
              for i, name in enumerate(("data", "sampling", "shuffle"))}
    m.start = load_trainer_state(resume[1], model=m.policy.model, optimizer=m.optimizer, scheduler=m.scheduler,
                                 generators=m.gens, world=world) if resume else 0
    m.step = m.start
    seed.sink.truncate_after(m.start)  # a resumed run's records hold exactly the steps of its checkpoint
    seed.sink.on_log(f"{'resuming at step ' + str(m.start) if resume else 'starting'}: {cfg.total_steps} steps on "
                     f"{device}" + (f", rank {world.rank} of {world.size} ({m.policy.strategy})" if world.size > 1
                                    else "") + (f", seed {cfg.seed} in slot {m.slot} of a packed group" if group.slots > 1 else ""))
    return m


def checkpoint(m: Member, world: World) -> None:
    """Member ``m``'s checkpoint at its step: every rank its optimizer shards, rank 0 the model folder."""
    path = save_checkpoint(m.seed.out_dir, m.step, model=m.policy.model, export_model=m.policy.full_model,
                           tokenizer=m.tokenizer, optimizer=m.optimizer, scheduler=m.scheduler, generators=m.gens,
                           config_dict=m.cfg.to_dict(), world=world)
    m.seed.sink.on_checkpoint(m.step, path)


def reference_logprobs(ref_model, cfg, roll: Rollouts, device):
    """log π_ref of the step's training rows (None without a KL term or without rows)."""
    if ref_model is None or roll.batch is None:
        return None
    from training.routing import RoutingReplay

    with torch.no_grad(), RoutingReplay(ref_model, roll.batch.routing if cfg.keep_routing else None), \
            compute_precision(cfg, device):
        return sequence_logprobs(ref_model, roll.batch, temperature=cfg.temperature,
                                 use_kept_mask=cfg.keep_sampling_mask)[0]


def report_ranks(world: World, sink, step: int) -> None:
    """Each rank's host, pid and clock (a collective: every rank takes part), to the sink, which stores it at most
    every few seconds and always the last one."""
    if world.size > 1:
        ranks = rank_report(world, step)
        if ranks:
            sink.on_ranks(step, ranks)


def report_signals(sink, step: int, roll, metrics: dict) -> None:
    """The reward-hacking guard's view of the step's completions (all of them, not only the logged samples): its
    shares logged as metrics, the signals to the sink's guard."""
    if roll.signals is None:
        return
    for name, key in (("completion", "hacking/same_completion_share"), ("reason", "hacking/paid_reason_share")):
        metrics[key] = roll.signals[name]["share"] if roll.signals[name] else 0.0
    sink.on_completion_signals(step, roll.signals)


def adamw_kernel(strategy: str) -> dict:
    """AdamW's implementation: fused (one kernel over every parameter per step, on CPU too: a third of foreach's
    time on the tiny model) except under FSDP2, whose sharded DTensor parameters take the foreach kernels (one
    per op over all parameters instead of a Python loop over each tensor)."""
    return {"foreach": True} if strategy == "fsdp" else {"fused": True}


def load_model(path: str, device):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:  # many folders name none (a GGUF import under some transformers versions)
        tokenizer.pad_token = tokenizer.eos_token  # pads are masked everywhere: any token will do
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(device)
    model.train()
    return model, tokenizer


def periodic_eval(cfg, model, tokenizer, source, step: int) -> dict:
    model.eval()
    res = evaluate_examples(model, tokenizer, source.eval_set(cfg.eval_problems), n=cfg.eval_n, ks=cfg.eval_k,
                            temperature=cfg.temperature, top_p=cfg.top_p, max_new_tokens=cfg.max_new_tokens,
                            rewards=cfg.rewards or default_rewards(cfg.task), seed=cfg.seed * 7 + step,
                            template=cfg.prompt_template())
    model.train()
    return {f"eval/pass@{k}": v for k, v in res["pass@k"].items()}
