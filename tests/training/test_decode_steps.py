"""Sampling steps (training/decode_steps.py): the lean Llama-family stepper computes the model's own logits, and a
generation through it samples the same completions as through the model's forward."""
import pytest
import torch

from training import decode_steps
from training.decode_steps import HFSteps, LeanLlamaSteps, lean_decode_supported
from training.prefill import shared_prefill
from training.rollout import HFRolloutEngine


def random_model(kind: str, dtype):
    import transformers

    torch.manual_seed(0)
    common = dict(vocab_size=40, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=64)
    if kind == "llama":
        config = transformers.LlamaConfig(**common, attention_bias=True, mlp_bias=True, tie_word_embeddings=True,
                                          rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 500.0})
        model = transformers.LlamaForCausalLM(config)
    elif kind == "qwen2":
        model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**common, tie_word_embeddings=False))
    else:
        model = transformers.MistralForCausalLM(transformers.MistralConfig(**common, sliding_window=None))
    with torch.no_grad():  # biases are zeros at initialisation: make them matter
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.5)
    return model.to(dtype).eval()


def prompts_batch(rows=6, width=5):
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(1, 40, (rows, width), generator=g)
    mask = torch.ones(rows, width, dtype=torch.long)
    mask[0, :3] = 0  # left padding
    mask[3, :1] = 0
    return ids, mask


@pytest.mark.parametrize("kind", ["llama", "qwen2", "mistral"])
@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
@pytest.mark.parametrize("pooled", [True, False])  # fused projections in kept buffers; or neither
@torch.no_grad()
def test_lean_steps_compute_the_models_logits(monkeypatch, kind, dtype, tol, pooled):
    if not pooled:
        monkeypatch.setattr(decode_steps, "POOL_MAX_BYTES", 0)
    model = random_model(kind, dtype)
    assert lean_decode_supported(model, 16)
    ids, mask = prompts_batch()
    ids[4:] = ids[1]  # rows 1, 4 and 5 share their prompt: it runs once
    last, cache = shared_prefill(model, ids, mask)
    lean = LeanLlamaSteps(model, 6)
    assert all(f is not None for f in lean.fused) == pooled
    assert torch.allclose(lean.prefill(ids, mask), last, rtol=tol, atol=tol)
    steppers = [HFSteps(model, cache, mask), lean]
    g = torch.Generator().manual_seed(3)
    rows = torch.arange(ids.shape[0])
    for t in range(6):
        tokens = torch.randint(1, 40, (len(rows),), generator=g)
        hf, lean = (s.step(tokens) for s in steppers)
        assert torch.allclose(lean, hf, rtol=tol, atol=tol), (t, (lean - hf).abs().max())
        if t == 2:  # rows 1 and 4 end: both steppers drop them
            keep = torch.tensor([0, 2, 3, 5])
            for s in steppers:
                s.keep(keep)
            rows = rows[keep]


def test_which_models_take_the_lean_steps():
    import transformers

    assert lean_decode_supported(random_model("llama", torch.float32), 64)
    gemma = transformers.GemmaForCausalLM(transformers.GemmaConfig(
        vocab_size=40, hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8))
    assert not lean_decode_supported(gemma, 64)  # its norm adds 1 to the weight, its embedding is scaled
    windowed = transformers.MistralForCausalLM(transformers.MistralConfig(
        vocab_size=40, hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, sliding_window=16))
    assert lean_decode_supported(windowed, 16) and not lean_decode_supported(windowed, 17)


@pytest.mark.parametrize("sampling", [dict(top_p=1.0, top_k=0, stop=()), dict(top_p=0.9, top_k=20, stop=("1",))])
def test_a_generation_samples_the_same_completions_through_either_stepper(monkeypatch, tiny_model_dir, sampling):
    from training.loop import load_model

    model, tok = load_model(tiny_model_dir, "cpu")
    prompts = [[tok.bos_token_id] + tok.encode(f"{a}+{b}=", add_special_tokens=False)
               for a in (3, 17, 250) for b in (4, 61)] * 4
    batches = []
    for lean in (True, False):
        monkeypatch.setattr(decode_steps, "lean_decode_supported", lambda *a, lean=lean: lean)
        g = torch.Generator().manual_seed(5)
        batches.append(HFRolloutEngine(model, tok).generate(
            prompts, max_new_tokens=8, temperature=1.0, generator=g, keep_sampling_mask=True,
            top_p=sampling["top_p"], top_k=sampling["top_k"], stop=sampling["stop"]))
    lean, hf = batches
    assert 1 < lean.lengths.float().mean() < 8  # completions end at different steps: rows leave the batch
    assert torch.equal(lean.completion_ids, hf.completion_ids)
    assert torch.equal(lean.completion_mask, hf.completion_mask)
    assert torch.allclose(lean.sampling_logp, hf.sampling_logp, rtol=1e-5, atol=1e-6)


def test_kept_buffers_carry_nothing_from_one_generation_to_the_next(tiny_model_dir):
    """The engine keeps a small model's KV buffers between calls: a generation after another of a different shape
    samples what a fresh engine samples."""
    from training.loop import load_model

    model, tok = load_model(tiny_model_dir, "cpu")
    prompts = [[tok.bos_token_id] + tok.encode(f"{a}+{a}=", add_special_tokens=False) for a in (5, 123)] * 6

    def sample(engine, rows, seed):
        return engine.generate(rows, max_new_tokens=8, temperature=1.0, top_p=1.0, top_k=0,
                               generator=torch.Generator().manual_seed(seed))

    used = HFRolloutEngine(model, tok)
    sample(used, prompts[:3] * 9, 1)  # 27 rows, other prompts widths: the buffers now hold its columns
    again, fresh = sample(used, prompts, 2), sample(HFRolloutEngine(model, tok), prompts, 2)
    assert used.kv_buffers.held  # the small model's buffers were kept
    assert torch.equal(again.completion_ids, fresh.completion_ids)
    assert torch.equal(again.sampling_logp, fresh.sampling_logp)


def test_distinct_prompts_finds_each_prompt_once():
    from training.prefill import distinct_prompts

    ids = torch.tensor([[0, 5, 6], [7, 5, 6], [0, 5, 6], [0, 5, 6], [7, 5, 6]])
    mask = torch.tensor([[0, 1, 1], [1, 1, 1], [0, 1, 1], [1, 1, 1], [1, 1, 1]])  # row 3: same ids, other mask
    u_ids, u_mask, inverse = distinct_prompts(ids, mask)
    assert inverse.tolist() == [0, 1, 0, 2, 1]
    assert torch.equal(u_ids[inverse], ids) and torch.equal(u_mask[inverse], mask)
