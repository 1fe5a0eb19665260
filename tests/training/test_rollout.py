import torch

from training.tasks.arithmetic import arithmetic_example
from training.loop import load_model
from training.rollout import concat_batches
from training.rollout import HFRolloutEngine, StopStrings, end_token_ids, sequence_logprobs, truncate_logits
from training.evaluate import decode_completions
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

    from training.rollout_engines import make_rollout_engine

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


def _expected_ends(tok, free, stop=(), end_ids=()):
    """Where each row of an unstopped batch should have ended: after the first token that is an end token or
    whose arrival made the decoded completion contain a stop string (brute force: every prefix decoded)."""
    ends = []
    for ids, n in zip(free.completion_ids.tolist(), free.lengths.tolist()):
        end = None
        for j in range(n):
            text = tok.decode(ids[:j + 1], skip_special_tokens=True)
            if ids[j] in end_ids or any(s in text for s in stop):
                end = j
                break
        ends.append(end)
    return ends


def _assert_cut(model, tok, free, cut, ends, temperature=2.0):
    """``cut`` is ``free`` (the same draws) ending at ``ends``; the mask covers the last token; truncated only
    where nothing ended the row; π_old still matches the training forward on the masked tokens."""
    for i, end in enumerate(ends):
        n = int(cut.lengths[i])
        want = free.completion_ids[i, :int(free.lengths[i])] if end is None else free.completion_ids[i, :end + 1]
        assert cut.completion_ids[i, :n].tolist() == want.tolist(), (i, tok.decode(want))
        assert bool(cut.truncated[i]) == (end is None and bool(free.truncated[i]))
    logp, _ = sequence_logprobs(model, cut, temperature=temperature)
    m = cut.completion_mask.bool()
    assert torch.allclose(logp[m], cut.sampling_logp[m], atol=1e-4)
    assert (cut.sampling_logp[~m] == 0).all()


def test_stop_strings_end_completions_at_the_token_that_completes_one(tiny_model_dir):
    """Sampling draws for every row at every step, so with the same seed the stopped batch is the free one cut
    after the first token whose arrival put a stop string in the completion's text (the string included)."""
    kw = dict(max_new_tokens=8, temperature=2.0)
    model, tok, free = _generate(tiny_model_dir, **kw)
    # two spread over two tokens (the tiny model's are characters), one a token; the first is the opening of a
    # completion the free batch drew (without a "6" in it), so at least one row ends on a two-token string
    opening = next(t[:2] for t in decode_completions(tok, free) if len(t) >= 2 and "6" not in t[:2])
    stop = [opening, "0,", "6"]
    _, _, cut = _generate(tiny_model_dir, stop=stop, **kw)
    ends = _expected_ends(tok, free, stop, end_ids=[tok.eos_token_id])
    stopped = [e is not None and free.completion_ids[i, e] != tok.eos_token_id for i, e in enumerate(ends)]
    assert any(stopped) and not all(stopped)  # some rows stopped by a string, some not: the test can fail
    _assert_cut(model, tok, free, cut, ends)
    texts = decode_completions(tok, cut)
    assert all(t.endswith(tuple(stop)) for t, s in zip(texts, stopped) if s)
    assert any(t.endswith((opening, "0,")) for t in texts)


def test_every_declared_eos_ends_a_completion(tiny_model_dir):
    """A generation config listing several EOS ids (Llama 3, Qwen2.5) ends a completion at any of them."""
    model, tok, free = _generate(tiny_model_dir, max_new_tokens=8, temperature=2.0)
    seven = tok.convert_tokens_to_ids("7")
    model.generation_config.eos_token_id = [tok.eos_token_id, seven]
    assert end_token_ids(model, tok) == sorted([tok.eos_token_id, seven])
    cut = HFRolloutEngine(model, tok).generate(
        [encode_prompt(tok, arithmetic_example(i)["prompt"]) for i in range(12)], max_new_tokens=8,
        temperature=2.0, top_p=1.0, top_k=0, generator=torch.Generator().manual_seed(0))
    ends = _expected_ends(tok, free, end_ids=[tok.eos_token_id, seven])
    assert any(e is not None and free.completion_ids[i, e] == seven for i, e in enumerate(ends))
    _assert_cut(model, tok, free, cut, ends)


def test_stop_strings_decode_only_the_running_rows_tails(tiny_model_dir):
    model, tok = load_model(tiny_model_dir, "cpu")
    calls = []
    decode = tok.batch_decode
    tok.batch_decode = lambda seqs, **kw: calls.append(seqs) or decode(seqs, **kw)
    prompts = [encode_prompt(tok, arithmetic_example(i)["prompt"]) for i in range(12)]
    args = dict(max_new_tokens=8, temperature=2.0, top_p=1.0, top_k=0)
    HFRolloutEngine(model, tok).generate(prompts, generator=torch.Generator().manual_seed(0), **args)
    assert calls == []  # no stop strings: nothing decoded while sampling
    b = HFRolloutEngine(model, tok).generate(prompts, generator=torch.Generator().manual_seed(0), stop=["123"],
                                            **args)
    window = StopStrings(tok, ["123"]).window
    assert window == 4 and calls and all(len(row) <= window for seqs in calls for row in seqs)
    # a row is decoded at each step it runs, except the step its <eos> ended it, and never after it ended
    last = b.completion_ids.gather(1, (b.lengths - 1)[:, None]).squeeze(1)
    ended_by_eos = int(((last == tok.eos_token_id) & ~b.truncated).sum())
    assert sum(len(seqs) for seqs in calls) == int(b.lengths.sum()) - ended_by_eos


class _WordTokenizer:
    """Several characters per token, like a real BPE vocabulary."""

    vocab = ["<pad>", "The", " answer", " is", " <", "answer", ">", "4", "</", "answer>", "\n"]

    def batch_decode(self, seqs, skip_special_tokens=True):
        return ["".join(self.vocab[t] for t in seq if t) for seq in seqs]


def test_stop_strings_split_over_tokens_are_found():
    tok = _WordTokenizer()
    stopper = StopStrings(tok, ["</answer>"])
    seq = [tok.vocab.index(w) for w in ("The", " answer", " is", " <", "answer", ">", "4", "</", "answer>", "\n")]
    tokens, hits = [], []
    for t, token in enumerate(seq):
        tokens.append(torch.tensor([token, token]))
        hits.append(stopper.completed(tokens, torch.tensor([True, False])).tolist())
    assert hits.index([True, False]) == seq.index(tok.vocab.index("answer>"))
    assert all(h == [False, False] for h in hits[:8])


def test_evaluation_samples_stop_where_training_does(tiny_model_dir):
    """The periodic eval and evaluation jobs sample through the run's prompt template, stop strings included."""
    from training.evaluate import evaluate_examples
    from training.prompts import PromptTemplate

    model, tok = load_model(tiny_model_dir, "cpu")
    examples = [arithmetic_example(i) for i in range(6)]
    res = evaluate_examples(model, tok, examples, n=4, ks=[1], temperature=2.0, max_new_tokens=8,
                            rewards=[{"name": "exact"}], keep_completions=4,
                            template=PromptTemplate(chat="off", stop=("6",)))
    texts = [s["completion"] for p in res["problems"] for s in p["samples"]]
    assert len(texts) == 24 and any(t.endswith("6") for t in texts)
    assert all("6" not in t[:-1] for t in texts)
