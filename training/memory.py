"""The memory model: a config's estimated peak memory on its worker, before anything is loaded (pure: numbers in,
numbers out; docs/architecture.md, "The training core").

A step of Seedbed's loop holds, at its peak (the backward of a micro-batch):

* the process itself (Python, torch, transformers, the tokenizer, the task): ``RUNTIME_BYTES``;
* the model state, fp32 whatever ``precision`` (bf16 is autocast over fp32 weights): weights 4·N bytes,
  gradients 4·N, AdamW's two moments 8·N (N parameters, a tied embedding counted once); the reference model
  another 4·N when ``kl_coef`` > 0;
* the activations autograd keeps for the backward of one micro-batch of b sequences: per decoder layer and
  token, about ``ACT_HIDDEN`` floats per hidden unit, ``ACT_INTER`` per MLP unit and ``ACT_KV`` per key/value
  unit (norm inputs and outputs, q/k/v before and after RoPE, attention output, gate/up/SiLU/product), over the
  tokens u·P + b·T (the prompt prefilled once per distinct prompt, u of them, then the b completions); with
  ``gradient_checkpointing`` only each layer's input plus one layer's worth;
* the output layer's share: the log-softmax of the micro-batch's b·T positions over the vocabulary V (4·b·T·V
  bytes; none with checkpointing) and the working set of one chunk (``training.rollout.CHUNK_LOGITS`` logits,
  a few copies).

The optimizer step's own peak comes after the activations are freed: the loop's fused AdamW updates in place,
the foreach kernels it takes under FSDP2 make a temporary of 4·N (counted, whichever runs); the estimate is the
larger of the two phases. Sampling (the KV cache of the whole batch) is smaller
than either on the models this was measured on, and is counted in the same way.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

#: the Python process with torch, transformers, a tokenizer and a task loaded, before any model (measured as the
#: process's own VmHWM: about 0.3 GB on CPU with torch 2.x and transformers 5; ru_maxrss is kept across execve, so
#: a process started by a large one reports its parent's size)
RUNTIME_BYTES = 300 * 2**20
#: floats saved per token and decoder layer, per hidden unit, per MLP unit and per key/value unit: the count above
#: (10, 4, 4) raised by a quarter for what the allocator holds beside them, fitted to SmolLM2's measured peak
ACT_HIDDEN, ACT_INTER, ACT_KV = 13, 5, 5
#: logits computed at once in the output layer (training.rollout.CHUNK_LOGITS) and copies of them alive at once
CHUNK_LOGITS, CHUNK_COPIES = 1 << 22, 4
#: with micro_batch_size 0, the micro-batch is the largest whose activations stay within this share of the model
#: state (weights, gradients, moments), and at least AUTO_FLOOR_BYTES: below that, one pass
AUTO_SHARE, AUTO_FLOOR_BYTES = 0.35, 256 * 2**20


@dataclass(frozen=True)
class ModelShape:
    """What the estimate needs of a decoder-only model: parameters and the dimensions of its layers."""

    params: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per part at the peak and in all; ``micro_batch`` the sequences per forward/backward it assumed."""

    parts: dict
    total: int
    micro_batch: int

    def text(self) -> str:
        """'3.1 GB (runtime 0.45, weights 0.54, ...)' for the form."""
        parts = ", ".join(f"{k} {v / 1e9:.2f}" for k, v in self.parts.items() if v)
        return f"{self.total / 1e9:.1f} GB ({parts} GB; micro-batch {self.micro_batch})"


def model_shape(config: dict) -> ModelShape:
    """A ModelShape from a Hugging Face ``config.json`` (Llama-style names; GPT-2 style as a fallback). The
    parameter count: embeddings V·H (and the head, when untied), per layer the attention's q, o (H·H) and k, v
    (H·KV), the MLP's three projections (3·H·I) and two norms (2·H), and the final norm."""
    hidden = int(config.get("hidden_size") or config.get("n_embd") or 0)
    layers = int(config.get("num_hidden_layers") or config.get("n_layer") or 0)
    heads = int(config.get("num_attention_heads") or config.get("n_head") or 1)
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // max(heads, 1))
    inter = int(config.get("intermediate_size") or config.get("n_inner") or 4 * hidden)
    vocab = int(config.get("vocab_size") or 0)
    kv = kv_heads * head_dim
    per_layer = 2 * hidden * heads * head_dim + 2 * hidden * kv + 3 * hidden * inter + 2 * hidden
    tied = config.get("tie_word_embeddings", True)
    params = vocab * hidden * (1 if tied else 2) + layers * per_layer + hidden
    return ModelShape(params, hidden, layers, heads, kv_heads, head_dim, inter, vocab)


def model_shape_of(config) -> ModelShape:
    """``model_shape`` of a loaded model's config object."""
    return model_shape(config.to_dict())


def read_model_config(model_dir: str) -> dict | None:
    """A model folder's config.json as a dict; None when it is missing, unreadable or not an object."""
    try:
        with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as fh:
            config = json.load(fh)
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def read_model_shape(model_dir: str) -> ModelShape | None:
    """``model_shape`` of a model folder's config.json; None when it has none (or not a decoder's)."""
    config = read_model_config(model_dir)
    shape = model_shape(config) if config else None
    return shape if shape and shape.hidden and shape.layers and shape.vocab else None


def state_bytes(shape: ModelShape, *, reference: bool) -> dict:
    """The model state in bytes: fp32 weights 4·N, gradients 4·N, AdamW moments 8·N (Loshchilov & Hutter,
    two moments per parameter), and a reference copy 4·N."""
    n = shape.params
    return {"weights": 4 * n, "gradients": 4 * n, "optimizer": 8 * n, "reference": 4 * n if reference else 0}


def distinct_prompts(rows: int, prompts: int, group: int) -> int:
    """Distinct prompts among ``rows`` consecutive rows of a batch of ``prompts`` groups of ``group`` (the loop
    orders a micro-batched minibatch by group): at most ceil(rows / group) + 1, at most ``prompts``."""
    return min(prompts, -(-rows // group) + (1 if rows % group else 0))


def activation_bytes(shape: ModelShape, *, rows: int, prompts: int, prompt_tokens: int, completion_tokens: int,
                     checkpointing: bool) -> int:
    """Bytes autograd keeps for one micro-batch's backward: per layer and token
    4·(ACT_HIDDEN·H + ACT_INTER·I + ACT_KV·KV) over u·P + b·T tokens (u = ``prompts`` distinct prompts among the
    b rows, each prefilled once);
    with checkpointing, each layer's input (4·H per token and layer) plus one layer's worth, and the prompt runs
    with every completion (no shared prefill under checkpointing)."""
    kv = shape.kv_heads * shape.head_dim
    per_token_layer = 4 * (ACT_HIDDEN * shape.hidden + ACT_INTER * shape.intermediate + ACT_KV * kv)
    if checkpointing:
        tokens = rows * (prompt_tokens + completion_tokens)
        return tokens * (4 * shape.hidden * shape.layers + per_token_layer)
    tokens = min(prompts, rows) * prompt_tokens + rows * completion_tokens
    return tokens * shape.layers * per_token_layer


def head_bytes(shape: ModelShape, *, rows: int, completion_tokens: int, checkpointing: bool) -> int:
    """The output layer's share: the kept log-softmax 4·b·T·V (none with checkpointing: recomputed), one chunk's
    working set, CHUNK_COPIES × 4 bytes × min(CHUNK_LOGITS, b·T·V), and three V × H float32 tensors alive in its
    backward (a chunk's gradient of the head, the sum it is added to, the embedding's own gradient when tied)."""
    positions = rows * completion_tokens * shape.vocab
    kept = 0 if checkpointing else 4 * positions
    return kept + CHUNK_COPIES * 4 * min(CHUNK_LOGITS, positions) + 3 * 4 * shape.vocab * shape.hidden


def sampling_bytes(shape: ModelShape, *, rows: int, prompt_tokens: int, completion_tokens: int) -> int:
    """Sampling's working set: the KV cache of every row, 2 · L · (P + T) · KV floats a row, and the last
    position's logits with their softmax, a few [B, V] tensors."""
    kv = shape.kv_heads * shape.head_dim
    return rows * (8 * shape.layers * (prompt_tokens + completion_tokens) * kv + 4 * 4 * shape.vocab)


def micro_batch_size(cfg, rows: int) -> int:
    """The configured micro-batch: ``micro_batch_size`` capped at the rows of a minibatch, 0 meaning auto."""
    return min(cfg.micro_batch_size, rows) if cfg.micro_batch_size else 0


def minibatch_rows(cfg, ranks: int = 1) -> int:
    """Sequences one rank trains on per optimizer step: the minibatch (or the whole batch) over the ranks."""
    rows = cfg.minibatch_size or cfg.prompts_per_step * cfg.group_size
    return max(1, math.ceil(min(rows, cfg.prompts_per_step * cfg.group_size) / max(ranks, 1)))


def auto_micro_batch(cfg, shape: ModelShape, *, prompt_tokens: int, completion_tokens: int, ranks: int = 1) -> int:
    """The micro-batch the loop uses when ``micro_batch_size`` is 0: the whole minibatch when its activations fit
    max(AUTO_SHARE × model state, AUTO_FLOOR_BYTES), else the largest b that does (at least 1). The memory is then
    bounded by a fixed multiple of the model's, whatever the batch."""
    rows = minibatch_rows(cfg, ranks)
    state = sum(state_bytes(shape, reference=False).values())
    budget = max(AUTO_SHARE * state, AUTO_FLOOR_BYTES)

    def cost(b: int, prompts: int | None = None) -> int:
        u = distinct_prompts(b, cfg.prompts_per_step, cfg.group_size) if prompts is None else prompts
        return (activation_bytes(shape, rows=b, prompts=u, prompt_tokens=prompt_tokens,
                                 completion_tokens=completion_tokens, checkpointing=cfg.gradient_checkpointing)
                + head_bytes(shape, rows=b, completion_tokens=completion_tokens,
                             checkpointing=cfg.gradient_checkpointing))

    if cost(rows) <= budget:
        return rows
    # cost(b) is at least its value with one distinct prompt, which grows with b: no b past the largest within
    # the budget by that bound fits (found by bisection, rows may be millions; then the exact scan below it)
    low, high = 0, rows
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if cost(mid, prompts=1) <= budget else (low, mid)
    fits = [b for b in range(1, low + 1) if cost(b) <= budget]
    return fits[-1] if fits else 1


def estimate_peak(cfg, shape: ModelShape, *, prompt_tokens: int, ranks: int = 1, seeds: int = 1) -> MemoryEstimate:
    """The estimated peak memory of one rank of a run of ``cfg`` on a model of ``shape`` whose prompts are at most
    ``prompt_tokens`` long (completions: ``max_new_tokens``): the larger of the backward's peak (runtime, state,
    a micro-batch's activations and output-layer share) and the optimizer step's (runtime, state, 4·N).

    ``seeds``: a packed group of that many seeds in the process (docs/architecture.md#packed-seeds): each its own
    weights, gradients and moments, their micro-batches' activations and sampling caches side by side; one
    runtime, one reference model (their common starting model), the optimizer steps one seed after another."""
    T = cfg.max_new_tokens
    rows = minibatch_rows(cfg, ranks)
    micro = micro_batch_size(cfg, rows) or auto_micro_batch(cfg, shape, prompt_tokens=prompt_tokens,
                                                            completion_tokens=T, ranks=ranks)
    state = state_bytes(shape, reference=cfg.kl_coef > 0)
    state = {k: v if k == "reference" else seeds * v for k, v in state.items()}
    parts = {"runtime": RUNTIME_BYTES, **state}
    act = seeds * activation_bytes(shape, rows=micro, prompts=distinct_prompts(micro, cfg.prompts_per_step,
                                                                                  cfg.group_size),
                                   prompt_tokens=prompt_tokens, completion_tokens=T,
                                   checkpointing=cfg.gradient_checkpointing)
    head = seeds * head_bytes(shape, rows=micro, completion_tokens=T, checkpointing=cfg.gradient_checkpointing)
    batch = cfg.prompts_per_step * cfg.group_size
    sampling = seeds * sampling_bytes(shape, rows=math.ceil(batch / max(ranks, 1)), prompt_tokens=prompt_tokens,
                                      completion_tokens=T)
    transient = max(act + head, 4 * shape.params, sampling)
    if transient == act + head:
        parts.update(activations=act, logits=head)
    elif transient == sampling:
        parts["sampling"] = sampling
    else:
        parts["optimizer step"] = transient
    return MemoryEstimate(parts, sum(parts.values()), micro)


def estimate_for_config(cfg, model_dir: str, *, prompt_tokens: int = 64, ranks: int = 1) -> MemoryEstimate | None:
    """``estimate_peak`` for a config whose model lies in ``model_dir``; None when its shape cannot be read."""
    shape = read_model_shape(model_dir)
    return None if shape is None else estimate_peak(cfg, shape, prompt_tokens=prompt_tokens, ranks=ranks)


#: the most seeds one packed group holds (the sweep form's ``pack`` and ``python -m training run --seeds``)
MAX_PACK = 16


def seeds_that_fit(cfg, shape: ModelShape, memory_bytes: int, *, prompt_tokens: int = 64) -> int:
    """The most seeds of ``cfg`` one process can pack within ``memory_bytes`` (at most ``MAX_PACK``; 0 when not
    even one fits), by ``estimate_peak``'s count of a packed group."""
    fits = 0
    for k in range(1, MAX_PACK + 1):
        if estimate_peak(cfg, shape, prompt_tokens=prompt_tokens, seeds=k).total > memory_bytes:
            break
        fits = k
    return fits
