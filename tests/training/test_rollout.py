import torch

from training.data import arithmetic_example
from training.loop import load_model
from training.rollout import concat_batches
from training.rollout import HFRolloutEngine, sequence_logprobs, truncate_logits
from training.data import encode_prompt


def _generate(model_dir, **kw):
    model, tok = load_model(model_dir, "cpu")
    prompts = [encode_prompt(tok, arithmetic_example(i)["prompt"]) for i in range(12)]
    args = dict(max_new_tokens=6, temperature=1.0, top_p=1.0, top_k=0, generator=torch.Generator().manual_seed(0))
    args.update(kw)
    return model, tok, HFRolloutEngine(model, tok).generate(prompts, **args)


def test_sampling_logprobs_match_the_training_forward(tiny_model_dir):
    model, tok, b = _generate(tiny_model_dir, temperature=0.7)
    logp, _ = sequence_logprobs(model, b, temperature=0.7)
    m = b.completion_mask.bool()
    assert torch.allclose(logp[m], b.sampling_logp[m], atol=1e-4)
    # completions end at the first <eos>; truncated ones have none
    for ids, mask, trunc in zip(b.completion_ids.tolist(), b.completion_mask.tolist(), b.truncated.tolist()):
        n = int(sum(mask))
        assert (tok.eos_token_id in ids[:n]) != trunc
        if not trunc:
            assert ids[n - 1] == tok.eos_token_id


def test_keep_sampling_mask_renormalises_over_kept_tokens(tiny_model_dir):
    model, _, b = _generate(tiny_model_dir, top_p=0.6, keep_sampling_mask=True)
    m = b.completion_mask.bool()
    with_mask, _ = sequence_logprobs(model, b, temperature=1.0, use_kept_mask=True)
    without, _ = sequence_logprobs(model, b, temperature=1.0, use_kept_mask=False)
    assert torch.allclose(with_mask[m], b.sampling_logp[m], atol=1e-4)
    # over the full vocabulary a kept token is less likely than under the truncated distribution
    assert (without[m] <= b.sampling_logp[m] + 1e-5).all()
    assert (without[m] < b.sampling_logp[m] - 1e-3).any()
    assert b.kept_mask.shape[:2] == b.completion_ids.shape
    # every sampled token was inside the kept set
    assert b.kept_mask.gather(-1, b.completion_ids[..., None]).squeeze(-1)[m].all()


def test_truncate_logits_top_k_and_top_p():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    _, keep = truncate_logits(logits, top_p=1.0, top_k=2)
    assert keep.tolist() == [[True, True, False, False]]
    _, keep = truncate_logits(logits, top_p=0.75, top_k=0)
    assert keep.tolist() == [[True, True, False, False]]  # 0.5 + 0.3 reaches 0.75
    _, keep = truncate_logits(logits, top_p=0.5, top_k=0)
    assert keep.tolist() == [[True, False, False, False]]
    out, keep = truncate_logits(logits, top_p=1.0, top_k=0)
    assert keep is None and torch.equal(out, logits)


def test_concat_batches_keeps_each_sequence_intact(tiny_model_dir):
    model, tok, a = _generate(tiny_model_dir)
    _, _, b = _generate(tiny_model_dir, max_new_tokens=3, generator=torch.Generator().manual_seed(5))
    both = concat_batches([a, b])
    logp, _ = sequence_logprobs(model, both, temperature=1.0)
    m = both.completion_mask.bool()
    assert torch.allclose(logp[m], both.sampling_logp[m], atol=1e-4)
    assert both.completion_ids.shape[0] == a.completion_ids.shape[0] + b.completion_ids.shape[0]


def test_vllm_engine_is_an_optional_extra(tiny_model_dir):
    import importlib.util

    import pytest

    from training.rollout import make_rollout_engine

    if importlib.util.find_spec("vllm") is not None:  # a GPU machine with the extra: nothing to check here
        return
    model, tok = load_model(tiny_model_dir, "cpu")
    with pytest.raises(ImportError, match=r"\.\[gpu\]"):
        make_rollout_engine("vllm", model, tok)
    with pytest.raises(ValueError, match="unknown engine"):
        make_rollout_engine("sglang", model, tok)


def test_shared_prompt_prefill_gives_the_same_logprobs_and_gradients(tiny_model_dir):
    """Each prompt repeated G times is computed once; values and gradients equal G separate copies.

    The two layouts sum the same terms in different orders, and which order a float32 kernel uses depends on
    the CPU's SIMD path: in float32 one gradient element differed by more than 1e-4 relative on one x86 CPU
    and not on another. So both forwards run in float64 (transformers' Llama still computes RMSNorm in
    float32, so a value can round differently there: ~1e-7 of a tensor's norm), and each tensor is compared
    relative to its own norm with 1e-5 of headroom. A real mismatch (a wrong position, mask or cache row)
    moves the result by a sizeable fraction of its norm.
    """
    import dataclasses

    model, tok = load_model(tiny_model_dir, "cpu")
    prompts = [encode_prompt(tok, arithmetic_example(i)["prompt"]) for i in range(3) for _ in range(4)]
    b = HFRolloutEngine(model, tok).generate(prompts, max_new_tokens=5, temperature=1.0, top_p=1.0, top_k=0,
                                             generator=torch.Generator().manual_seed(2))
    full_layout = dataclasses.replace(b, routing={})  # routing set: the one-forward-per-row path
    model.double()

    def loss_and_grads(batch):
        model.zero_grad()
        logp, _ = sequence_logprobs(model, batch, temperature=1.0)
        assert logp.dtype == torch.float64
        loss = (logp * batch.completion_mask * torch.linspace(-1, 1, logp.shape[0])[:, None]).sum()
        loss.backward()
        return logp.detach(), [p.grad.clone() for p in model.parameters()]

    shared_logp, shared_grads = loss_and_grads(b)
    full_logp, full_grads = loss_and_grads(full_layout)
    m = b.completion_mask.bool()
    assert (shared_logp[m] - full_logp[m]).norm() <= 1e-5 * full_logp[m].norm()
    for g1, g2 in zip(shared_grads, full_grads):
        assert (g1 - g2).norm() <= 1e-5 * g2.norm() + 1e-12, (g1 - g2).norm() / g2.norm()
