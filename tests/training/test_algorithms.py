"""CPU tests of training/algorithms.py: hand-computed tensors, and vectorised code against plain loops."""
from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch

from training import config
from training.algorithms import (
    ADV_ESTIMATORS,
    KL_ESTIMATORS,
    LOSS_AGGREGATIONS,
    aggregate_loss,
    entropy_from_logits,
    group_advantages,
    kl_penalty,
    masked_mean,
    off_policy_sequence_mask,
    overlong_penalty,
    pass_at_k,
    policy_loss,
)

LN = math.log


def close(actual, expected, tol=1e-6):
    """Elementwise |actual − expected| ≤ tol for tensors or floats (expected may be a list)."""
    actual = torch.as_tensor(actual, dtype=torch.float64)
    expected = torch.as_tensor(expected, dtype=torch.float64)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert torch.allclose(actual, expected, atol=tol, rtol=0), f"{actual} != {expected}"
    return True


def random_batch(seed, batch=5, length=7, empty_row=True):
    """logp, old_logp, mask [B, T] with ragged lengths (one empty row when asked) and advantages [B]."""
    gen = torch.Generator().manual_seed(seed)
    logp = -torch.rand(batch, length, generator=gen, dtype=torch.float64) * 3
    old_logp = logp + 0.4 * torch.randn(batch, length, generator=gen, dtype=torch.float64)
    lengths = torch.randint(1, length + 1, (batch,), generator=gen)
    if empty_row:
        lengths[1] = 0
    mask = torch.arange(length).unsqueeze(0) < lengths.unsqueeze(1)
    advantages = torch.randn(batch, generator=gen, dtype=torch.float64)
    advantages[0] = -abs(advantages[0]) - 0.5  # at least one negative sequence for the dual clip
    return logp, old_logp, mask, advantages


def test_registries_match_config_choices():
    # The config schema and the math must agree on names, or a valid config would fail at step 1.
    assert set(ADV_ESTIMATORS) == set(config.CHOICES["adv_estimator"])
    assert set(LOSS_AGGREGATIONS) == set(config.CHOICES["loss_agg"])
    assert set(KL_ESTIMATORS) == set(config.CHOICES["kl_estimator"])


# ------------------------------------------------------------------------------------------------ masked_mean

def test_masked_mean_values_and_empty():
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, float("nan"), float("inf")]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    assert close(masked_mean(x, mask), (1 + 2 + 4) / 3)
    assert close(masked_mean(x, mask, dim=-1), [1.5, 4.0])
    assert close(masked_mean(x, mask, dim=0), [2.5, 2.0, 0.0])  # empty column → 0, not NaN
    assert close(masked_mean(x, torch.zeros_like(mask)), 0.0)
    weights = torch.tensor([[1.0, 3.0, 0.0], [0.0, 0.0, 0.0]])
    assert close(masked_mean(x, weights), (1 + 6) / 4)


# ------------------------------------------------------------------------------------------- group_advantages

def test_grpo_advantages_hand_computed():
    # Group [1, 0, 0, 0]: mean 0.25, unbiased std sqrt((0.75² + 3·0.25²)/3) = 0.5.
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0])
    adv = group_advantages(rewards, 4, eps=0.0)
    # Second group [0, 1, 1, 0]: mean 0.5, std sqrt(4·0.25/3) = 1/sqrt(3).
    s = math.sqrt(3) * 0.5
    assert close(adv, [1.5, -0.5, -0.5, -0.5, -s, s, s, -s])
    assert close(group_advantages(rewards, 4, norm_std=False), [0.75, -0.25, -0.25, -0.25, -0.5, 0.5, 0.5, -0.5])
    # eps is added to the std, not to the variance.
    assert close(group_advantages(rewards, 4, eps=0.5)[:4], [0.75 / 1.0, -0.25, -0.25, -0.25])


def test_rloo_advantages_hand_computed():
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 2.0, 4.0])
    adv = group_advantages(rewards, 2, "rloo")
    assert close(adv, [1.0, -1.0, 0.0, 0.0, -2.0, 2.0])
    adv4 = group_advantages(rewards[:4], 4, "rloo")
    assert close(adv4, [1.0, -1 / 3, -1 / 3, -1 / 3])


def test_reinforce_pp_baseline_hand_computed():
    # Centred: [0.5, -0.5, 0, 0]; batch std (unbiased) = sqrt(0.5/3).
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0])
    adv = group_advantages(rewards, 2, "reinforce_pp_baseline", eps=0.0)
    s = math.sqrt(0.5 / 3)
    assert close(adv, [0.5 / s, -0.5 / s, 0.0, 0.0])
    assert close(group_advantages(rewards, 2, "reinforce_pp_baseline", norm_std=False), [0.5, -0.5, 0.0, 0.0])


@pytest.mark.parametrize("estimator", sorted(ADV_ESTIMATORS))
@pytest.mark.parametrize("norm_std", [True, False])
def test_all_equal_rewards_give_zero_advantages(estimator, norm_std):
    rewards = torch.tensor([0.7] * 4 + [0.0] * 4 + [1.0] * 4)
    adv = group_advantages(rewards, 4, estimator, norm_std=norm_std)
    assert adv.shape == rewards.shape
    assert torch.isfinite(adv).all()
    assert close(adv, [0.0] * 12)


def loop_advantages(rewards, group_size, estimator, norm_std, eps):
    """Reference: one group at a time in plain Python."""
    values = rewards.tolist()
    groups = [values[i:i + group_size] for i in range(0, len(values), group_size)]
    out = []
    for group in groups:
        mean = sum(group) / len(group)
        std = math.sqrt(sum((r - mean) ** 2 for r in group) / (len(group) - 1))
        for i, r in enumerate(group):
            if estimator == "grpo":
                out.append((r - mean) / (std + eps) if norm_std else r - mean)
            elif estimator == "rloo":
                out.append(r - (sum(group) - r) / (len(group) - 1))
            else:
                out.append(r - mean)
    if estimator == "reinforce_pp_baseline" and norm_std:
        mu = sum(out) / len(out)
        batch_std = math.sqrt(sum((a - mu) ** 2 for a in out) / (len(out) - 1))
        out = [a / (batch_std + eps) for a in out]
    return out


@pytest.mark.parametrize("estimator", sorted(ADV_ESTIMATORS))
@pytest.mark.parametrize("norm_std", [True, False])
def test_advantages_match_loop_reference(estimator, norm_std):
    gen = torch.Generator().manual_seed(7)
    for group_size in (2, 3, 8):
        rewards = torch.randn(5 * group_size, generator=gen, dtype=torch.float64)
        got = group_advantages(rewards, group_size, estimator, norm_std=norm_std, eps=1e-6)
        assert close(got, loop_advantages(rewards, group_size, estimator, norm_std, 1e-6), tol=1e-10)


def test_integer_rewards_become_float():
    adv = group_advantages(torch.tensor([1, 0, 0, 1]), 2)
    assert adv.dtype == torch.float32
    assert close(adv, [1 / math.sqrt(0.5) * 0.5, -0.5 / math.sqrt(0.5), -0.5 / math.sqrt(0.5), 0.5 / math.sqrt(0.5)],
                 tol=1e-5)


@pytest.mark.parametrize("group_size", [0, 1, -2, 2.0, True])
def test_bad_group_size_rejected(group_size):
    with pytest.raises(ValueError, match="group_size"):
        group_advantages(torch.zeros(4), group_size)


def test_bad_rewards_and_estimator_rejected():
    with pytest.raises(ValueError, match="not a multiple of group_size"):
        group_advantages(torch.zeros(5), 2)
    with pytest.raises(ValueError, match="rewards"):
        group_advantages(torch.zeros(2, 2), 2)
    with pytest.raises(ValueError, match="estimator.*'ppo'"):
        group_advantages(torch.zeros(4), 2, "ppo")


# --------------------------------------------------------------------------------------------- aggregate_loss

def loop_aggregate(token_loss, mask, agg, max_len=None):
    """Reference aggregation, token by token."""
    batch, length = token_loss.shape
    total, count, seq_means = 0.0, 0, []
    for i in range(batch):
        seq_total, seq_count = 0.0, 0
        for t in range(length):
            if mask[i, t]:
                seq_total += token_loss[i, t].item()
                seq_count += 1
        total, count = total + seq_total, count + seq_count
        if seq_count:
            seq_means.append(seq_total / seq_count)
    if agg == "token-mean":
        return total / count if count else 0.0
    if agg == "seq-mean-token-mean":
        return sum(seq_means) / len(seq_means) if seq_means else 0.0
    return total / (batch * (length if max_len is None else max_len))


@pytest.mark.parametrize("agg", sorted(LOSS_AGGREGATIONS))
def test_aggregate_matches_loop_reference(agg):
    for seed in range(4):
        logp, _, mask, _ = random_batch(seed)
        token_loss = torch.randn(logp.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        token_loss[~mask] = float("nan")  # padding must never reach the sum
        assert close(aggregate_loss(token_loss, mask, agg), loop_aggregate(token_loss, mask, agg), tol=1e-12)
        assert close(aggregate_loss(token_loss, mask, agg, max_len=11), loop_aggregate(token_loss, mask, agg, 11),
                     tol=1e-12)


def test_aggregate_hand_computed_modes_differ():
    token_loss = torch.tensor([[1.0, 2.0, 3.0, 6.0], [10.0, 0.0, 0.0, 0.0], [5.0, 5.0, 5.0, 5.0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)
    assert close(aggregate_loss(token_loss, mask, "token-mean"), 22 / 5)
    # Sequence 2 has no token: the mean is over sequences 0 and 1 only.
    assert close(aggregate_loss(token_loss, mask, "seq-mean-token-mean"), (3.0 + 10.0) / 2)
    assert close(aggregate_loss(token_loss, mask, "seq-mean-token-sum-norm"), 22 / (3 * 4))
    assert close(aggregate_loss(token_loss, mask, "seq-mean-token-sum-norm", max_len=8), 22 / (3 * 8))


@pytest.mark.parametrize("agg", sorted(LOSS_AGGREGATIONS))
def test_aggregate_empty_mask_is_zero_and_differentiable(agg):
    token_loss = torch.randn(2, 3, requires_grad=True)
    loss = aggregate_loss(token_loss, torch.zeros(2, 3, dtype=torch.bool), agg)
    assert loss.item() == 0.0
    loss.backward()
    assert torch.equal(token_loss.grad, torch.zeros(2, 3))


def test_aggregate_rejects_bad_input():
    with pytest.raises(ValueError, match="agg.*'sum'"):
        aggregate_loss(torch.zeros(2, 3), torch.ones(2, 3), "sum")
    with pytest.raises(ValueError, match="mask"):
        aggregate_loss(torch.zeros(2, 3), torch.ones(2, 4), "token-mean")
    with pytest.raises(ValueError, match="max_len"):
        aggregate_loss(torch.zeros(2, 3), torch.ones(2, 3), "seq-mean-token-sum-norm", max_len=0)


# ------------------------------------------------------------------------------------------------ policy_loss

def hand_batch():
    """Two sequences: A = +1 with ratios [1.5, 0.5, 1.0]; A = −1 with ratios [0.5, 1.5] and a padded slot.

    Token losses with ε = 0.2: [−1.2 (high clip), −0.5, −1.0] and [0.8 (low clip), 1.5].
    """
    old_logp = torch.tensor([[-1.0, -2.0, -0.5], [-1.5, -0.7, -50.0]], dtype=torch.float64)
    log_ratio = torch.tensor([[LN(1.5), LN(0.5), 0.0], [LN(0.5), LN(1.5), 100.0]], dtype=torch.float64)
    logp = (old_logp + log_ratio).requires_grad_(True)
    mask = torch.tensor([[True, True, True], [True, True, False]])
    return logp, old_logp, torch.tensor([1.0, -1.0], dtype=torch.float64), mask


def test_policy_loss_hand_computed_each_aggregation():
    expected = {"token-mean": (-2.7 + 2.3) / 5, "seq-mean-token-mean": (-2.7 / 3 + 2.3 / 2) / 2,
                "seq-mean-token-sum-norm": (-2.7 + 2.3) / (2 * 3)}
    for agg, value in expected.items():
        logp, old_logp, adv, mask = hand_batch()
        loss, _ = policy_loss(logp, old_logp, adv, mask, agg=agg)
        assert close(loss, value, tol=1e-12), agg
    logp, old_logp, adv, mask = hand_batch()
    loss, _ = policy_loss(logp, old_logp, adv, mask, agg="seq-mean-token-sum-norm", max_len=4)
    assert close(loss, -0.4 / 8, tol=1e-12)


def test_policy_loss_hand_computed_stats_and_gradient():
    logp, old_logp, adv, mask = hand_batch()
    loss, stats = policy_loss(logp, old_logp, adv, mask)
    assert close(stats["clip/low_frac"], 1 / 5)
    assert close(stats["clip/high_frac"], 1 / 5)
    assert close(stats["clip/frac"], 2 / 5)
    assert stats["clip/dual_frac"] == 0.0
    assert close(stats["ratio/mean"], (1.5 + 0.5 + 1.0 + 0.5 + 1.5) / 5)  # padding ratio e^100 ignored
    assert close(stats["ratio/max"], 1.5)
    assert close(stats["ratio/min"], 0.5)
    # 0-d tensors, not floats: nothing is read back from the device unless the caller asks
    assert all(isinstance(v, torch.Tensor) and v.dim() == 0 and not v.requires_grad for v in stats.values())
    loss.backward()
    # d ℓ / d logp = −A·r on unclipped tokens, 0 on clipped ones and on padding; token-mean divides by 5.
    assert close(logp.grad, [[0.0, -0.5 / 5, -1.0 / 5], [0.0, 1.5 / 5, 0.0]], tol=1e-12)


def test_policy_loss_per_token_advantages_equal_per_sequence():
    logp, old_logp, adv, mask = hand_batch()
    loss_seq, stats_seq = policy_loss(logp, old_logp, adv, mask, dual_clip=1.3)
    loss_tok, stats_tok = policy_loss(logp, old_logp, adv.unsqueeze(1).expand(2, 3).clone(), mask, dual_clip=1.3)
    assert close(loss_seq, loss_tok.item(), tol=1e-12)
    assert {k: float(v) for k, v in stats_seq.items()} == {k: float(v) for k, v in stats_tok.items()}


def test_dual_clip_caps_negative_advantage_tokens_only():
    # Token 0: A = −2, r = 3 → ℓ = 6, capped at c·|A| = 2.6. Token 1: A = −1, r = 1.2 → 1.2 < 1.3, no cap.
    # Token 2: A = +1, r = 3 → clipped to −1.2, dual clip does not apply to positive advantages.
    old_logp = torch.zeros(1, 3, dtype=torch.float64)
    logp = torch.tensor([[LN(3.0), LN(1.2), LN(3.0)]], dtype=torch.float64, requires_grad=True)
    adv = torch.tensor([[-2.0, -1.0, 1.0]], dtype=torch.float64)
    mask = torch.ones(1, 3, dtype=torch.bool)
    loss, stats = policy_loss(logp, old_logp, adv, mask, dual_clip=1.3, agg="seq-mean-token-sum-norm")
    assert close(loss, (2.6 + 1.2 - 1.2) / 3, tol=1e-12)
    assert close(stats["clip/dual_frac"], 1 / 3)
    assert close(stats["clip/high_frac"], 1 / 3)
    assert stats["clip/low_frac"] == 0.0
    loss.backward()
    assert close(logp.grad, [[0.0, 1.2 / 3, 0.0]], tol=1e-12)  # the capped token gives no gradient
    no_dual, _ = policy_loss(logp, old_logp, adv, mask, agg="seq-mean-token-sum-norm")
    assert close(no_dual, (6.0 + 1.2 - 1.2) / 3, tol=1e-12)


def test_clip_higher_is_asymmetric():
    old_logp = torch.zeros(1, 4)
    logp = torch.tensor([[LN(1.25), LN(1.3), LN(0.85), LN(0.75)]])
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0]])
    _, stats = policy_loss(logp, old_logp, adv, torch.ones(1, 4), eps_low=0.2, eps_high=0.28)
    assert close(stats["clip/high_frac"], 1 / 4)  # only r = 1.3 exceeds 1.28
    assert close(stats["clip/low_frac"], 1 / 4)  # only r = 0.75 is below 0.8


def test_one_token_sequences():
    old_logp = torch.zeros(3, 1, dtype=torch.float64)
    logp = torch.tensor([[LN(1.1)], [LN(2.0)], [LN(0.5)]], dtype=torch.float64)
    adv = torch.tensor([2.0, 1.0, -1.0], dtype=torch.float64)
    # ℓ = [−2.2, −1.2 (clipped), 0.8 (clipped)] → every aggregation gives their mean.
    for agg in LOSS_AGGREGATIONS:
        loss, stats = policy_loss(logp, old_logp, adv, torch.ones(3, 1), agg=agg)
        assert close(loss, (-2.2 - 1.2 + 0.8) / 3, tol=1e-12), agg
        assert close(stats["clip/frac"], 2 / 3)


def test_padding_with_nan_does_not_leak():
    logp, old_logp, adv, mask = hand_batch()
    with torch.no_grad():
        logp[1, 2] = float("nan")
    old_logp[1, 2] = float("inf")
    loss, stats = policy_loss(logp, old_logp, adv, mask)
    loss.backward()
    assert close(loss, (-2.7 + 2.3) / 5, tol=1e-12)
    assert torch.isfinite(logp.grad).all()
    assert all(math.isfinite(float(v)) for v in stats.values())


def loop_policy_loss(logp, old_logp, adv, mask, eps_low, eps_high, dual_clip, agg, max_len):
    """Reference: the PPO/dual-clip formula token by token, then the loop aggregation; plus clip counts."""
    token_loss = torch.zeros(logp.shape, dtype=torch.float64)
    low = high = dual = count = 0
    ratios = []
    for i in range(logp.shape[0]):
        for t in range(logp.shape[1]):
            if not mask[i, t]:
                continue
            a = adv[i].item()
            r = math.exp(logp[i, t].item() - old_logp[i, t].item())
            loss = -min(r * a, min(max(r, 1 - eps_low), 1 + eps_high) * a)
            if dual_clip is not None and a < 0 and loss > -dual_clip * a:
                loss, dual = -dual_clip * a, dual + 1
            token_loss[i, t] = loss
            low += a < 0 and r < 1 - eps_low
            high += a > 0 and r > 1 + eps_high
            count += 1
            ratios.append(r)
    stats = {"clip/low_frac": low / count, "clip/high_frac": high / count, "clip/frac": (low + high) / count,
             "clip/dual_frac": dual / count, "ratio/mean": sum(ratios) / count, "ratio/max": max(ratios)}
    return loop_aggregate(token_loss, mask, agg, max_len), stats


@pytest.mark.parametrize("agg", sorted(LOSS_AGGREGATIONS))
@pytest.mark.parametrize("dual_clip", [None, 1.5])
def test_policy_loss_matches_loop_reference(agg, dual_clip):
    for seed in range(3):
        logp, old_logp, mask, adv = random_batch(seed)
        logp = logp + 1.5 * (adv[:, None] < 0)  # push negative-advantage ratios past the dual-clip cap
        loss, stats = policy_loss(logp, old_logp, adv, mask, eps_low=0.2, eps_high=0.28, dual_clip=dual_clip,
                                  agg=agg, max_len=9)
        ref_loss, ref_stats = loop_policy_loss(logp, old_logp, adv, mask, 0.2, 0.28, dual_clip, agg, 9)
        assert close(loss, ref_loss, tol=1e-10)
        for key, value in ref_stats.items():
            assert close(stats[key], value, tol=1e-10), key
        if dual_clip is not None:
            assert stats["clip/dual_frac"] > 0  # the case under test actually happens


def test_policy_loss_empty_mask():
    logp = torch.zeros(2, 3, requires_grad=True)
    loss, stats = policy_loss(logp, torch.zeros(2, 3), torch.ones(2), torch.zeros(2, 3, dtype=torch.bool))
    loss.backward()
    assert loss.item() == 0.0 and stats["clip/frac"] == 0.0 and stats["ratio/mean"] == 1.0
    assert torch.equal(logp.grad, torch.zeros(2, 3))


def test_policy_loss_rejects_bad_input():
    z, m = torch.zeros(2, 3), torch.ones(2, 3)
    with pytest.raises(ValueError, match="dual_clip"):
        policy_loss(z, z, torch.ones(2), m, dual_clip=1.0)
    with pytest.raises(ValueError, match="advantages"):
        policy_loss(z, z, torch.ones(3), m)
    with pytest.raises(ValueError, match="old_logp"):
        policy_loss(z, torch.zeros(2, 4), torch.ones(2), m)
    with pytest.raises(ValueError, match="agg"):
        policy_loss(z, z, torch.ones(2), m, agg="mean")


# ------------------------------------------------------------------------------------------------- kl_penalty

def test_kl_estimators_hand_computed():
    logp = torch.tensor([[0.0, LN(0.25)]], dtype=torch.float64)
    ref_logp = torch.tensor([[LN(0.5), LN(0.25)]], dtype=torch.float64)
    x = LN(2.0)  # logp − ref_logp of the first token; the second has equal probabilities
    assert close(kl_penalty(logp, ref_logp, "k1"), [[x, 0.0]])
    assert close(kl_penalty(logp, ref_logp, "k2"), [[0.5 * x * x, 0.0]])
    assert close(kl_penalty(logp, ref_logp, "k3"), [[0.5 + x - 1.0, 0.0]])
    assert close(kl_penalty(logp, ref_logp), kl_penalty(logp, ref_logp, "k3"))


def test_k1_and_k3_are_unbiased_monte_carlo():
    # Sample from π_θ; the mean of k1 and k3 approaches KL(π_θ‖π_ref); k3 is never negative.
    gen = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(6, generator=gen, dtype=torch.float64), 0)
    q = torch.softmax(torch.randn(6, generator=gen, dtype=torch.float64), 0)
    true_kl = (p * (p.log() - q.log())).sum().item()
    tokens = torch.multinomial(p, 200_000, replacement=True, generator=gen)
    logp, ref_logp = p.log()[tokens].unsqueeze(0), q.log()[tokens].unsqueeze(0)
    k3 = kl_penalty(logp, ref_logp, "k3")
    assert (k3 >= 0).all()
    assert abs(kl_penalty(logp, ref_logp, "k1").mean().item() - true_kl) < 0.02
    assert abs(k3.mean().item() - true_kl) < 0.02


def test_unbiased_kl_value_and_gradient():
    gen = torch.Generator().manual_seed(3)
    logp = torch.randn(2, 4, generator=gen, dtype=torch.float64).requires_grad_(True)
    ref_logp = torch.randn(2, 4, generator=gen, dtype=torch.float64)
    old_logp = logp.detach() + 0.3 * torch.randn(2, 4, generator=gen, dtype=torch.float64)

    weight = torch.exp(logp.detach() - old_logp)
    k3 = torch.exp(ref_logp - logp.detach()) - (ref_logp - logp.detach()) - 1
    unbiased = kl_penalty(logp, ref_logp, "k3", old_logp=old_logp)
    assert close(unbiased, weight * k3, tol=1e-12)

    (grad,) = torch.autograd.grad(unbiased.sum(), logp)
    # d/dlogp [w·k3] = w·k3 + w·(1 − exp(ref − logp)), w = exp(logp − old): the ratio's own term is included.
    analytic = weight * k3 + weight * (1 - torch.exp(ref_logp - logp.detach()))
    assert close(grad, analytic, tol=1e-12)
    detached = weight * (1 - torch.exp(ref_logp - logp.detach()))  # what a detached weight would give
    assert (grad - detached).abs().max() > 1e-3
    assert close(grad - detached, weight * k3, tol=1e-12)
    # And against finite differences of exp(logp − old)·k3.
    assert torch.autograd.gradcheck(lambda lp: kl_penalty(lp, ref_logp, "k3", old_logp=old_logp), (logp,))


def test_unbiased_kl_on_policy_keeps_value_changes_gradient():
    logp = torch.tensor([[-1.0, -2.0]], dtype=torch.float64, requires_grad=True)
    ref_logp = torch.tensor([[-1.5, -1.0]], dtype=torch.float64)
    plain = kl_penalty(logp, ref_logp, "k3")
    weighted = kl_penalty(logp, ref_logp, "k3", old_logp=logp.detach())
    assert close(weighted, plain.detach(), tol=1e-12)  # ratio is 1 on-policy
    (g_plain,) = torch.autograd.grad(plain.sum(), logp)
    (g_weighted,) = torch.autograd.grad(weighted.sum(), logp)
    assert close(g_weighted - g_plain, plain.detach(), tol=1e-12)


def test_kl_penalty_rejects_bad_input():
    z = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="estimator.*'k4'"):
        kl_penalty(z, z, "k4")
    with pytest.raises(ValueError, match="ref_logp"):
        kl_penalty(z, torch.zeros(1, 3))
    with pytest.raises(ValueError, match="old_logp"):
        kl_penalty(z, z, old_logp=torch.zeros(2, 2))


def test_kl_term_aggregates_like_the_policy_loss():
    logp, _, mask, _ = random_batch(5)
    ref_logp = logp - 0.1
    per_token = kl_penalty(logp, ref_logp, "k1")
    assert close(aggregate_loss(per_token, mask, "token-mean"), 0.1, tol=1e-12)


# ---------------------------------------------------------------------------------- off_policy_sequence_mask

def test_off_policy_sequence_mask_hand_computed():
    logp = torch.zeros(5, 3)
    # Per-sequence drift (mean of sampling_logp − logp over masked tokens): 1.0, 1.0, 1.0, 0.25, 0.5.
    sampling_logp = torch.tensor([[1.0, 1.0, 99.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0],
                                  [0.5, 0.0, 99.0], [0.5, 0.5, 0.5]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 1, 1], [1, 1, 0], [1, 1, 1]], dtype=torch.bool)
    adv = torch.tensor([-1.0, 1.0, 0.0, -1.0, -1.0])
    keep = off_policy_sequence_mask(sampling_logp, logp, adv, mask, delta=0.5)
    assert keep.dtype == torch.bool
    # 0: negative and drifted → drop; 1: positive → keep; 2: zero advantage → keep;
    # 3: negative but drift 0.25 (the padding's 99 is ignored) → keep; 4: drift exactly δ, not above → keep.
    assert keep.tolist() == [False, True, True, True, True]
    per_token = adv.unsqueeze(1).expand(5, 3).clone()
    per_token[~mask] = 7.0  # padding values must not decide the sign
    assert off_policy_sequence_mask(sampling_logp, logp, per_token, mask, 0.5).tolist() == keep.tolist()
    assert off_policy_sequence_mask(sampling_logp, logp, adv, mask, 0.1).tolist() == [False, True, True, False,
                                                                                        False]


def test_off_policy_sequence_mask_empty_sequence_kept():
    keep = off_policy_sequence_mask(torch.ones(2, 2), torch.zeros(2, 2), torch.tensor([-1.0, -1.0]),
                                    torch.tensor([[False, False], [True, True]]), delta=0.5)
    assert keep.tolist() == [True, False]


# ------------------------------------------------------------------------------------------ overlong_penalty

def test_overlong_penalty_boundaries():
    lengths = torch.tensor([0, 6, 7, 8, 9, 10, 11, 50])
    assert close(overlong_penalty(lengths, 10, 4), [0, 0, -0.25, -0.5, -0.75, -1.0, -1.0, -1.0])
    assert close(overlong_penalty(lengths, 10, 4, factor=0.5), [0, 0, -0.125, -0.25, -0.375, -0.5, -0.5, -0.5])
    assert close(overlong_penalty(lengths, 10, 0), [0, 0, 0, 0, 0, 0, -1.0, -1.0])
    assert close(overlong_penalty(lengths, 10, 10), [0, -0.6, -0.7, -0.8, -0.9, -1.0, -1.0, -1.0])
    assert overlong_penalty(lengths, 10, 4).dtype == torch.float32
    assert overlong_penalty(lengths.double(), 10, 0).dtype == torch.float64


def test_overlong_penalty_rejects_bad_input():
    with pytest.raises(ValueError, match="buffer_len"):
        overlong_penalty(torch.tensor([1]), 10, 11)
    with pytest.raises(ValueError, match="buffer_len"):
        overlong_penalty(torch.tensor([1]), 10, -1)
    with pytest.raises(ValueError, match="max_len"):
        overlong_penalty(torch.tensor([1]), 0, 0)
    with pytest.raises(ValueError, match="factor"):
        overlong_penalty(torch.tensor([1]), 10, 2, factor=-1.0)


# ------------------------------------------------------------------------------------------------- pass_at_k

def test_pass_at_k_matches_exact_binomials_small_n():
    for n in range(1, 13):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
                assert abs(pass_at_k(n, c, k) - float(exact)) < 1e-12, (n, c, k)


def test_pass_at_k_large_n():
    n = 10_000
    for c, k in [(1, 1), (37, 100), (5000, 1), (3, 2500), (100, 64), (9990, 10), (1, 9999)]:
        product = 1 - math.prod(1 - k / i for i in range(n - c + 1, n + 1))
        exact = float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))
        got = pass_at_k(n, c, k)
        assert abs(got - exact) <= 1e-12 * max(exact, 1e-300), (c, k)
        assert abs(got - product) < 1e-12, (c, k)
    assert close(pass_at_k(n, 1, 1), 1e-4, tol=1e-18)  # tiny values keep their relative precision


def test_pass_at_k_edges():
    assert pass_at_k(10, 0, 3) == 0.0
    assert pass_at_k(10, 8, 3) == 1.0  # n − c = 2 < k
    assert pass_at_k(10, 10, 10) == 1.0
    assert close(pass_at_k(5, 2, 1), 0.4, tol=1e-15)  # pass@1 = c/n
    assert isinstance(pass_at_k(5, 2, 1), float)


@pytest.mark.parametrize("n,c,k,field", [(5, 1, 6, "k"), (5, 6, 1, "c"), (-1, 0, 1, "n"), (5, -1, 1, "c"),
                                         (5, 1, -1, "k"), (5, 1, 0, "k")])
def test_pass_at_k_rejects_bad_input(n, c, k, field):
    with pytest.raises(ValueError, match=field):
        pass_at_k(n, c, k)


# --------------------------------------------------------------------------------------- entropy_from_logits

def test_entropy_from_logits():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 3, 11, generator=gen, dtype=torch.float64)
    expected = torch.distributions.Categorical(logits=logits).entropy()
    assert close(entropy_from_logits(logits), expected, tol=1e-12)
    assert close(entropy_from_logits(torch.zeros(1, 8)), [math.log(8)], tol=1e-6)
    mask = torch.tensor([[True, False, True], [False, False, True]])
    got = entropy_from_logits(logits, mask)
    assert close(got, torch.where(mask, expected, 0.0), tol=1e-12)


def test_entropy_with_removed_tokens_has_no_nan():
    # Top-k removed tokens have logit −inf: they count as p = 0, in the value and in the gradient.
    logits = torch.tensor([[0.0, 0.0, float("-inf"), float("-inf")], [5.0, float("-inf"), float("-inf"), 0.0]],
                          requires_grad=True)
    entropy = entropy_from_logits(logits)
    assert close(entropy[0], math.log(2), tol=1e-6)
    entropy.sum().backward()
    assert torch.isfinite(logits.grad).all()
    assert close(logits.grad[0], [0.0, 0.0, 0.0, 0.0], tol=1e-6)  # uniform over 2 is the maximum
