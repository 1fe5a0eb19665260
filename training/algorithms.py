"""The RL math of Seedbed: advantages, the clipped policy loss, KL estimators and the stabilizers.

Small pure functions on tensors, no state, no config objects: the loop passes the knobs it needs. Each
docstring carries the formula, the tensor shapes and the source. Shape letters: B sequences (completions),
T completion tokens (right-padded), V vocabulary, G completions per prompt.

Conventions shared by every function taking a ``mask``:

* ``mask`` has the shape of the per-token tensor ([B, T]); bool or 0/1 float (a float mask acts as weights).
* Masked-out positions never reach a sum: they are selected away with ``torch.where`` rather than multiplied
  by 0, so a NaN or inf sitting in padding cannot leak into a loss or a statistic.

Sources: GRPO — DeepSeekMath (arXiv 2402.03300); DAPO (arXiv 2503.14476); Dr. GRPO (arXiv 2503.20783);
DeepSeek-V3.2 (arXiv 2512.02556, §3.1); RLOO (arXiv 2402.14740); REINFORCE++ (arXiv 2501.03262);
k1/k2/k3 — J. Schulman, "Approximating KL Divergence" (2020); pass@k — Chen et al. (arXiv 2107.03374).
"""
from __future__ import annotations

import math
import operator
from typing import Callable, Optional

import torch
from torch import Tensor

__all__ = [
    "ADV_ESTIMATORS",
    "KL_ESTIMATORS",
    "LOSS_AGGREGATIONS",
    "aggregate_loss",
    "entropy_from_logits",
    "group_advantages",
    "kl_penalty",
    "masked_mean",
    "off_policy_sequence_mask",
    "overlong_penalty",
    "pass_at_k",
    "policy_loss",
]


def _integer_arg(name: str, value: object, minimum: int) -> int:
    """``value`` as a python int ≥ ``minimum`` (python, numpy or 0-dim tensor integers; not bool or float)."""
    try:
        if isinstance(value, bool):
            raise TypeError
        number = operator.index(value)
    except TypeError:
        raise ValueError(f"{name}: must be an integer >= {minimum}; got {value!r}") from None
    if number < minimum:
        raise ValueError(f"{name}: must be an integer >= {minimum}; got {value!r}")
    return number


# --------------------------------------------------------------------------------------------------------
# Masked reductions
# --------------------------------------------------------------------------------------------------------

def _as_weights(mask: Tensor, like: Tensor) -> Tensor:
    """Mask as a float tensor of ``like``'s dtype (bool → 0/1), broadcast to ``like``'s shape."""
    return mask.to(like.dtype).expand_as(like)


def _masked_sum(x: Tensor, mask: Tensor, dim: Optional[int] = None) -> Tensor:
    """Σ x·mask over ``dim`` (all dims when None); positions with mask == 0 are selected away, not multiplied."""
    weights = _as_weights(mask, x)
    weighted = torch.where(weights != 0, x * weights, torch.zeros((), dtype=x.dtype, device=x.device))
    return weighted.sum() if dim is None else weighted.sum(dim)


def masked_mean(x: Tensor, mask: Tensor, dim: Optional[int] = None) -> Tensor:
    """Mean of ``x`` over the positions where ``mask`` is set.

    Formula: Σ x·m / Σ m over ``dim`` (every dimension when ``dim`` is None); where Σ m = 0 the result is 0,
    not NaN, so an empty batch or an empty sequence yields 0.

    Shapes: ``x`` [...], ``mask`` broadcastable to ``x`` (bool or float weights). Returns a scalar when ``dim``
    is None, else ``x`` reduced over ``dim``.
    """
    total = _masked_sum(x, mask, dim)
    count = _as_weights(mask, x)
    count = count.sum() if dim is None else count.sum(dim)
    safe_count = torch.where(count != 0, count, torch.ones_like(count))
    return torch.where(count != 0, total / safe_count, torch.zeros_like(total))


# --------------------------------------------------------------------------------------------------------
# Advantages
# --------------------------------------------------------------------------------------------------------

def _grpo_advantage(grouped: Tensor, norm_std: bool, eps: float) -> Tensor:
    """GRPO (DeepSeekMath, arXiv 2402.03300 §4.1.2): Â_i = (R_i − mean_G R) / (std_G R + ε).

    std is the unbiased sample std (as ``torch.std``). ``norm_std=False`` is Dr. GRPO (arXiv 2503.20783):
    Â_i = R_i − mean_G R, which removes the bias toward groups whose rewards barely vary.
    """
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    if not norm_std:
        return centred
    return centred / (grouped.std(dim=1, keepdim=True) + eps)


def _rloo_advantage(grouped: Tensor, norm_std: bool, eps: float) -> Tensor:
    """RLOO (Ahmadian et al., arXiv 2402.14740): Â_i = R_i − (1/(G−1)) Σ_{j≠i} R_j.

    Computed without loops as (G·R_i − Σ_j R_j)/(G−1), which is the same value. ``norm_std`` and ``eps``
    are unused: RLOO's baseline already makes the estimator unbiased and it is not normalised.
    """
    g = grouped.shape[1]
    return (g * grouped - grouped.sum(dim=1, keepdim=True)) / (g - 1)


def _reinforce_pp_baseline_advantage(grouped: Tensor, norm_std: bool, eps: float) -> Tensor:
    """REINFORCE++-baseline (arXiv 2501.03262): Â_i = (R_i − mean_G R) / (std_batch(R − mean_G R) + ε).

    The group mean is the baseline; the normalisation uses the unbiased std of the centred rewards over the
    whole batch (all groups together), not per group. ``norm_std=False`` keeps only the centring.
    """
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    if not norm_std:
        return centred
    return centred / (centred.reshape(-1).std() + eps)


#: Advantage estimators by name; one signature: (rewards as [num_groups, G], norm_std, eps) -> [num_groups, G].
ADV_ESTIMATORS: dict[str, Callable[[Tensor, bool, float], Tensor]] = {
    "grpo": _grpo_advantage,
    "rloo": _rloo_advantage,
    "reinforce_pp_baseline": _reinforce_pp_baseline_advantage,
}


def group_advantages(rewards: Tensor, group_size: int, estimator: str = "grpo", norm_std: bool = True,
                     eps: float = 1e-6) -> Tensor:
    """Outcome advantages from per-completion rewards, one group of G completions per prompt.

    Shapes: ``rewards`` [N] ordered group by group (entries g·G … g·G+G−1 belong to prompt g), N = k·G.
    Returns a tensor of shape [N] (floating; integer rewards become float32).

    Estimators (R = reward, G = ``group_size``):

    * ``"grpo"`` — Â_i = (R_i − mean_G R) / (std_G R + ε), std unbiased (as ``torch.std``);
      with ``norm_std=False`` Â_i = R_i − mean_G R (Dr. GRPO). DeepSeekMath arXiv 2402.03300; Dr. GRPO
      arXiv 2503.20783.
    * ``"rloo"`` — Â_i = R_i − mean_{j≠i} R_j (leave-one-out baseline). arXiv 2402.14740. ``norm_std`` unused.
    * ``"reinforce_pp_baseline"`` — Â_i = (R_i − mean_G R) / (std over the whole batch of the centred values
      (unbiased) + ε); ``norm_std=False`` skips the division. REINFORCE++ arXiv 2501.03262.

    A group whose rewards are all equal gets zero advantages under every estimator.

    Raises ValueError when ``rewards`` is not 1-D, ``group_size`` is not an integer ≥ 2, the length is not a
    multiple of ``group_size``, or ``estimator`` is unknown.
    """
    if estimator not in ADV_ESTIMATORS:
        raise ValueError(f"estimator: unknown advantage estimator {estimator!r}; "
                         f"choose one of {sorted(ADV_ESTIMATORS)}")
    # G = 1 has no group statistics: the std is undefined and RLOO has no "others".
    group_size = _integer_arg("group_size", group_size, 2)
    if rewards.dim() != 1:
        raise ValueError(f"rewards: must be 1-D [N]; got shape {tuple(rewards.shape)}")
    if rewards.numel() % group_size != 0:
        raise ValueError(f"rewards: length {rewards.numel()} is not a multiple of group_size {group_size}")
    if not rewards.is_floating_point():
        rewards = rewards.to(torch.float32)
    grouped = rewards.reshape(-1, group_size)
    return ADV_ESTIMATORS[estimator](grouped, norm_std, eps).reshape(rewards.shape)


# --------------------------------------------------------------------------------------------------------
# Policy loss and its aggregation
# --------------------------------------------------------------------------------------------------------

def _token_mean(token_loss: Tensor, mask: Tensor, max_len: Optional[int]) -> Tensor:
    """DAPO token-level loss (arXiv 2503.14476 §3.3): Σ_{i,t} ℓ_{i,t}·m_{i,t} / Σ_{i,t} m_{i,t}."""
    return masked_mean(token_loss, mask)


def _seq_mean_token_mean(token_loss: Tensor, mask: Tensor, max_len: Optional[int]) -> Tensor:
    """GRPO (DeepSeekMath): (1/|S|) Σ_{i∈S} (1/|o_i|) Σ_t ℓ_{i,t}·m_{i,t}, S = sequences with ≥ 1 token.

    A sequence whose mask is empty (e.g. dropped by off-policy masking or overlong filtering) is left out of
    the outer mean rather than counted as a 0, so dropping a sequence does not shrink the others' weight.
    """
    per_sequence = masked_mean(token_loss, mask, dim=-1)
    has_tokens = _as_weights(mask, token_loss).sum(dim=-1) > 0
    return masked_mean(per_sequence, has_tokens)


def _seq_mean_token_sum_norm(token_loss: Tensor, mask: Tensor, max_len: Optional[int]) -> Tensor:
    """Dr. GRPO (arXiv 2503.20783): Σ_{i,t} ℓ_{i,t}·m_{i,t} / (B · L_max), a constant normaliser.

    L_max is ``max_len`` (the generation budget) or, when None, T; a constant keeps long wrong answers from
    being penalised less per token than short ones.
    """
    norm = token_loss.shape[-1] if max_len is None else max_len
    return _masked_sum(token_loss, mask) / (token_loss.shape[0] * norm)


#: Loss aggregations by name; one signature: (token_loss [B, T], mask [B, T], max_len) -> scalar.
LOSS_AGGREGATIONS: dict[str, Callable[[Tensor, Tensor, Optional[int]], Tensor]] = {
    "token-mean": _token_mean,
    "seq-mean-token-mean": _seq_mean_token_mean,
    "seq-mean-token-sum-norm": _seq_mean_token_sum_norm,
}


def aggregate_loss(token_loss: Tensor, mask: Tensor, agg: str, max_len: Optional[int] = None) -> Tensor:
    """Reduce per-token losses ℓ [B, T] to the scalar to minimise; shared by the policy loss and the KL term.

    m = ``mask`` [B, T] (bool or float weights), |o_i| = Σ_t m_{i,t}:

    * ``"token-mean"`` (DAPO, arXiv 2503.14476): Σ_{i,t} ℓ·m / Σ_{i,t} m — every token weighs the same.
    * ``"seq-mean-token-mean"`` (GRPO, arXiv 2402.03300): mean over the sequences with |o_i| ≥ 1 of
      (Σ_t ℓ_{i,t} m_{i,t} / |o_i|); sequences without tokens are excluded from the mean, not counted as 0.
    * ``"seq-mean-token-sum-norm"`` (Dr. GRPO, arXiv 2503.20783): Σ_{i,t} ℓ·m / (B · max_len), ``max_len``
      defaulting to T.

    An all-empty mask gives 0 (still attached to the graph). Raises ValueError for an unknown ``agg``, a
    shape mismatch or a ``max_len`` < 1.
    """
    if agg not in LOSS_AGGREGATIONS:
        raise ValueError(f"agg: unknown loss aggregation {agg!r}; choose one of {sorted(LOSS_AGGREGATIONS)}")
    if token_loss.dim() != 2:
        raise ValueError(f"token_loss: must be [B, T]; got shape {tuple(token_loss.shape)}")
    if mask.shape != token_loss.shape:
        raise ValueError(f"mask: shape {tuple(mask.shape)} does not match token_loss {tuple(token_loss.shape)}")
    if max_len is not None:
        max_len = _integer_arg("max_len", max_len, 1)
    return LOSS_AGGREGATIONS[agg](token_loss, mask, max_len)


def aggregation_weight(mask: Tensor, agg: str) -> Tensor:
    """What ``aggregate_loss(ℓ, mask, agg)`` divides by, in units that add up across shards of a batch:
    tokens Σ m (``token-mean``), sequences with ≥ 1 token (``seq-mean-token-mean``), sequences B
    (``seq-mean-token-sum-norm``, whose L_max is a constant). A rank holding part of a batch scales its loss
    by its weight over the total, so the shards' losses add up to the whole batch's (training.distributed).

    >>> m = torch.tensor([[1., 1., 0.], [0., 0., 0.]])
    >>> [float(aggregation_weight(m, a)) for a in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")]
    [2.0, 1.0, 2.0]
    """
    if agg not in LOSS_AGGREGATIONS:
        raise ValueError(f"agg: unknown loss aggregation {agg!r}; choose one of {sorted(LOSS_AGGREGATIONS)}")
    weights = mask.float()
    if agg == "token-mean":
        return weights.sum()
    if agg == "seq-mean-token-mean":
        return (weights.sum(-1) > 0).float().sum()
    return torch.tensor(float(mask.shape[0]))


def _token_advantages(advantages: Tensor, shape: torch.Size) -> Tensor:
    """Advantages [B] (one per sequence) or [B, T] (per token) as [B, T]."""
    if advantages.dim() == 1 and advantages.shape[0] == shape[0]:
        return advantages.unsqueeze(-1).expand(shape)
    if advantages.shape == shape:
        return advantages
    raise ValueError(f"advantages: must be [B] or [B, T] = {tuple(shape)}; got shape {tuple(advantages.shape)}")


def policy_loss(logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor, *, eps_low: float = 0.2,
                eps_high: float = 0.2, dual_clip: Optional[float] = None, agg: str = "token-mean",
                max_len: Optional[int] = None) -> tuple[Tensor, dict[str, float]]:
    """Clipped surrogate policy loss (PPO/GRPO) with Clip-Higher and optional dual clip.

    Per token, with r = exp(logp − old_logp) and Â the advantage:

        ℓ = −min(r·Â, clip(r, 1 − ε_low, 1 + ε_high)·Â)                 (PPO; GRPO arXiv 2402.03300)
        ε_high > ε_low is DAPO's Clip-Higher (arXiv 2503.14476 §3.1, ε_low 0.2, ε_high 0.28).
        dual clip c > 1: for Â < 0, ℓ = min(ℓ, −c·Â)                      (Dual-clip PPO, Ye et al. 2020)

    then reduced with ``aggregate_loss(ℓ, mask, agg, max_len)``.

    Shapes: ``logp``, ``old_logp``, ``mask`` [B, T]; ``advantages`` [B] or [B, T]. ``old_logp`` and
    ``advantages`` are treated as constants (detached). Masked-out tokens have r = 1 and contribute nothing.

    Returns ``(loss, stats)``: the scalar loss to minimise and 0-d detached tensors over the masked tokens (no
    device sync here: the caller reads the ones it logs) —
    ``clip/low_frac`` (Â < 0 and r < 1 − ε_low: the low clip is active), ``clip/high_frac`` (Â > 0 and
    r > 1 + ε_high), ``clip/frac`` (their sum), ``clip/dual_frac`` (Â < 0 and the dual-clip cap is the
    loss), ``ratio/mean``, ``ratio/max``, ``ratio/min`` and ``ppo_kl`` (mean of old_logp − logp).
    """
    if logp.dim() != 2:
        raise ValueError(f"logp: must be [B, T]; got shape {tuple(logp.shape)}")
    for name, other in (("old_logp", old_logp), ("mask", mask)):
        if other.shape != logp.shape:
            raise ValueError(f"{name}: shape {tuple(other.shape)} does not match logp {tuple(logp.shape)}")
    if not 0 <= eps_low < 1:
        raise ValueError(f"eps_low: must be in [0, 1); got {eps_low}")
    if eps_high < 0:
        raise ValueError(f"eps_high: must be >= 0; got {eps_high}")
    if dual_clip is not None and not dual_clip > 1:
        raise ValueError(f"dual_clip: must be > 1 or None; got {dual_clip}")
    adv = _token_advantages(advantages, logp.shape).detach().to(logp.dtype)
    in_mask = _as_weights(mask, logp) != 0

    # Zero the log-ratio on padding so exp() cannot overflow on whatever the padding holds.
    log_ratio = torch.where(in_mask, logp - old_logp.detach(), torch.zeros_like(logp))
    ratio = torch.exp(log_ratio)
    unclipped = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)
    token_loss = torch.maximum(unclipped, clipped)
    dual_active = torch.zeros_like(in_mask)
    if dual_clip is not None:
        cap = -dual_clip * adv
        dual_active = (adv < 0) & (token_loss > cap)
        token_loss = torch.where(dual_active, cap, token_loss)
    loss = aggregate_loss(token_loss, mask, agg, max_len)

    with torch.no_grad():
        ratio_d = ratio.detach()
        low = (adv < 0) & (ratio_d < 1.0 - eps_low)
        high = (adv > 0) & (ratio_d > 1.0 + eps_high)

        def frac(flags: Tensor) -> Tensor:
            return masked_mean(flags.to(logp.dtype), mask)

        one = torch.ones((), dtype=ratio_d.dtype, device=ratio_d.device)
        # masked-out tokens have r = 1, so the extremes over every token are those over the kept ones or 1
        kept = torch.where(in_mask, ratio_d, torch.nan)
        stats = {
            "clip/low_frac": frac(low),
            "clip/high_frac": frac(high),
            "clip/frac": frac(low | high),
            "clip/dual_frac": frac(dual_active),
            "ratio/mean": torch.where(in_mask.any(), masked_mean(ratio_d, mask), one),
            "ratio/max": torch.where(in_mask.any(), kept.nan_to_num(-torch.inf).max(), one),
            "ratio/min": torch.where(in_mask.any(), kept.nan_to_num(torch.inf).min(), one),
            "ppo_kl": masked_mean(-log_ratio.detach(), mask),
        }
    return loss, stats


# --------------------------------------------------------------------------------------------------------
# KL to the reference policy
# --------------------------------------------------------------------------------------------------------

def _k1(log_ratio: Tensor) -> Tensor:
    """k1 = log π_θ − log π_ref (unbiased for KL(π_θ‖π_ref) under samples from π_θ, high variance)."""
    return log_ratio


def _k2(log_ratio: Tensor) -> Tensor:
    """k2 = ½ (log π_θ − log π_ref)² (biased, low variance; its gradient is that of the true KL's)."""
    return 0.5 * log_ratio.square()


def _k3(log_ratio: Tensor) -> Tensor:
    """k3 = π_ref/π_θ − log(π_ref/π_θ) − 1 = exp(−x) + x − 1 with x = log π_θ − log π_ref (unbiased, ≥ 0)."""
    return torch.exp(-log_ratio) + log_ratio - 1.0


#: KL estimators by name; one signature: (log π_θ − log π_ref) [B, T] -> per-token estimate [B, T].
KL_ESTIMATORS: dict[str, Callable[[Tensor], Tensor]] = {"k1": _k1, "k2": _k2, "k3": _k3}


def kl_penalty(logp: Tensor, ref_logp: Tensor, estimator: str = "k3", *,
               old_logp: Optional[Tensor] = None) -> Tensor:
    """Per-token estimate of KL(π_θ ‖ π_ref) (Schulman, "Approximating KL Divergence", 2020).

    With x = logp − ref_logp:

    * ``"k1"``: x
    * ``"k2"``: ½ x²
    * ``"k3"``: exp(ref_logp − logp) − (ref_logp − logp) − 1 = exp(−x) + x − 1

    With ``old_logp`` (the sampling policy π_old) this is DeepSeek-V3.2's unbiased KL (arXiv 2512.02556
    §3.1): the samples come from π_old, not π_θ, so the estimate is importance-weighted,

        k̂ · exp(logp − old_logp),

    and the weight is NOT detached — the gradient flows through the ratio as well as through k̂.
    The report derives it for k3 only, and a run's config allows it with k3 only (``unbiased_kl`` with another
    ``kl_estimator`` is a field error, ``TrainConfig.validate``); this function weights whatever estimate it is
    given and leaves that choice to the config.

    Shapes: ``logp``, ``ref_logp`` (and ``old_logp``) [B, T]; returns [B, T]. ``ref_logp`` and ``old_logp``
    are constants (detached). No clamping: pass finite log-probs on padding (e.g. 0) and reduce with
    ``aggregate_loss``.
    """
    if estimator not in KL_ESTIMATORS:
        raise ValueError(f"estimator: unknown KL estimator {estimator!r}; choose one of {sorted(KL_ESTIMATORS)}")
    if ref_logp.shape != logp.shape:
        raise ValueError(f"ref_logp: shape {tuple(ref_logp.shape)} does not match logp {tuple(logp.shape)}")
    estimate = KL_ESTIMATORS[estimator](logp - ref_logp.detach())
    if old_logp is None:
        return estimate
    if old_logp.shape != logp.shape:
        raise ValueError(f"old_logp: shape {tuple(old_logp.shape)} does not match logp {tuple(logp.shape)}")
    return torch.exp(logp - old_logp.detach()) * estimate


# --------------------------------------------------------------------------------------------------------
# Stabilizers and shaping
# --------------------------------------------------------------------------------------------------------

def off_policy_sequence_mask(sampling_logp: Tensor, logp: Tensor, advantages: Tensor, mask: Tensor,
                             delta: float) -> Tensor:
    """DeepSeek-V3.2 off-policy sequence masking (arXiv 2512.02556 §3.1): which sequences to keep.

    Sequence i is dropped (False) when both

        Â_i < 0   and   (1/|o_i|) Σ_t m_{i,t} (log π_sample − log π_θ)_{i,t} > δ,

    i.e. a negative sample that the current policy has drifted away from: learning from it mostly adds
    noise. Every other sequence is kept (True); a sequence without tokens has mean 0 and is kept for δ ≥ 0.

    Shapes: ``sampling_logp``, ``logp``, ``mask`` [B, T]; ``advantages`` [B] or [B, T] (then the per-sequence
    value is its masked mean, which for outcome rewards equals every token's value). Returns bool [B].
    Computed without gradient.
    """
    if logp.dim() != 2:
        raise ValueError(f"logp: must be [B, T]; got shape {tuple(logp.shape)}")
    for name, other in (("sampling_logp", sampling_logp), ("mask", mask)):
        if other.shape != logp.shape:
            raise ValueError(f"{name}: shape {tuple(other.shape)} does not match logp {tuple(logp.shape)}")
    with torch.no_grad():
        if advantages.dim() == 2:
            seq_adv = masked_mean(_token_advantages(advantages, logp.shape).to(logp.dtype), mask, dim=-1)
        elif advantages.shape == logp.shape[:1]:
            seq_adv = advantages
        else:
            raise ValueError(f"advantages: must be [B] or [B, T] = {tuple(logp.shape)}; "
                             f"got shape {tuple(advantages.shape)}")
        drift = masked_mean((sampling_logp - logp).detach(), mask, dim=-1)
        return ~((seq_adv < 0) & (drift > delta))


def overlong_penalty(lengths: Tensor, max_len: int, buffer_len: int, factor: float = 1.0) -> Tensor:
    """DAPO soft overlong punishment (arXiv 2503.14476 §3.4, Eq. 13), a reward added per completion.

    With L = ``max_len``, C = ``buffer_len``, |y| = length:

        R_len(y) = 0                             if |y| ≤ L − C
                 = ((L − C) − |y|) / C · factor  if L − C < |y| ≤ L
                 = −factor                       if |y| > L

    ``buffer_len`` = 0 gives 0 up to L and −factor beyond. Shapes: ``lengths`` [B] (ints or floats);
    returns float [B] (float32 unless ``lengths`` is already floating).
    """
    max_len = _integer_arg("max_len", max_len, 1)
    buffer_len = _integer_arg("buffer_len", buffer_len, 0)
    if buffer_len > max_len:
        raise ValueError(f"buffer_len: must be <= max_len ({max_len}); got {buffer_len}")
    if factor < 0:
        raise ValueError(f"factor: must be >= 0; got {factor}")
    lengths = torch.as_tensor(lengths)
    if not lengths.is_floating_point():
        lengths = lengths.to(torch.float32)
    if buffer_len == 0:
        return torch.where(lengths > max_len, -factor, 0.0).to(lengths.dtype)
    linear = ((max_len - buffer_len) - lengths) / buffer_len
    return linear.clamp(min=-1.0, max=0.0) * factor


# pass_at_k is pure Python (no torch), defined in training/passk.py so the web app can use it without
# importing torch; it is part of this module's API.
from training.passk import pass_at_k  # noqa: E402,F401


def entropy_from_logits(logits: Tensor, mask: Optional[Tensor] = None) -> Tensor:
    """Per-token entropy of the softmax policy: H = −Σ_v p_v log p_v = logsumexp(z) − Σ_v p_v z_v.

    Shapes: ``logits`` [..., V] → [...]; with ``mask`` (shape [...]) the masked-out positions are 0 (take
    ``masked_mean`` of the result for the metric). Logits of −inf (tokens removed by top-k/top-p) count as
    p = 0 without producing NaN, in the value or in the gradient.
    """
    # Half-precision logits are upcast: the sum over a large vocabulary loses too much in bf16.
    log_probs = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
    # 0·log 0 := 0; zero the log-prob of removed tokens first so neither the product nor its backward sees -inf.
    log_probs_finite = log_probs.masked_fill(~torch.isfinite(log_probs), 0.0)
    entropy = -(log_probs.exp() * log_probs_finite).sum(dim=-1)
    if mask is None:
        return entropy
    if mask.shape != entropy.shape:
        raise ValueError(f"mask: shape {tuple(mask.shape)} does not match logits[..., 0] {tuple(entropy.shape)}")
    return torch.where(_as_weights(mask, entropy) != 0, entropy, torch.zeros_like(entropy))
