"""A step's rollouts (docs/architecture.md#the-training-core): prompts drawn, completions sampled and scored, groups
kept (DAPO dynamic sampling re-draws until enough informative ones), advantages, the step's rollout metrics.

``collect_group_rollouts`` does it for every member of a group at once (``training.loop.train_group``): each
member draws from its own generators and scores with its own verifiers; the group samples every member's rows
in one call. Across ranks (one member) every rank draws the same prompts and row seeds and takes its share.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch

from training.algorithms import group_advantages, overlong_penalty
from training.distributed import SINGLE, World
from training.evaluate import decode_completions, is_correct
from training.reward_hacking import completion_signals
from training.rollout import RolloutBatch, concat_batches


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


def collect_group_rollouts(members, group, world: World = SINGLE) -> list[Rollouts]:
    """Each member's step rollouts: generate, score and (DAPO) filter groups until ``prompts_per_step``
    informative groups or the limit; every generation batch of the members still drawing is one sampling call of
    the ``group`` (``training.seed_group``: a packed group samples all its seeds' rows together).

    Every rank draws the same prompts and row seeds and works on its share of the groups (``world.shard``); the
    kept groups are, as in one process, the first ``prompts_per_step`` informative ones in (generation batch,
    group) order."""
    got = {id(m): Generated() for m in members}
    rounds, last = {}, {}
    drawing = list(members)
    gen_batch = 0
    while drawing:
        gen_batch += 1
        asks = []
        for m in drawing:
            with blamed(m):
                asks.append(draw_groups(m.cfg, m.tokenizer, m.policy.full_model, m.source, m.gens, world))
        batches = group.generate([(m, rows, seeds) for m, (rows, _, seeds) in zip(drawing, asks)])
        more = []
        for m, (_, examples, _), batch in zip(drawing, asks, batches):
            with blamed(m):
                texts = decode_completions(m.tokenizer, batch)
                score_groups(m.cfg, got[id(m)], batch, examples, texts, m.reward_fn(texts, examples))
            rounds[id(m)], last[id(m)] = gen_batch, batch
            if draws_again(m.cfg, got[id(m)], gen_batch, world):
                more.append(m)
        drawing = more
    out = []
    for m in members:
        with blamed(m):
            everyone = gather_step_numbers(world, got[id(m)])
            metrics = step_metrics(m.cfg, everyone, rounds[id(m)])
            out.append(select_kept_groups(m.cfg, got[id(m)], everyone, metrics, last[id(m)], group.device, world))
    return out


@contextlib.contextmanager
def blamed(member):
    """An error raised in one member's own part of a step (its data, its verifiers, its metrics) names the member
    (``exc.member_seed``: its ``training.loop.Seed``), so a packed group fails that run alone and its neighbours
    resume (``workers.packed``)."""
    try:
        yield
    except Exception as exc:
        if getattr(exc, "member_seed", None) is None:
            exc.member_seed = member.seed
        raise


def draws_again(cfg, got: "Generated", gen_batch: int, world: World) -> bool:
    """Whether a member samples another generation batch this step: dynamic sampling with fewer than
    ``prompts_per_step`` informative groups kept on all ranks (summed: every rank takes the same branch), within
    ``max_gen_batches``."""
    if not cfg.dynamic_sampling or world.all_reduce([len(got.kept)])[0] >= cfg.prompts_per_step:
        return False
    return gen_batch < cfg.max_gen_batches


def draw_groups(cfg, tokenizer, model, source, gens, world: World):
    """One generation batch's groups of this rank: each drawn prompt ``group_size`` times as token rows, the
    examples row by row, and each row's sampling seed (rows, examples, seeds)."""
    G = cfg.group_size
    mine = world.shard(cfg.prompts_per_step)
    drawn = source.sample(cfg.prompts_per_step, gens["data"])
    seeds = torch.randint(0, 2**62, (len(drawn) * G,), generator=gens["sampling"])
    drawn, seeds = drawn[mine.start:mine.stop], seeds[mine.start * G:mine.stop * G].tolist()
    prompt_ids = [cfg.prompt_template().encode_example(tokenizer, ex) for ex in drawn]
    check_fits_context(model, max(map(len, prompt_ids)), cfg.max_new_tokens)
    return [ids for ids in prompt_ids for _ in range(G)], [ex for ex in drawn for _ in range(G)], seeds


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
    parts = mine_kept or [((got.kept or [first_group(got.rewards, last_batch, G)])[0], -1)]
    batch = concat_batches([b.index(torch.arange(sl.start, sl.stop)) for (b, sl, _, _), _ in parts])
    rewards = torch.cat([r for (_, _, r, _), _ in parts])
    advantages = group_advantages(rewards, G, cfg.adv_estimator, norm_std=cfg.norm_adv_by_std).to(device)
    loss_mask = torch.cat([u for (_, _, _, u), _ in parts]).to(device) * (0.0 if padding else 1.0)
    index = torch.tensor([p * G + j if p >= 0 else -1 for _, p in parts for j in range(G)])
    return Rollouts(batch, advantages, loss_mask, metrics, got.samples, n_generated, index, n_kept * G, signals)


def first_group(all_rewards, batch, G):
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
