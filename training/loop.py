"""The training loop (docs/architecture.md#the-training-core), one function to read top to bottom: ``train``.

Per step: sample prompts → G completions each (keeping sampling log-probs) → verifiers + overlong shaping →
group advantages, with DAPO dynamic sampling re-drawing until the batch has enough informative groups →
one or more minibatch optimizer steps → metrics, samples, checkpoints → ``should_stop()``.
Every algorithm is a config switch on this loop; the math lives in ``training.algorithms``.
"""
from __future__ import annotations

import copy
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import torch

from training.algorithms import (aggregate_loss, aggregation_weight, group_advantages, kl_penalty, masked_mean,
                                 off_policy_sequence_mask, overlong_penalty, policy_loss)
from training.allocator import mmap_threshold_from_env
from training.checkpoint import latest_checkpoint, load_trainer_state, save_checkpoint
from training.data import data_generator_seed, default_rewards, prompt_source
from training.distributed import SINGLE, Parallel, World, rank_report
from training.reward_hacking import completion_signals
from training.evaluate import decode_completions, evaluate_examples, is_correct
from training.rollout import RolloutBatch, concat_batches, sequence_logprobs
from training.rollout_engines import make_rollout_engine
from training.routing import RoutingReplay
from training.sink import Sink, TrainResult
from training.tiny import ensure_tiny_model
from training.verifiers import build_reward

if TYPE_CHECKING:  # the loop takes a config; it never builds one (the config's check reads the engines)
    from training.config import TrainConfig


def train(cfg: TrainConfig, out_dir: str, sink: Sink, should_stop: Callable[[], bool] = lambda: False,
          world: World = SINGLE) -> TrainResult:
    """Run (or resume) one training run; events go to ``sink``; returns when done or asked to stop. Under
    torchrun every rank calls it with its ``world`` (training.distributed): same steps, its share of each."""
    device = world.device if world.size > 1 else torch.device(
        "cuda" if cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available()) else "cpu")
    os.makedirs(out_dir, exist_ok=True)
    mmap_threshold_from_env()  # opt-in: freed tensors leave the resident memory at once (training.allocator)
    torch.manual_seed(cfg.seed)
    resume = latest_checkpoint(out_dir)
    if not cfg.model_path:  # the built-in tiny model: on a fresh install the first run builds it (others wait)
        ensure_tiny_model(cfg.resolved_model_path(), log=sink.on_log)
    model, tokenizer = load_model(resume[1] if resume else cfg.resolved_model_path(), device)
    # the reference policy is the run's starting model (its checkpoint parent for iterative RLVR)
    ref_model = load_model(cfg.resolved_model_path(), device)[0].eval().requires_grad_(False) if cfg.kl_coef > 0 else None
    source = prompt_source(cfg)  # the run page shows its first draw (training.first_prompt.first_training_example)
    reward_fn = build_reward(cfg.rewards or default_rewards(cfg.task))
    policy = Parallel(model, cfg, world)  # DDP / FSDP2 across ranks; the model itself in one process
    engine = make_rollout_engine(cfg.rollout_engine, policy.full_model, tokenizer)
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay,
                                  **adamw_kernel(policy.strategy))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / (cfg.warmup_steps + 1)))
    # the same on every rank: every rank draws the step's prompts and row seeds, then takes its share
    gens = {name: torch.Generator().manual_seed(data_generator_seed(cfg.seed) + i)
            for i, name in enumerate(("data", "sampling", "shuffle"))}
    start = load_trainer_state(resume[1], model=policy.model, optimizer=optimizer, scheduler=scheduler,
                               generators=gens, world=world) if resume else 0
    sink.truncate_after(start)  # a resumed run's records hold exactly the steps of its checkpoint
    sink.on_log(f"{'resuming at step ' + str(start) if resume else 'starting'}: {cfg.total_steps} steps on {device}"
                + (f", rank {world.rank} of {world.size} ({policy.strategy})" if world.size > 1 else ""))

    def checkpoint(step: int) -> None:  # every rank: the optimizer's shards; rank 0: the model folder
        path = save_checkpoint(out_dir, step, model=policy.model, export_model=policy.full_model, tokenizer=tokenizer,
                               optimizer=optimizer, scheduler=scheduler, generators=gens,
                               config_dict=cfg.to_dict(), world=world)
        sink.on_checkpoint(step, path)

    step = start
    for step in range(start + 1, cfg.total_steps + 1):
        world.step = step  # (a collective that times out names it)
        if should_stop():  # (across ranks: agreed, so every rank stops after the same step)
            step -= 1
            if step > start and (cfg.checkpoint_every == 0 or step % cfg.checkpoint_every):
                checkpoint(step)  # the last completed step, so a killed run can be resumed
            report_ranks(world, sink, step)
            sink.flush()
            return TrainResult("stopped", step, out_dir)
        t0, comm0 = time.perf_counter(), world.comm_s
        with compute_precision(cfg, device):
            roll = collect_rollouts(cfg, policy.full_model, tokenizer, engine, source, reward_fn, gens, device, world)
        ref_logp = None
        if ref_model is not None and roll.batch is not None:
            with torch.no_grad(), RoutingReplay(ref_model, roll.batch.routing if cfg.keep_routing else None), \
                    compute_precision(cfg, device):
                ref_logp = sequence_logprobs(ref_model, roll.batch, temperature=cfg.temperature,
                                             use_kept_mask=cfg.keep_sampling_mask)[0]
        upd = {}
        if roll.batch is not None:  # no informative group at all: nothing to learn from this step
            upd = update_policy(cfg, policy, optimizer, roll, ref_logp, gens["shuffle"], world)
            scheduler.step()
            policy.sync()  # fsdp: the sampling copy gets the new weights
        engine.sync_weights(policy.full_model)  # vLLM: push the new weights; hf: same module, nothing to do
        seconds = time.perf_counter() - t0
        metrics = {**roll.metrics, **upd, "lr": optimizer.param_groups[0]["lr"], "step_time_s": seconds,
                   "tokens_per_s": roll.metrics["length/mean"] * roll.n_generated / seconds}
        if world.size > 1:  # time blocked in collectives (the gradients' own only with SEEDBED_COMM_TIMING)
            metrics["dist/comm_s"] = world.comm_s - comm0
        if cfg.eval_every and step % cfg.eval_every == 0 and world.is_main:
            metrics.update(periodic_eval(cfg, policy.full_model, tokenizer, source, step))
        report_signals(sink, step, roll, metrics)
        sink.on_metrics(step, metrics)
        sink.on_samples(step, roll.samples[:cfg.samples_per_step])
        report_ranks(world, sink, step)
        if (cfg.checkpoint_every and step % cfg.checkpoint_every == 0) or step == cfg.total_steps:
            checkpoint(step)
    report_ranks(world, sink, step)  # where the ranks ended (the sink keeps the last report)
    sink.flush()
    return TrainResult("succeeded", step, out_dir)


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


def compute_precision(cfg, device):
    """The forwards' precision: bf16 runs them under bfloat16 autocast (the weights, their gradients and the
    optimizer state stay float32: mixed precision, no loss scaling needed); fp32 leaves them as they are."""
    device = torch.device(device)
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.precision == "bf16")


def load_model(path: str, device):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:  # many folders name none (a GGUF import under some transformers versions)
        tokenizer.pad_token = tokenizer.eos_token  # pads are masked everywhere: any token will do
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(device)
    model.train()
    return model, tokenizer


@dataclass
class Rollouts:
    batch: RolloutBatch | None   # this rank's sequences to train on (None when no rank has an informative group)
    advantages: torch.Tensor | None
    loss_mask: torch.Tensor | None  # [B] 1 = train on it (0: overlong-filtered, verifier failed, or padding)
    metrics: dict
    samples: list
    n_generated: int             # completions generated this step, all ranks
    index: torch.Tensor | None = None  # [B] each sequence's place in the step's global batch (-1: padding)
    n_total: int = 0             # sequences in the step's global batch, all ranks
    signals: dict | None = None  # for the reward-hacking guard: completion_signals of this rank's completions


def check_fits_context(model, prompt_tokens: int, max_new_tokens: int) -> None:
    """A prompt and its completion must fit the model's context: past it a model produces nothing useful (the run
    would 'succeed' with reward 0), so the run fails saying what to change."""
    context = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if isinstance(context, int) and prompt_tokens + max_new_tokens > context:
        raise RuntimeError(f"a prompt of {prompt_tokens} tokens plus max_new_tokens={max_new_tokens} exceeds the "
                           f"model's context of {context} tokens: use a model with a longer context (model_path), "
                           "shorter prompts or fewer new tokens")


def collect_rollouts(cfg, model, tokenizer, engine, source, reward_fn, gens, device, world: World = SINGLE) -> Rollouts:
    """Generate, score and (DAPO) filter groups until ``prompts_per_step`` informative groups or the limit.

    Every rank draws the same prompts and row seeds and works on its share of the groups (``world.shard``); the
    kept groups are, as in one process, the first ``prompts_per_step`` informative ones in (generation batch,
    group) order."""
    G = cfg.group_size
    mine = world.shard(cfg.prompts_per_step)
    got = Generated()
    for gen_batch in range(1, cfg.max_gen_batches + 1):
        drawn = source.sample(cfg.prompts_per_step, gens["data"])
        seeds = torch.randint(0, 2**62, (len(drawn) * G,), generator=gens["sampling"])
        drawn, seeds = drawn[mine.start:mine.stop], seeds[mine.start * G:mine.stop * G].tolist()
        batch, examples, texts = generate_groups(cfg, model, tokenizer, engine, drawn, seeds, gens["sampling"])
        score_groups(cfg, got, batch, examples, texts, reward_fn(texts, examples))
        # every rank takes the same branch: the sum of kept groups is the same number on all of them
        if not cfg.dynamic_sampling or world.all_reduce([len(got.kept)])[0] >= cfg.prompts_per_step:
            break
    everyone = gather_step_numbers(world, got)
    metrics = step_metrics(cfg, everyone, gen_batch)
    return select_kept_groups(cfg, got, everyone, metrics, batch, device, world)


@dataclass
class Generated:
    """What one step's generation batches left on this rank, batch by batch (``collect_rollouts``)."""

    kept: list = field(default_factory=list)  # (batch, rows, rewards, usable) of each group kept for training
    kept_per_batch: list = field(default_factory=list)  # informative groups this rank kept in each generation batch
    rewards: list = field(default_factory=list)  # per generation batch, per completion: reward, verdict, length,
    correct: list = field(default_factory=list)  # truncation
    lengths: list = field(default_factory=list)
    truncated: list = field(default_factory=list)
    verifier_metrics: list = field(default_factory=list)  # per generation batch: RewardBatch.metrics()
    seen: list = field(default_factory=list)  # (texts, prompts, rewards, scores, details) for the reward-hacking guard
    samples: list = field(default_factory=list)
    n_groups: int = 0
    n_zero_std: int = 0
    n_errors: int = 0


def generate_groups(cfg, model, tokenizer, engine, drawn, seeds, generator):
    """Each prompt of ``drawn`` ``group_size`` times, one row seed each: (batch, examples, completion texts)."""
    G = cfg.group_size
    examples = [ex for ex in drawn for _ in range(G)]
    prompt_ids = [cfg.prompt_template().encode_example(tokenizer, ex) for ex in drawn]
    check_fits_context(model, max(map(len, prompt_ids)), cfg.max_new_tokens)
    batch = engine.generate([ids for ids in prompt_ids for _ in range(G)],
                            max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, top_p=cfg.top_p,
                            top_k=cfg.top_k, generator=generator,
                            keep_sampling_mask=cfg.keep_sampling_mask, record_routing=cfg.keep_routing,
                            stop=cfg.stop, row_seeds=seeds)
    return batch, examples, decode_completions(tokenizer, batch)


def score_groups(cfg, got: Generated, batch, examples, texts, rb) -> None:
    """One generation batch's rewards (``rb`` plus overlong shaping), verdicts and usable rows into ``got``, and its
    groups kept: the informative ones under dynamic sampling, else all."""
    G = cfg.group_size
    got.n_errors += rb.errors
    lengths = batch.lengths.cpu()
    rewards = torch.tensor(rb.totals, dtype=torch.float32)
    if cfg.overlong_buffer_len > 0:
        rewards = rewards + overlong_penalty(lengths, cfg.max_new_tokens, cfg.overlong_buffer_len,
                                             cfg.overlong_penalty_factor)
    correct = torch.tensor([is_correct(rb, i) for i in range(len(texts))], dtype=torch.float32)
    usable = torch.ones(len(texts))
    usable[torch.tensor(rb.failed, dtype=torch.bool)] = 0.0
    if cfg.overlong_filtering:
        usable[batch.truncated.cpu()] = 0.0
    group_std = rewards.view(-1, G).std(dim=1)
    informative = group_std > 0
    got.n_groups += len(group_std)
    got.n_zero_std += int((~informative).sum())
    keep_groups = informative if cfg.dynamic_sampling else torch.ones_like(informative)
    for g in torch.nonzero(keep_groups).flatten().tolist():
        got.kept.append((batch, slice(g * G, (g + 1) * G), rewards[g * G:(g + 1) * G], usable[g * G:(g + 1) * G]))
    got.kept_per_batch.append(int(keep_groups.sum()))
    got.rewards.append(rewards)
    got.correct.append(correct)
    got.lengths.append(lengths)
    got.truncated.append(batch.truncated.cpu())
    got.verifier_metrics.append(rb.metrics())
    if cfg.reward_hacking_guard:
        got.seen.append((texts, [ex["prompt"] for ex in examples], rewards.tolist(), rb.scores, rb.details))
    got.samples += [{"prompt": ex["prompt"], "completion": t, "reward": float(r), "answer": ex.get("answer"),
                     "details": d} for ex, t, r, d in zip(examples[::G], texts[::G], rewards[::G].tolist(),
                                                          rb.details[::G])]


def gather_named(world: World, parts: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Every rank's 1-D float64 ``parts`` (each the same length on every rank) in one gather (one process: its
    own): name -> [ranks, length]."""
    everyone = world.gather_cat(torch.cat(list(parts.values()))).view(world.size, -1)
    return dict(zip(parts, everyone.split([len(p) for p in parts.values()], dim=1)))


def gather_step_numbers(world: World, got: Generated) -> dict:
    """Every rank's numbers of the step: per completion its reward, verdict, length and truncation (``rows``:
    [4, all ranks' completions]); the error, group and zero-std counts summed; each rank's kept groups per
    generation batch (``kept``: [ranks, batches]); the verifier metrics of every (rank, batch) (``verifier``)."""
    per_row = torch.stack([torch.cat(got.rewards), torch.cat(got.correct), torch.cat(got.lengths).float(),
                           torch.cat(got.truncated).float()]).double()  # [4, n]
    keys = sorted(got.verifier_metrics[0])
    n = per_row.shape[1]
    parts = gather_named(world, {
        "rows": per_row.flatten(),
        "counts": torch.tensor([got.n_errors, got.n_groups, got.n_zero_std], dtype=torch.float64),
        "kept": torch.tensor(got.kept_per_batch, dtype=torch.float64),
        "verifier": torch.tensor([m[k] for m in got.verifier_metrics for k in keys], dtype=torch.float64)})
    n_errors, n_groups, n_zero_std = parts["counts"].sum(0).long().tolist()
    return {"rows": parts["rows"].view(world.size, 4, n).transpose(0, 1).reshape(4, -1), "n_errors": n_errors,
            "n_groups": n_groups, "n_zero_std": n_zero_std, "kept": parts["kept"].long(),
            "verifier": parts["verifier"].reshape(-1, len(keys)), "verifier_keys": keys}


def step_metrics(cfg, everyone: dict, gen_batch: int) -> dict:
    """The step's rollout metrics from every rank's numbers (``gather_step_numbers``); too many completions the
    verifiers could not judge fail the run."""
    r_all, correct_all, lengths, trunc = everyone["rows"]
    n_generated = len(r_all)
    if everyone["n_errors"] > cfg.max_verifier_error_rate * n_generated:
        raise RuntimeError(f"verifier errors: {everyone['n_errors']} of {n_generated} completions could not be judged, "
                           f"more than max_verifier_error_rate={cfg.max_verifier_error_rate}")
    metrics = {"reward/mean": r_all.mean().item(), "reward/std": r_all.std().item(),
               "accuracy": correct_all.mean().item(),
               "frac_zero_std_groups": everyone["n_zero_std"] / everyone["n_groups"],
               "length/mean": lengths.mean().item(), "length/max": lengths.max().item(),
               "length/clipped_frac": trunc.mean().item(), "num_gen_batches": float(gen_batch)}
    metrics.update(reduce_verifier_metrics(everyone["verifier"], everyone["verifier_keys"]))
    return metrics


def select_kept_groups(cfg, got: Generated, everyone: dict, metrics: dict, last_batch, device,
                       world: World) -> Rollouts:
    """The step's training batch: the first ``prompts_per_step`` kept groups in (generation batch, rank, group)
    order, this rank's share of them with their advantages and loss mask (a rank with none pads with one group
    under a zero mask: DDP needs its backward)."""
    G = cfg.group_size
    counts = everyone["kept"]  # [ranks, batches]: kept groups
    per_batch = counts.sum(0)
    before = (per_batch.cumsum(0) - per_batch)[None, :] + counts.cumsum(0) - counts  # [ranks, batches]: groups ahead
    places = [int(before[world.rank, b]) + i for b, n in enumerate(got.kept_per_batch) for i in range(n)]
    n_kept = min(cfg.prompts_per_step, int(counts.sum()))
    mine_kept = [(k, p) for k, p in zip(got.kept, places) if p < n_kept]
    metrics["num_groups_trained"] = float(n_kept)
    signals = completion_signals(got.seen) if got.seen else None
    n_generated = everyone["rows"].shape[1]
    if n_kept == 0:
        return Rollouts(None, None, None, metrics, got.samples, n_generated, signals=signals)
    padding = not mine_kept
    parts = mine_kept or [((got.kept or [_first_group(got.rewards, last_batch, G)])[0], -1)]
    batch = concat_batches([b.index(torch.arange(sl.start, sl.stop)) for (b, sl, _, _), _ in parts])
    rewards = torch.cat([r for (_, _, r, _), _ in parts])
    advantages = group_advantages(rewards, G, cfg.adv_estimator, norm_std=cfg.norm_adv_by_std).to(device)
    loss_mask = torch.cat([u for (_, _, _, u), _ in parts]).to(device) * (0.0 if padding else 1.0)
    index = torch.tensor([p * G + j if p >= 0 else -1 for _, p in parts for j in range(G)])
    return Rollouts(batch, advantages, loss_mask, metrics, got.samples, n_generated, index, n_kept * G, signals)


def _first_group(all_rewards, batch, G):
    """The first group of the last generation batch, as a kept entry (a rank with no informative group pads
    with it)."""
    return (batch, slice(0, G), all_rewards[-1][:G], torch.zeros(G))


def reduce_verifier_metrics(values: torch.Tensor, keys: list[str]) -> dict:
    """The verifier metrics of every (rank, generation batch), rows of ``values`` [R·B, K], as the step's: counts
    (``verifier/…``) summed, means (``reward/<verifier>/mean``) averaged over the rows that judged something."""
    out = {}
    for j, key in enumerate(keys):
        col = values[:, j]
        if key.startswith("verifier/"):
            out[key] = col.sum().item()
        else:
            judged = col[~col.isnan()]
            out[key] = judged.mean().item() if len(judged) else float("nan")
    return out


def update_policy(cfg, policy, optimizer, roll: Rollouts, ref_logp, shuffle_gen, world: World = SINGLE) -> dict:
    """``ppo_epochs`` passes of minibatch steps over the step's global batch; returns the update's metrics
    (means over minibatches and ranks). Each rank trains on its own rows of each minibatch, its loss scaled to
    its share of the global loss (``World.loss_scale``); its rows go through the model ``micro`` sequences at a
    time (``training.memory.micro_batch_size``), their gradients accumulated (``minibatch_step``)."""
    batch, n = roll.batch, roll.n_total
    size = cfg.minibatch_size or n
    micro = micro_batch_for(cfg, policy.model, batch, world)
    where = torch.full((n,), -1, dtype=torch.long)  # global row -> this rank's row
    mine = roll.index >= 0
    where[roll.index[mine]] = torch.nonzero(mine).flatten()
    totals: dict[str, float] = {}
    chunks = [where[c] for _ in range(cfg.ppo_epochs) for c in torch.randperm(n, generator=shuffle_gen).split(size)]
    mine = [idx[idx >= 0] for idx in chunks]
    calls = micro_batch_counts([len(idx) for idx in mine], micro, world)
    for idx, n_parts in zip(mine, calls):
        live = len(idx) > 0
        if not live:  # none of this minibatch is ours: zero-weight forwards keep the ranks' collectives aligned
            idx = torch.zeros(1, dtype=torch.long)
        stats = minibatch_step(cfg, policy, optimizer, roll, ref_logp, idx.to(batch.completion_ids.device),
                               live, micro, world, n_parts=n_parts)
        for k, v in stats.items():
            totals[k] = totals.get(k, 0.0) + v
    return world.mean_stats({k: v / len(mine) for k, v in totals.items()})  # one collective a step


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


def minibatch_step(cfg, policy, optimizer, roll: Rollouts, ref_logp, idx: torch.Tensor, live: bool, micro: int,
                   world: World, *, n_parts: int = 0) -> dict:
    """One optimizer step on this rank's rows ``idx`` of a minibatch, in micro-batches of ``micro`` rows, then
    zero-weight ones (its first row, masked out) up to ``n_parts``, the count every rank runs
    (``micro_batch_counts``).

    The loss is the minibatch's: each micro-batch's aggregated loss L_m, normalised by its own weight w_m
    (tokens, sequences or rows: ``aggregation_weight``), enters as (w_m / W)·L_m with W = Σ_m w_m, so the
    accumulated gradient is that of one pass over the minibatch (token-mean stays a mean over all its tokens).
    Off-policy sequence masking decides W only once every micro-batch has run: there each backward takes w_m·L_m
    and the gradients are scaled by 1/W before clipping. The statistics are the minibatch's too (weighted means of
    the micro-batches')."""
    batch = roll.batch
    if len(idx) > micro:  # rows of a group together: each micro-batch prefills few distinct prompts
        idx = idx.sort().values
    parts = list(idx.split(micro))
    real = len(parts) if live else 0  # micro-batches whose rows count
    parts += [idx[:1]] * (n_parts - len(parts))
    masks = [mask_of(roll, part, i < real) for i, part in enumerate(parts)]
    deferred = cfg.opsm_delta is not None  # the weights depend on the forward: known after the last micro-batch
    total = 0.0 if deferred or not live else float(sum(aggregation_weight(m, cfg.loss_agg) for m in masks[:real]))
    scale = 1.0 if deferred else world.loss_scale(total)
    sums: dict[str, list[float]] = {}  # statistic -> [weighted sum, weight]

    def add(key: str, value: float, weight: float) -> None:
        acc = sums.setdefault(key, [0.0, 0.0])
        acc[0] += value * weight
        acc[1] += weight

    optimizer.zero_grad(set_to_none=True)
    for i, (part, mask) in enumerate(zip(parts, masks)):
        mb = batch.index(part)
        adv = roll.advantages[part]
        with RoutingReplay(policy.model, mb.routing if cfg.keep_routing else None), \
                compute_precision(cfg, mb.completion_ids.device), policy.accumulating(i < len(parts) - 1):
            logp, entropy = policy.forward(mb)
            add("entropy", masked_mean(entropy, mb.completion_mask).item(),
                float(mb.completion_mask.sum()) if i < real else 0.0)
            if deferred:  # DeepSeek-V3.2 off-policy sequence masking
                keep = off_policy_sequence_mask(mb.sampling_logp, logp.detach(), adv, mask, cfg.opsm_delta)
                add("opsm/masked_frac", 1.0 - keep.float().mean().item(), len(part) if i < real else 0)
                mask = mask * keep[:, None]
            loss, pstats = policy_loss(logp, mb.sampling_logp, adv, mask, eps_low=cfg.eps_low, eps_high=cfg.eps_high,
                                       dual_clip=cfg.dual_clip, agg=cfg.loss_agg, max_len=cfg.max_new_tokens)
            weight = float(aggregation_weight(mask, cfg.loss_agg)) if i < real else 0.0
            add("loss/policy", loss.item(), weight)
            clip_keys = [k for k in pstats if k.startswith("clip/")]
            # one device sync for the clip fractions the run logs (the other statistics are not read)
            for k, v in zip(clip_keys, torch.stack([pstats[k] for k in clip_keys]).tolist()):
                add(k, v, float(mask.sum()))
            if ref_logp is not None:
                kl = kl_penalty(logp, ref_logp[part], cfg.kl_estimator,
                                old_logp=mb.sampling_logp if cfg.unbiased_kl else None)
                kl_loss = aggregate_loss(kl, mask, cfg.loss_agg, max_len=cfg.max_new_tokens)
                add("kl", kl_loss.item(), weight)
                loss = loss + cfg.kl_coef * kl_loss
            if deferred:
                total += weight
                loss = loss * weight
            elif len(parts) > 1:
                loss = loss * (weight / total if total > 0 else 0.0)
            (loss * scale).backward()
    if deferred:  # the gradients of Σ w_m·L_m, scaled to those of the minibatch's loss
        share = world.loss_scale(total)  # (a collective: every rank calls it)
        torch._foreach_mul_([p.grad for p in policy.model.parameters() if p.grad is not None],
                            share / total if total > 0 else 0.0)
    stats = {k: (v / w if w > 0 else 0.0) for k, (v, w) in sums.items()}
    stats["grad_norm"] = policy.clip_grad_norm(cfg.max_grad_norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)  # no gradients held while sampling the next step
    return stats


def mask_of(roll: Rollouts, part: torch.Tensor, live: bool) -> torch.Tensor:
    """The loss mask of rows ``part``: generated tokens of usable completions (all 0 on a padding minibatch)."""
    return roll.batch.completion_mask[part] * roll.loss_mask[part][:, None] * (1.0 if live else 0.0)


def periodic_eval(cfg, model, tokenizer, source, step: int) -> dict:
    model.eval()
    res = evaluate_examples(model, tokenizer, source.eval_set(cfg.eval_problems), n=cfg.eval_n, ks=cfg.eval_k,
                            temperature=cfg.temperature, top_p=cfg.top_p, max_new_tokens=cfg.max_new_tokens,
                            rewards=cfg.rewards or default_rewards(cfg.task), seed=cfg.seed * 7 + step,
                            template=cfg.prompt_template())
    model.train()
    return {f"eval/pass@{k}": v for k, v in res["pass@k"].items()}
