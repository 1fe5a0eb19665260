"""Training memory: the chunked log-probs and entropy equal the full computation, micro-batched and checkpointed
gradients equal one pass's, the knobs are validated, and the memory model's estimate is within 20 % of the peak
RSS of a real run of the tiny model (measured in a subprocess)."""
import json
import subprocess
import sys

import pytest
import torch

from tests.training.conftest import REPO, small_config
from training.config import TrainConfig
from training.distributed import Parallel, head_grad_in_place, sparse_tied_embedding
from training.fields import FieldErrors
from training.memory import (AUTO_SHARE, ModelShape, activation_bytes, auto_micro_batch, distinct_prompts, estimate_peak,
                             head_bytes, model_shape, read_model_shape, seeds_that_fit)
from training.rollout import RolloutBatch, _full_logits, head_logits, sequence_logprobs, token_logprobs


def random_llama(vocab=50, tied=True):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=tied)
    return LlamaForCausalLM(cfg).double()


def random_batch(B=8, P=5, T=7, vocab=50, group=4):
    """B rows of B/group distinct prompts (one left-padded), completions of varied lengths."""
    g = torch.Generator().manual_seed(1)
    prompts = torch.randint(1, vocab, (B // group, P), generator=g).repeat_interleave(group, 0)
    pmask = torch.ones(B, P, dtype=torch.long)
    pmask[:group, :2] = 0
    comp = torch.randint(1, vocab, (B, T), generator=g)
    cmask = torch.ones(B, T)
    for i in range(B):
        cmask[i, 1 + i % T:] = 0
    old = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3
    return RolloutBatch(prompts, pmask, comp, cmask, old, torch.zeros(B, dtype=torch.bool))


def full_reference(model, batch, temperature):
    """log π and entropy from the whole logits of each row alone: one plain forward over its prompt and completion
    tokens, no padding, no prefill sharing, no chunking, no length groups; zero where a position predicts padding."""
    T = batch.completion_ids.shape[1]
    logps, entropies = [], []
    for i in range(batch.completion_ids.shape[0]):
        prompt = batch.prompt_ids[i][batch.prompt_mask[i].bool()]
        L = int(batch.completion_mask[i].sum())
        ids = torch.cat([prompt, batch.completion_ids[i, :L]])[None]
        logits = model(input_ids=ids).logits[0, len(prompt) - 1:len(prompt) + L - 1] / temperature
        logp_all = torch.log_softmax(logits, dim=-1)
        pad = (0, T - L)
        logps.append(torch.nn.functional.pad(logp_all.gather(-1, batch.completion_ids[i, :L, None]).squeeze(-1), pad))
        entropies.append(torch.nn.functional.pad(-(logp_all.exp() * logp_all).sum(-1), pad))
    return torch.stack(logps), torch.stack(entropies)


@pytest.mark.parametrize("checkpoint", [False, True])
def test_chunked_logprobs_and_entropy_equal_the_full_computation(checkpoint):
    model, batch = random_llama(), random_batch()
    ref_logp, ref_entropy = full_reference(model, batch, 0.7)
    logp, entropy = sequence_logprobs(model, batch, temperature=0.7, with_entropy=True, checkpoint=checkpoint)
    real = batch.completion_mask  # a position that predicts padding is in no loss
    assert torch.allclose(logp * real, ref_logp, rtol=1e-6, atol=1e-9)
    assert torch.allclose(entropy * real, ref_entropy, rtol=1e-6, atol=1e-9)


def test_token_logprobs_in_chunks_of_a_few_rows_with_a_kept_mask():
    torch.manual_seed(0)
    head = torch.nn.Linear(16, 40, bias=False).double()
    hidden = torch.randn(3, 5, 16, dtype=torch.float64)
    targets = torch.randint(0, 40, (3, 5))
    kept = torch.rand(3, 5, 40) > 0.3
    kept.scatter_(-1, targets[..., None], True)
    logits = (head(hidden) / 2.0).masked_fill(~kept, float("-inf"))
    logp_all = torch.log_softmax(logits, -1)
    p = logp_all.exp()
    ref_entropy = -(p * logp_all.masked_fill(p == 0, 0.0)).sum(-1)
    logp, entropy = token_logprobs(hidden, head, targets, temperature=2.0, kept=kept, with_entropy=True,
                                   chunk_logits=3 * 40)  # 3 rows a chunk: 5 chunks, the last one short
    assert torch.allclose(logp, logp_all.gather(-1, targets[..., None]).squeeze(-1), rtol=1e-6)
    assert torch.allclose(entropy, ref_entropy, rtol=1e-6)


def test_chunked_gradients_equal_the_full_computation():
    model, batch = random_llama(tied=False), random_batch()
    ref_logp, _ = full_reference(model, batch, 1.0)
    (ref_logp * batch.completion_mask).sum().backward()
    ref = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    logp, _ = sequence_logprobs(model, batch, temperature=1.0)
    (logp * batch.completion_mask).sum().backward()
    # atol: torch's CPU SDPA backward is not additive past ~2^-22 even in float64 (two rows that share a prompt
    # give their two gradients' sum to that; each row alone matches the reference to the last bit)
    for n, p in model.named_parameters():
        assert torch.allclose(p.grad, ref[n], rtol=1e-6, atol=1e-6), n


def test_a_tied_embeddings_sparse_gradient_adds_up_to_the_dense_one():
    batch = random_batch()
    grads = {}
    for sparse in (False, True):
        model = random_llama(tied=True)
        assert sparse_tied_embedding(model) if sparse else True
        assert model.get_input_embeddings().sparse is sparse
        for part in (torch.arange(4), torch.arange(4, 8)):  # accumulated over two backwards, as micro-batches are
            logp, _ = sequence_logprobs(model, batch.index(part), temperature=1.0)
            (logp * batch.completion_mask[part]).sum().backward()
        grads[sparse] = {n: p.grad for n, p in model.named_parameters()}
    for n, g in grads[True].items():
        assert not g.is_sparse and torch.allclose(g, grads[False][n], rtol=1e-9, atol=1e-12), n
    untied = random_llama(tied=False)
    assert not sparse_tied_embedding(untied) and not untied.get_input_embeddings().sparse


def head_gradients(tied: bool, in_place: bool, parts, *, prior: bool, checkpoint: bool = False):
    """The model's gradients after a backward per micro-batch of ``parts`` (each loss weighted as the loop
    weighs micro-batches), starting from zero or (``prior``) from gradients already accumulated; ``in_place``:
    as the loop has it in one process (the head's gradient accumulated in place, a tied embedding's sparse)."""
    batch = random_batch()
    model = random_llama(tied=tied)
    if in_place:
        assert head_grad_in_place(model) and model.get_output_embeddings().grad_in_place
        assert sparse_tied_embedding(model) is tied
    if prior:
        for n, p in model.named_parameters():
            p.grad = torch.randn(p.shape, generator=torch.Generator().manual_seed(len(n)), dtype=p.dtype)
    head_grad = model.get_output_embeddings().weight.grad
    for k, part in enumerate(parts):
        logp, _ = sequence_logprobs(model, batch.index(part), temperature=0.7, checkpoint=checkpoint)
        ((logp * batch.completion_mask[part]).sum() * (k + 1) / len(parts)).backward()
    if in_place and prior:  # written into the tensor that was there, not replaced
        assert model.get_output_embeddings().weight.grad is head_grad
    return {n: p.grad for n, p in model.named_parameters()}


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("parts", [[torch.arange(8)], [torch.arange(3), torch.arange(3, 5), torch.arange(5, 8)]],
                         ids=["one", "three"])
@pytest.mark.parametrize("prior", [False, True])
def test_the_heads_gradient_accumulated_in_place_equals_autograds(tied, parts, prior):
    plain = head_gradients(tied, False, parts, prior=prior)
    in_place = head_gradients(tied, True, parts, prior=prior)
    assert plain.keys() == in_place.keys()
    for n, g in in_place.items():
        assert not g.is_sparse and torch.allclose(g, plain[n], rtol=1e-12, atol=1e-15), n
    head = "model.embed_tokens.weight" if tied else "lm_head.weight"
    assert plain[head].abs().sum() > 0


def test_the_heads_gradient_in_place_under_checkpointing_and_in_chunks_of_a_few_rows():
    parts = [torch.arange(4), torch.arange(4, 8)]
    plain = head_gradients(True, False, parts, prior=True, checkpoint=True)  # (one forward: not shared_prefill's sums)
    for n, g in head_gradients(True, True, parts, prior=True, checkpoint=True).items():
        assert torch.allclose(g, plain[n], rtol=1e-12, atol=1e-15), n
    grads = {}
    for in_place in (False, True):
        torch.manual_seed(0)
        head = torch.nn.Linear(16, 40, bias=False).double()
        head.grad_in_place = in_place
        hidden = torch.randn(3, 5, 16, dtype=torch.float64, requires_grad=True)
        targets = torch.randint(0, 40, (3, 5))
        for _ in range(2):
            logp, _ = token_logprobs(hidden, head, targets, temperature=2.0, chunk_logits=3 * 40)  # 5 chunks
            logp.sum().backward()
        grads[in_place] = head.weight.grad, hidden.grad
    for plain_g, in_place_g in zip(grads[False], grads[True]):
        assert torch.allclose(in_place_g, plain_g, rtol=1e-12, atol=1e-15)


def test_the_head_is_left_to_autograd_without_gradients_or_the_mark():
    model = random_llama(tied=False)
    head = model.get_output_embeddings()
    h = torch.randn(4, 32, dtype=torch.float64, requires_grad=True)
    assert head_logits(head, h).grad_fn.name() != "HeadGradInPlaceBackward"  # not marked
    head_grad_in_place(model)
    assert head_logits(head, h).grad_fn.name() == "HeadGradInPlaceBackward"
    with torch.no_grad():
        assert torch.equal(head_logits(head, h), head(h))
    assert torch.equal(head_logits(head, h), head(h))


def rollouts(batch, rewards):
    from training.algorithms import group_advantages
    from training.loop import Rollouts

    B = len(rewards)
    loss_mask = torch.ones(B, dtype=torch.float64)
    loss_mask[2] = 0.0  # one unusable completion (e.g. its verifier failed)
    return Rollouts(batch, group_advantages(torch.tensor(rewards), 4), loss_mask, {}, [], B,
                    torch.arange(B), B)


def one_step(cfg, micro, checkpoint=False):
    """Parameters after one SGD step (lr 1) on a fixed batch, and the step's statistics."""
    from training.loop import minibatch_step

    model, batch = random_llama(), random_batch()
    cfg = TrainConfig.from_dict({**cfg.to_dict(), "gradient_checkpointing": checkpoint}, check_paths=False)
    policy = Parallel(model, cfg, __import__("training.distributed", fromlist=["SINGLE"]).SINGLE)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    roll = rollouts(batch, [1., 0., 0., 1., 0., 0., 1., 1.])
    stats = minibatch_step(cfg, policy, opt, roll, None, torch.arange(8), True, micro, policy.world)
    return dict(model.named_parameters()), stats


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
@pytest.mark.parametrize("opsm", [None, 0.0])
def test_micro_batched_gradients_and_statistics_equal_the_full_batch(agg, opsm):
    cfg = small_config(loss_agg=agg, opsm_delta=opsm, max_grad_norm=0.0, max_new_tokens=7)
    full, full_stats = one_step(cfg, micro=8)
    for micro in (3, 1):
        parts, stats = one_step(cfg, micro=micro)
        for name, p in full.items():
            assert torch.allclose(parts[name], p, rtol=1e-6, atol=1e-8), (micro, name)
        assert stats.keys() == full_stats.keys()
        for key, value in full_stats.items():
            assert stats[key] == pytest.approx(value, rel=1e-6, abs=1e-9), (micro, key)
    assert full_stats["loss/policy"] != 0.0


def test_gradient_checkpointing_gives_the_same_loss_and_gradients():
    cfg = small_config(loss_agg="token-mean", max_grad_norm=0.0, max_new_tokens=7)
    plain, plain_stats = one_step(cfg, micro=8)
    ckpt, ckpt_stats = one_step(cfg, micro=4, checkpoint=True)
    for name, p in plain.items():
        assert torch.allclose(ckpt[name], p, rtol=1e-6, atol=1e-8), name
    assert ckpt_stats["loss/policy"] == pytest.approx(plain_stats["loss/policy"], rel=1e-9)
    assert ckpt_stats["entropy"] == pytest.approx(plain_stats["entropy"], rel=1e-9)


def test_the_memory_knobs_are_checked():
    assert TrainConfig.from_dict({"gradient_checkpointing": True, "micro_batch_size": 4}).micro_batch_size == 4
    with pytest.raises(FieldErrors) as exc:
        TrainConfig.from_dict({"micro_batch_size": -1})
    assert set(exc.value.errors) == {"micro_batch_size"}
    with pytest.raises(FieldErrors) as exc:
        TrainConfig.from_dict({"gradient_checkpointing": "sometimes"})
    assert set(exc.value.errors) == {"gradient_checkpointing"}


SMOLLM2 = {"hidden_size": 576, "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
           "intermediate_size": 1536, "vocab_size": 49152, "tie_word_embeddings": True}


def test_the_model_shape_counts_smollm2s_parameters():
    # SmolLM2-135M-Instruct: 134,515,008 parameters (its safetensors' tensors)
    assert model_shape(SMOLLM2).params == 134_515_008


def test_auto_micro_batching_starts_where_activations_pass_a_share_of_the_model_state():
    shape = model_shape(SMOLLM2)
    cfg = TrainConfig.from_dict({"prompts_per_step": 4, "group_size": 8, "max_new_tokens": 64}, check_paths=False)
    micro = auto_micro_batch(cfg, shape, prompt_tokens=40, completion_tokens=64)
    assert 1 <= micro < 32

    def cost(b):  # a micro-batch's activations and output-layer share
        return (activation_bytes(shape, rows=b, prompts=distinct_prompts(b, 4, 8), prompt_tokens=40,
                                 completion_tokens=64, checkpointing=False)
                + head_bytes(shape, rows=b, completion_tokens=64, checkpointing=False))

    assert cost(micro) <= AUTO_SHARE * 16 * shape.params < cost(micro + 1)
    small = TrainConfig.from_dict({"prompts_per_step": 2, "group_size": 2, "max_new_tokens": 8}, check_paths=False)
    assert auto_micro_batch(small, shape, prompt_tokens=40, completion_tokens=8) == 4  # fits: one pass
    tiny = ModelShape(params=400_000, hidden=128, layers=4, heads=4, kv_heads=4, head_dim=32, intermediate=256,
                      vocab=40)
    assert auto_micro_batch(cfg, tiny, prompt_tokens=20, completion_tokens=64) == 32


def test_checkpointing_and_micro_batches_lower_the_estimate():
    shape = model_shape(SMOLLM2)
    base = {"prompts_per_step": 4, "group_size": 8, "max_new_tokens": 64, "kl_coef": 0.0}
    one_pass = estimate_peak(TrainConfig.from_dict({**base, "micro_batch_size": 32}, check_paths=False), shape,
                             prompt_tokens=40)
    micro = estimate_peak(TrainConfig.from_dict({**base, "micro_batch_size": 4}, check_paths=False), shape,
                          prompt_tokens=40)
    ckpt = estimate_peak(TrainConfig.from_dict({**base, "micro_batch_size": 32, "gradient_checkpointing": True},
                                               check_paths=False), shape, prompt_tokens=40)
    assert micro.total < one_pass.total and ckpt.total < one_pass.total
    assert micro.parts["weights"] == 4 * shape.params and micro.parts["optimizer"] == 8 * shape.params
    with_kl = estimate_peak(TrainConfig.from_dict({**base, "kl_coef": 0.04}, check_paths=False), shape,
                            prompt_tokens=40)
    assert with_kl.parts["reference"] == 4 * shape.params


def test_a_packed_group_counts_each_seeds_state_and_batch_and_one_runtime_and_reference():
    shape = model_shape(SMOLLM2)
    cfg = TrainConfig.from_dict({"prompts_per_step": 4, "group_size": 8, "max_new_tokens": 64, "kl_coef": 0.04},
                                check_paths=False)
    one, four = (estimate_peak(cfg, shape, prompt_tokens=40, seeds=k) for k in (1, 4))
    for part in ("weights", "gradients", "optimizer", "activations", "logits"):
        assert four.parts[part] == 4 * one.parts[part], part
    assert four.parts["runtime"] == one.parts["runtime"] and four.parts["reference"] == one.parts["reference"]
    budget = 3 * one.total
    fits = seeds_that_fit(cfg, shape, budget, prompt_tokens=40)
    assert fits >= 3  # one runtime and one reference for all of them
    assert estimate_peak(cfg, shape, prompt_tokens=40, seeds=fits).total <= budget
    assert estimate_peak(cfg, shape, prompt_tokens=40, seeds=fits + 1).total > budget
    assert seeds_that_fit(cfg, shape, one.total - 1, prompt_tokens=40) == 0


MEASURE = """
import json, sys, tempfile
import torch
torch.set_num_threads(1)
from training.config import TrainConfig
from training.loop import Seed, train_group
from training.sink import NullSink
cfg = TrainConfig.from_dict(json.loads(sys.argv[1]))
seeds = int(sys.argv[2]) if len(sys.argv) > 2 else 1
with tempfile.TemporaryDirectory() as out:
    configs = [TrainConfig.from_dict({**cfg.to_dict(), "seed": n}) for n in range(seeds)]
    train_group([Seed(c, f"{out}/{n}", NullSink()) for n, c in enumerate(configs)])
# VmHWM, the peak RSS of this process's own memory: ru_maxrss is kept across execve on Linux, so a child of a large
# test process would report its parent's size (4 GB late in the suite)
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"peak": peak_kb * 1024}))
"""


@pytest.mark.parametrize("shape, seeds", [((8, 8, 32), 1), ((8, 8, 32), 4)])
def test_the_estimate_is_within_a_fifth_of_the_tiny_models_measured_peak(tiny_model_dir, shape, seeds):
    """One run; and a packed group of 4 seeds in one process (docs/architecture.md#packed-seeds), whose estimate
    (each seed counted as a run's activations) bounds its peak."""
    prompts, group, max_new = shape
    knobs = {"total_steps": 2, "prompts_per_step": prompts, "group_size": group, "max_new_tokens": max_new,
             "samples_per_step": 0, "model_path": str(tiny_model_dir), "device": "cpu"}
    proc = subprocess.run([sys.executable, "-c", MEASURE, json.dumps(knobs), str(seeds)], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    measured = json.loads(proc.stdout.strip().splitlines()[-1])["peak"]
    estimate = estimate_peak(TrainConfig.from_dict(knobs), read_model_shape(str(tiny_model_dir)),
                             prompt_tokens=24, seeds=seeds)
    if seeds == 1:
        assert abs(estimate.total - measured) <= 0.2 * measured, (estimate.text(), measured / 1e9)
    else:  # the batched forward keeps less than a model's own: the estimate is a bound, within 2x
        assert measured <= estimate.total <= 2 * measured, (estimate.text(), measured / 1e9)
