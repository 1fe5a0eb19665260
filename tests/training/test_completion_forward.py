"""The training forward's layout (training/completion_forward.py): distinct prompts once, completions without their
last token or padding, rows in groups of like length; checked against each row computed alone."""
import itertools
import random

import pytest
import torch

from tests.training.test_memory import full_reference, random_batch, random_llama
from training import completion_forward
from training.completion_forward import length_buckets
from training.prefill import prefill_distinct, rows_of_cache
from training.rollout import sequence_logprobs


def grouping_cost(widths, groups, call_cost):
    return sum(len(g) * max(widths[r] for r in g) + call_cost for g in groups)


def brute_force_cost(widths, call_cost):
    """The least cost over every way to cut the sorted distinct widths into runs."""
    distinct = sorted({w for w in widths if w > 0})
    best = float("inf")
    for cuts in itertools.product([False, True], repeat=max(0, len(distinct) - 1)):
        groups, current = [], [distinct[0]] if distinct else []
        for w, cut in zip(distinct[1:], cuts):
            if cut:
                groups.append(current)
                current = []
            current.append(w)
        if current:
            groups.append(current)
        cost = sum(sum(1 for x in widths if x in g) * max(g) + call_cost for g in groups)
        best = min(best, cost)
    return best if distinct else 0


@pytest.mark.parametrize("seed", range(40))
def test_length_buckets_are_a_least_cost_grouping_of_every_row(seed):
    rnd = random.Random(seed)
    widths = [rnd.choice([0, 1, 1, 2, 3, 3, 3, 5, 8, 13]) for _ in range(rnd.randint(1, 24))]
    call_cost = rnd.choice([0, 1, 4, 16, 100])
    groups = length_buckets(widths, call_cost)
    placed = sorted(r for g in groups for r in g)
    assert placed == [r for r, w in enumerate(widths) if w > 0]  # every row that needs positions, once
    assert grouping_cost(widths, groups, call_cost) == brute_force_cost(widths, call_cost)


def test_length_buckets_at_the_extremes():
    widths = [3, 1, 0, 3, 7, 1]
    assert length_buckets(widths, 0) == [[1, 5], [0, 3], [4]]  # free calls: one group per width
    assert length_buckets(widths, 10 ** 6) == [[0, 1, 3, 4, 5]]  # dear calls: one group, padded to 7
    assert length_buckets([0, 0], 5) == []


def test_rows_of_cache_leaves_the_prefill_as_it_was():
    model = random_llama()
    ids = torch.randint(1, 50, (3, 4))
    _, cache, _ = prefill_distinct(model, ids, torch.ones_like(ids), hidden=False)
    keys = [layer.keys for layer in cache.layers]
    picked = rows_of_cache(cache, torch.tensor([2, 2, 0]))
    assert [layer.keys for layer in cache.layers] == keys
    assert all(torch.equal(p.keys, k[[2, 2, 0]]) for p, k in zip(picked.layers, keys))


@pytest.mark.parametrize("layout", ["packed", "a group per length", "one group"])
@pytest.mark.parametrize("tied", [True, False])
def test_the_forward_equals_each_row_alone(monkeypatch, layout, tied):
    if layout != "packed":
        monkeypatch.setattr(completion_forward, "PACK_MAX_TOKENS", 0)
        monkeypatch.setattr(completion_forward, "CALL_COST_FLOP_PER_LAYER", 1e12 if layout == "one group" else 0.0)
    model, batch = random_llama(tied=tied), random_batch(B=12, T=6, group=3)
    batch.completion_mask[5] = 0.0  # a row with no completion token at all (filtered, or empty)
    ref_logp, ref_entropy = full_reference(model, batch, 0.9)
    (ref_logp * batch.completion_mask).sum().backward()
    ref = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    logp, entropy = sequence_logprobs(model, batch, temperature=0.9, with_entropy=True)
    real = batch.completion_mask
    assert torch.allclose(logp * real, ref_logp, rtol=1e-9, atol=1e-12)
    assert torch.allclose(entropy * real, ref_entropy, rtol=1e-9, atol=1e-12)
    (logp * real).sum().backward()
    for n, p in model.named_parameters():  # atol: torch's CPU SDPA backward (test_memory.py)
        assert torch.allclose(p.grad, ref[n], rtol=1e-6, atol=1e-6), n


def count_decoder_calls(monkeypatch, model) -> list:
    calls = []
    decoder = model.get_decoder()
    real_forward = decoder.forward
    monkeypatch.setattr(decoder, "forward",
                        lambda *a, **k: calls.append(tuple(k["input_ids"].shape)) or real_forward(*a, **k))
    return calls


def test_short_completions_go_in_one_packed_forward_and_long_packs_do_not(monkeypatch):
    model, batch = random_llama(), random_batch(B=8, T=7, group=4)  # 2 prompts of 5 tokens, fed 0-6 tokens each
    calls = count_decoder_calls(monkeypatch, model)
    sequence_logprobs(model, batch, temperature=1.0)
    fed = (batch.lengths - 1).clamp(min=0)
    assert calls == [(2, 5 + max(int(fed[:4].sum()), int(fed[4:].sum())))]
    calls.clear()
    monkeypatch.setattr(completion_forward, "PACK_MAX_TOKENS", 8)  # too short for these packs: prefill + groups
    sequence_logprobs(model, batch, temperature=1.0)
    assert calls[0] == (2, 5) and len(calls) >= 2


def test_a_row_that_is_all_prompt_costs_no_call(monkeypatch):
    """Completions of one token each: their only prediction comes from the prompt, no completion forward runs."""
    model, batch = random_llama(), random_batch(B=4, T=3, group=2)
    batch.completion_mask[:] = 0.0
    batch.completion_mask[:, 0] = 1.0
    monkeypatch.setattr(completion_forward, "PACK_MAX_TOKENS", 0)
    calls = count_decoder_calls(monkeypatch, model)
    logp, _ = sequence_logprobs(model, batch, temperature=1.0)
    assert calls == [(2, 5)]  # the two distinct prompts, once
    ref_logp, _ = full_reference(model, batch, 1.0)
    assert torch.allclose(logp * batch.completion_mask, ref_logp, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("pack", [True, False])
def test_single_call_is_one_model_call_whatever_the_rows_with_the_same_outputs(monkeypatch, pack):
    """A sharded model (FSDP2) must be called the same number of times on every rank: ``single_call`` makes it one
    call, the pack when it fits, else every row whole, padded; either way the outputs (and their gradients) of
    each row computed alone, zeros where a position predicts padding."""
    from training.completion_forward import completion_states

    if not pack:
        monkeypatch.setattr(completion_forward, "PACK_MAX_TOKENS", 0)  # the pack never fits
    model, batch = random_llama(), random_batch(B=12, T=6, group=3)
    batch.completion_mask[5] = 0.0
    ref_logp, _ = full_reference(model, batch, 1.0)
    (ref_logp * batch.completion_mask).sum().backward()
    ref = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    calls = count_decoder_calls(monkeypatch, model)
    logits = completion_states(model, batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.lengths,
                               hidden=False, single_call=True)
    assert len(calls) == 1 and (pack or calls[0] == (12, 5 + 6 - 1))  # every row whole: prompt + T - 1 tokens
    past = torch.arange(6)[None, :] > (batch.lengths - 1).clamp(min=0)[:, None]
    assert torch.all(logits[past] == 0)
    logp = torch.log_softmax(logits, -1).gather(-1, batch.completion_ids[..., None]).squeeze(-1)
    real = batch.completion_mask
    assert torch.allclose(logp * real, ref_logp, rtol=1e-9, atol=1e-12)
    (logp * real).sum().backward()
    for n, p in model.named_parameters():
        assert torch.allclose(p.grad, ref[n], rtol=1e-6, atol=1e-6), n
    calls.clear()  # without it the same rows take a prefill and a call per length group
    completion_states(model, batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.lengths, hidden=False)
    assert len(calls) == 1 if pack else len(calls) >= 2  # (a prefill, then the length groups)
