"""Rollout engines behind one interface, and the training-side forward that matches them.

``HFRolloutEngine`` samples with the policy's own transformers model and a KV cache (CPU or GPU; the decode
steps in ``training.decode_steps``), keeping each token's sampling log-probability (π_old = π_rollout) and,
when top-p/top-k truncates the vocabulary, the kept-token mask (DeepSeek-V3.2 "keep sampling mask"). A
completion ends at the first of the model's end tokens (``end_token_ids``: every EOS it declares and its chat
template's end-of-turn token) or once its text contains one of the run's stop strings (``StopStrings``); either
way that last token is part of the completion. ``training.rollout_vllm`` holds the vLLM engine (optional ``gpu``
extra); ``training.rollout_engines`` picks one by the run's ``rollout_engine``. ``sequence_logprobs`` is the
training forward (its layout in ``training.completion_forward``): the same prompts and completions, temperature
and (optionally) kept-token mask, so π_θ and π_old are comparable token by token.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol, Sequence

import torch
import torch.utils.checkpoint

from training.completion_forward import completion_states
from training.prefill import positions_from_mask
from training.decode_steps import BufferPool, HFSteps, decode_steps
from training.routing import RoutingRecorder


@dataclass
class RolloutBatch:
    """B sequences: left-padded prompts [B, P] followed by right-padded completions [B, T]."""

    prompt_ids: torch.Tensor        # [B, P] long, left-padded
    prompt_mask: torch.Tensor       # [B, P] long
    completion_ids: torch.Tensor    # [B, T] long, pad after the end
    completion_mask: torch.Tensor   # [B, T] float, 1 on generated tokens (the <eos> or stop string included)
    sampling_logp: torch.Tensor     # [B, T] float, log π_rollout of each sampled token
    truncated: torch.Tensor         # [B] bool, neither <eos> nor a stop string within max_new_tokens
    kept_mask: Optional[torch.Tensor] = None  # [B, T, V] bool, tokens top-p/top-k kept when sampling
    routing: Optional[dict] = None  # keep-routing: router module name -> [B, P+T, k] expert ids (-1 unknown)

    def index(self, idx: torch.Tensor) -> "RolloutBatch":
        pick = lambda t: None if t is None else t[idx]  # noqa: E731
        return RolloutBatch(self.prompt_ids[idx], self.prompt_mask[idx], self.completion_ids[idx],
                            self.completion_mask[idx], self.sampling_logp[idx], self.truncated[idx],
                            pick(self.kept_mask),
                            None if self.routing is None else {k: v[idx] for k, v in self.routing.items()})

    @property
    def lengths(self) -> torch.Tensor:
        return self.completion_mask.sum(-1).long()


class RolloutEngine(Protocol):
    def generate(self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float, top_p: float,
                 top_k: int, generator: torch.Generator, keep_sampling_mask: bool = False,
                 record_routing: bool = False, stop: Sequence[str] = (),
                 row_seeds: Optional[Sequence[int]] = None) -> RolloutBatch: ...

    def sync_weights(self, model) -> None: ...


def truncate_logits(logits: torch.Tensor, top_p: float, top_k: int) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
    """Apply top-k then top-p to [N, V] logits; returns (masked logits, kept mask or None when nothing cut)."""
    if top_k <= 0 and top_p >= 1.0:
        return logits, None
    keep = torch.ones_like(logits, dtype=torch.bool)
    if 0 < top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        keep &= logits >= kth
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits.masked_fill(~keep, float("-inf")), dim=-1, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        # keep a token when the mass strictly before it is < top_p (the top token is always kept)
        before = probs.cumsum(-1) - probs
        keep_sorted = before < top_p
        keep &= torch.zeros_like(keep).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf")), keep


def row_uniforms(row_seeds: Sequence[int], steps: int) -> torch.Tensor:
    """[B, steps] uniforms in (0, 1], row i drawn from its own generator seeded with ``row_seeds[i]``.

    A row's samples then depend on its seed alone, not on which other rows share its batch: the same groups give
    the same completions whether one process generates all of them or several ranks each generate a share
    (training.distributed), which is what makes a 2-rank step equal to a 1-rank step.
    """
    out = torch.empty((len(row_seeds), steps))
    for i, seed in enumerate(row_seeds):
        out[i] = torch.rand(steps, generator=torch.Generator().manual_seed(int(seed)))
    return 1.0 - out  # (0, 1]: never 0, so a leading zero-probability token can never be picked


def sample_inverse_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """One token per row of ``probs`` [B, V] (unnormalised is fine) from uniforms ``u`` [B] in (0, 1]: the first
    token whose cumulative mass reaches u·total. A zero-probability token is never chosen (its cumulative mass
    equals the token before it, which is reached first).

    >>> sample_inverse_cdf(torch.tensor([[0.0, 0.5, 0.0, 0.5]]), torch.tensor([0.5])).tolist()
    [1]
    >>> sample_inverse_cdf(torch.tensor([[0.0, 0.5, 0.0, 0.5]]), torch.tensor([0.51])).tolist()
    [3]
    """
    cdf = probs.cumsum(-1)
    target = (u * cdf[:, -1]).unsqueeze(-1)
    return torch.searchsorted(cdf, target).squeeze(-1).clamp_(max=probs.shape[-1] - 1)


# Tokens that close an assistant turn in common chat templates (ChatML as in SmolLM2 and Qwen, Llama 3, Gemma,
# Phi-3): a model that has ended its turn has ended its completion, whatever its tokenizer calls EOS.
END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>")


def end_token_ids(model, tokenizer) -> list[int]:
    """The token ids that end a completion: the tokenizer's EOS, every EOS of the model's generation config
    (Llama 3 and Qwen2.5 list several there), and the end-of-turn token its chat template writes, if any."""
    ids = {tokenizer.eos_token_id}
    declared = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids.update(declared if isinstance(declared, (list, tuple)) else [declared])
    template = getattr(tokenizer, "chat_template", None)
    for marker in END_OF_TURN if isinstance(template, str) else ():
        token_id = tokenizer.convert_tokens_to_ids(marker) if marker in template else None
        if isinstance(token_id, int) and token_id != tokenizer.unk_token_id:
            ids.add(token_id)
    return sorted(i for i in ids if isinstance(i, int))


class StopStrings:
    """Which still-running rows' completion text has just come to contain a stop string.

    Decoding every row's whole completion at every step would cost O(T^2) per row; a stop string completed by
    the newest token lies within the last ``window`` tokens (each token is at least one byte of text, plus one
    because a tokenizer may drop the leading space of the first token it decodes), so only those are decoded,
    and only for the rows still running.
    """

    def __init__(self, tokenizer, stop: Sequence[str]):
        self.tokenizer, self.stop = tokenizer, tuple(stop)
        self.window = max(len(s.encode("utf-8")) for s in self.stop) + 1

    def completed(self, tokens: list[torch.Tensor], running: torch.Tensor) -> torch.Tensor:
        """``tokens``: the [B] CPU tensors sampled so far; ``running``: [B] bool. Returns [B] bool."""
        hit = torch.zeros_like(running)
        rows = running.nonzero().flatten()
        if len(rows):
            tails = torch.stack(tokens[-self.window:], dim=1)[rows].tolist()
            texts = self.tokenizer.batch_decode(tails, skip_special_tokens=True)
            hit[rows] = torch.tensor([any(s in text for s in self.stop) for text in texts])
        return hit


#: the stepper drops the ended rows once the running ones are this share of those it computes or fewer (a
#: shrink copies the KV cache: not worth it for a row or two)
SHRINK_AT = 0.75


class HFRolloutEngine:
    """Batched sampling with the policy model itself (weights are always in sync)."""

    def __init__(self, model, tokenizer):
        self.model, self.tokenizer = model, tokenizer
        self.pad_id = tokenizer.pad_token_id
        self.end_ids = torch.tensor(end_token_ids(model, tokenizer))
        self.kv_buffers = BufferPool()  # a small model's KV buffers, kept from one generation to the next

    def sync_weights(self, model) -> None:  # same module object: nothing to push
        self.model = model

    def stepper(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, max_new_tokens: int, slots=None):
        """The prompts prefilled and the stepper that decodes on from them (``training.decode_steps``): (last
        logits [B, V], stepper). ``slots``: which seed of a packed group each row is (its engine's)."""
        return decode_steps(self.model, prompt_ids, prompt_mask, max_new_tokens, self.kv_buffers)

    @torch.no_grad()
    def generate(self, prompts, *, max_new_tokens, temperature, top_p, top_k, generator,
                 keep_sampling_mask=False, record_routing=False, stop=(), row_seeds=None, slots=None) -> RolloutBatch:
        """Sample one completion per prompt. With ``row_seeds`` (one per prompt), row i's tokens come from its
        own uniforms (``row_uniforms``): batch-independent; else from ``generator`` over the whole batch.
        ``temperature``: a number, or a [B, 1] tensor (each row its own: the seeds of a packed group)."""
        model, dev = self.model, next(self.model.parameters()).device
        noise = row_uniforms(row_seeds, max_new_tokens) if row_seeds is not None else None
        stopper = StopStrings(self.tokenizer, stop) if stop else None
        was_training = model.training
        model.eval()
        B, P = len(prompts), max(map(len, prompts))
        prompt_ids = torch.full((B, P), self.pad_id, dtype=torch.long)
        prompt_mask = torch.zeros((B, P), dtype=torch.long)
        for i, p in enumerate(prompts):
            prompt_ids[i, P - len(p):] = torch.tensor(p)
            prompt_mask[i, P - len(p):] = 1
        prompt_ids, prompt_mask = prompt_ids.to(dev), prompt_mask.to(dev)
        recorder = RoutingRecorder(model) if record_routing else None
        if record_routing:  # the recorder expects one router call covering every row's prompt, and every row after
            out = model(input_ids=prompt_ids, attention_mask=prompt_mask,
                        position_ids=positions_from_mask(prompt_mask), use_cache=True)
            steps, logits = HFSteps(model, out.past_key_values, prompt_mask), out.logits[:, -1].float()
        else:
            logits, steps = self.stepper(prompt_ids, prompt_mask, max_new_tokens, slots)
            logits = logits.float()
        tokens, logps, kept = [], [], []
        # which rows have ended, and at which step: on the CPU, where the tokens are sampled and stops checked
        done = torch.zeros(B, dtype=torch.bool)
        end = torch.full((B,), max_new_tokens, dtype=torch.long)
        fed = torch.arange(B)  # the rows the stepper still computes, in its order (ended rows leave it in bulk)
        for t in range(max_new_tokens):
            scaled, keep = truncate_logits(logits / temperature, top_p, top_k)
            logp_all = torch.log_softmax(scaled, dim=-1)
            # sampling on CPU with our generator keeps runs reproducible across devices; every row draws (an ended
            # row's draw is discarded), so a row's tokens do not depend on when the others end
            if noise is None:
                tok = torch.multinomial(logp_all.exp().cpu(), 1, generator=generator).squeeze(1)
            else:
                tok = sample_inverse_cdf(logp_all.exp().cpu(), noise[:, t])
            tok = tok.masked_fill(done, self.pad_id)
            tokens.append(tok)
            tok_dev, done_dev = tok.to(dev), done.to(dev)
            logps.append(logp_all.gather(-1, tok_dev[:, None]).squeeze(1).masked_fill(done_dev, 0.0))
            if keep_sampling_mask and keep is not None:
                kept.append(keep)
            ended = ~done & torch.isin(tok, self.end_ids)
            if stopper is not None:
                ended |= stopper.completed(tokens, ~done & ~ended)
            end[ended] = t
            done |= ended
            if bool(done.all()) or t == max_new_tokens - 1:
                break
            running = ~done[fed]
            if recorder is None and int(running.sum()) <= SHRINK_AT * len(fed):
                steps.keep(running.nonzero().flatten().to(dev))
                fed = fed[running]
            if len(fed) == B:
                logits = steps.step(tok_dev).float()
            else:  # the ended rows keep stale logits: their draws are discarded
                rows = fed.to(dev)
                logits[rows] = steps.step(tok_dev[rows]).float()
        completion_ids = torch.stack(tokens, dim=1).to(dev)
        # a token is part of the completion until and including the one that ended it (an end token, or the
        # token that completed a stop string)
        completion_mask = (torch.arange(len(tokens))[None, :] <= end[:, None]).float().to(dev)
        truncated = (~done).to(dev)
        kept_mask = None
        if keep_sampling_mask and kept:
            kept_mask = torch.stack(kept, dim=1)
        routing = None
        if recorder is not None:
            routing = recorder.finish(B, P + completion_ids.shape[1])
        if was_training:
            model.train()
        return RolloutBatch(prompt_ids, prompt_mask, completion_ids, completion_mask,
                            torch.stack(logps, dim=1), truncated, kept_mask, routing)


def sequence_logprobs(model, batch: RolloutBatch, *, temperature: float, use_kept_mask: bool = False,
                      with_entropy: bool = False, checkpoint: bool = False):
    """Training forward: log π_θ of each completion token, [B, T] (and per-token entropy when asked).

    Logits are divided by the sampling temperature so π_θ is the distribution that was sampled from; with
    ``use_kept_mask`` they are renormalised over the tokens top-p/top-k kept (keep sampling mask).

    Memory (docs/architecture.md, "The training core"): for a model whose output layer is a plain linear head
    (``head_of``), the decoder's hidden states go through the head in chunks of positions (``token_logprobs``),
    so no float32 [B, T, V] logits tensor is ever made whole; under ``torch.no_grad`` (the reference pass) each
    chunk's logits are dropped as soon as its log-probs are taken. ``checkpoint``: activation checkpointing of
    the decoder layers (recomputed in the backward) and of the head's chunks; the prompt then runs with its
    completion in one forward (checkpointed layers keep no KV cache), the same math.
    """
    mask = torch.cat([batch.prompt_mask, batch.completion_mask.long()], dim=1)
    P, T = batch.prompt_ids.shape[1], batch.completion_ids.shape[1]
    head = head_of(model)
    kept = kept_tokens(batch) if use_kept_mask else None
    with checkpointed(model, checkpoint and torch.is_grad_enabled()):
        if head is None:  # a head with extras (soft-capping, scaling, FSDP-sharded root): the model's own logits
            hidden, head_fn = _full_logits(model, batch, mask, P, T), None
        else:
            hidden, head_fn = _decoder_hidden(model, batch, mask, P, T, full=checkpoint), head
    return token_logprobs(hidden, head_fn, batch.completion_ids, temperature=temperature, kept=kept,
                          with_entropy=with_entropy, checkpoint=checkpoint and torch.is_grad_enabled())


def kept_tokens(batch: RolloutBatch) -> Optional[torch.Tensor]:
    """The keep-sampling-mask as the training forward reads it (None when sampling truncated nothing): positions
    after a completion's end keep the whole vocabulary, so no -inf reaches the (masked) loss terms."""
    if batch.kept_mask is None:
        return None
    return batch.kept_mask | (batch.completion_mask[..., None] == 0)


# model types whose causal-LM forward is exactly ``lm_head(decoder(...).last_hidden_state)``
PLAIN_HEAD_MODELS = frozenset({"llama", "mistral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "smollm3", "olmo2"})


def head_of(model):
    """The model's output layer when logits are a plain ``Linear`` of the decoder's last hidden state (the
    chunked path can then apply it itself), else None. FSDP2-sharded models always take the model's own
    forward (its root holds the head's shard, gathered by the root's forward hook)."""
    from torch.distributed.fsdp import FSDPModule

    config = getattr(model, "config", None)
    if isinstance(model, FSDPModule) or getattr(config, "model_type", None) not in PLAIN_HEAD_MODELS:
        return None
    if getattr(config, "final_logit_softcapping", None) or getattr(config, "logit_scale", None):
        return None
    head = model.get_output_embeddings()
    return head if type(head) is torch.nn.Linear else None


def _decoder_hidden(model, batch: RolloutBatch, mask: torch.Tensor, P: int, T: int, *, full: bool) -> torch.Tensor:
    """The decoder's last hidden state at the positions that predict each completion token, [B, T, H]: each
    distinct prompt once, then the completions without their last token or padding (``completion_states``), or
    (``full``, or keep routing, which replays one expert choice per row and position) prompt and completion in one
    forward."""
    decoder = model.get_decoder()
    if batch.routing is None and not full:
        return completion_states(decoder, batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.lengths,
                                 hidden=True)
    ids = torch.cat([batch.prompt_ids, batch.completion_ids], dim=1)
    out = decoder(input_ids=ids, attention_mask=mask, position_ids=positions_from_mask(mask), use_cache=False)
    return out.last_hidden_state[:, P - 1:P + T - 1]


def _full_logits(model, batch: RolloutBatch, mask: torch.Tensor, P: int, T: int) -> torch.Tensor:
    """The model's own logits at the positions that predict each completion token, [B, T, V] (zeros where they
    predict padding, as ``completion_states``). An FSDP2-sharded model is called exactly once whatever the
    rows (``single_call``): every rank must make the same collectives."""
    from torch.distributed.fsdp import FSDPModule

    if batch.routing is None:
        return completion_states(model, batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.lengths,
                                 hidden=False, single_call=isinstance(model, FSDPModule))
    ids = torch.cat([batch.prompt_ids, batch.completion_ids], dim=1)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions_from_mask(mask)).logits
    return logits[:, P - 1:P + T - 1]


class checkpointed:
    """Activation checkpointing of the model's layers while in the block (transformers'
    ``activation_checkpointing_enable``), off again after it: sampling needs the KV cache it disables."""

    def __init__(self, model, on: bool):
        self.model, self.on = model, on and hasattr(model, "activation_checkpointing_enable")

    def __enter__(self):
        if self.on:
            self.model.activation_checkpointing_enable({"use_reentrant": False})

    def __exit__(self, *exc):
        if self.on:
            self.model.activation_checkpointing_disable()


#: rows of the head's output computed at once: 2^22 logits (16 MB in float32) whatever the vocabulary
CHUNK_LOGITS = 1 << 22


def token_logprobs(hidden: torch.Tensor, head, targets: torch.Tensor, *, temperature: float,
                   kept: Optional[torch.Tensor] = None, with_entropy: bool = False, checkpoint: bool = False,
                   chunk_logits: int = CHUNK_LOGITS):
    """log π(target) and the entropy of π per position, computed over chunks of positions.

    π = softmax(z / τ) with z = head(h) (``head`` None: ``hidden`` already holds the logits z), restricted to
    the ``kept`` tokens when given. Per chunk of rows: log π = z/τ − logsumexp(z/τ) (``log_softmax``), the
    target's entry gathered, and H = −Σ_v π_v log π_v (a metric: no gradient). Only the chunks' log-softmax
    outputs are kept for the backward (``checkpoint``: not even those, each chunk's logits are recomputed
    there), so a float32 [B, T, V] tensor never exists beside its softmax, and without gradients nothing of a
    chunk outlives it. Shapes: ``hidden`` [B, T, H] (or [B, T, V] logits), ``targets`` [B, T], ``kept``
    [B, T, V] bool; returns (logp [B, T], entropy [B, T] or None).
    """
    B, T = targets.shape
    h = hidden.reshape(B * T, hidden.shape[-1])
    tgt = targets.reshape(B * T, 1)
    keep = None if kept is None else kept.reshape(B * T, -1)
    vocab = head.out_features if head is not None else hidden.shape[-1]
    rows = max(1, chunk_logits // vocab)
    logps, entropies = [], []
    for i in range(0, B * T, rows):
        args = (head, temperature, with_entropy, h[i:i + rows], tgt[i:i + rows],
                None if keep is None else keep[i:i + rows])
        logp, entropy = (torch.utils.checkpoint.checkpoint(_chunk_logp, *args, use_reentrant=False) if checkpoint
                         else _chunk_logp(*args))
        logps.append(logp)
        entropies.append(entropy)
    logp = torch.cat(logps).view(B, T)
    return logp, (torch.cat(entropies).view(B, T) if with_entropy else None)


def _chunk_logp(head, temperature: float, with_entropy: bool, h: torch.Tensor, tgt: torch.Tensor,
                keep: Optional[torch.Tensor]):
    """One chunk of ``token_logprobs``: log π of the targets [rows] and the entropy [rows] (or None)."""
    logits = h if head is None else head_logits(head, h)
    # half precision is upcast for the softmax; float32 and float64 stay as they are
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32)) / temperature
    if keep is not None:
        logits = logits.masked_fill(~keep, float("-inf"))
    logp_all = torch.log_softmax(logits, dim=-1)
    del logits
    logp = logp_all.gather(-1, tgt).squeeze(-1)
    entropy = None
    if with_entropy:
        with torch.no_grad():  # a metric only: keep it out of the autograd graph
            p = logp_all.exp()
            entropy = -(p * logp_all.masked_fill(p == 0, 0.0)).sum(-1)
    return logp, entropy


def head_logits(head: torch.nn.Linear, h: torch.Tensor) -> torch.Tensor:
    """``head(h)``; for a head marked ``grad_in_place`` (``training.distributed.head_grad_in_place``), a bias-free
    one whose weight trains in its own dtype (no autocast), through ``HeadGradInPlace``: the same logits, and the
    backward adds the weight's gradient into ``weight.grad`` itself."""
    w = head.weight
    if (getattr(head, "grad_in_place", False) and torch.is_grad_enabled() and w.requires_grad and head.bias is None
            and h.dtype == w.dtype and not torch.is_autocast_enabled(h.device.type)):
        return HeadGradInPlace.apply(h, w)
    return head(h)


class HeadGradInPlace(torch.autograd.Function):
    """z = h Wᵀ (one chunk of rows) whose backward accumulates dL/dW = (dL/dz)ᵀ h into ``W.grad`` in place, chunk
    after chunk and micro-batch after micro-batch (``addmm_``; the first one makes ``W.grad``), and hands autograd
    no gradient for W: no fresh [V, H] tensor per backward, held until the parameter's other uses (a tied input
    embedding) are reached, then added (0.11 GB on SmolLM2; docs/architecture.md, "The training core"). The same
    products as ``Linear``'s own backward; only the order of the sums into ``W.grad`` can differ (several chunks:
    G + H1, then + H2, not G + (H1 + H2); a tied sparse embedding's rows: (G + H) + E, not G + (H + E)). Hooks on W see nothing of it: one process only (DDP and FSDP
    reduce what autograd hands them)."""

    @staticmethod
    def forward(ctx, h, weight):
        ctx.save_for_backward(h, weight)
        ctx.weight = weight  # the parameter itself, whose .grad is written
        return torch.nn.functional.linear(h, weight)

    @staticmethod
    def backward(ctx, grad):
        h, weight = ctx.saved_tensors
        param = ctx.weight
        if param.grad is None:
            param.grad = grad.t().mm(h)
        else:
            param.grad.addmm_(grad.t(), h)
        return (grad.mm(weight) if ctx.needs_input_grad[0] else None), None


def concat_batches(parts: list[RolloutBatch]) -> RolloutBatch:
    """Stack rollout batches of different prompt/completion widths (prompts left-, completions right-padded)."""
    if len(parts) == 1:
        return parts[0]
    P = max(p.prompt_ids.shape[1] for p in parts)
    T = max(p.completion_ids.shape[1] for p in parts)

    def left(t, width, value):
        return torch.nn.functional.pad(t, (width - t.shape[1], 0), value=value)

    def right(t, width, value):
        pad = (0, 0, 0, width - t.shape[1]) if t.dim() == 3 else (0, width - t.shape[1])
        return torch.nn.functional.pad(t, pad, value=value)

    pad_id = 0  # masked out everywhere it appears
    kept = None
    if parts[0].kept_mask is not None:
        kept = torch.cat([right(p.kept_mask, T, True) for p in parts])
    routing = None
    if parts[0].routing is not None:
        routing = {}
        for name in parts[0].routing:
            chunks = []
            for p in parts:
                r = p.routing[name]
                pp, tt = p.prompt_ids.shape[1], p.completion_ids.shape[1]
                prompt_r = torch.nn.functional.pad(r[:, :pp], (0, 0, P - pp, 0), value=-1)
                comp_r = torch.nn.functional.pad(r[:, pp:pp + tt], (0, 0, 0, T - tt), value=-1)
                chunks.append(torch.cat([prompt_r, comp_r], dim=1))
            routing[name] = torch.cat(chunks)
    return RolloutBatch(
        torch.cat([left(p.prompt_ids, P, pad_id) for p in parts]),
        torch.cat([left(p.prompt_mask, P, 0) for p in parts]),
        torch.cat([right(p.completion_ids, T, pad_id) for p in parts]),
        torch.cat([right(p.completion_mask, T, 0.0) for p in parts]),
        torch.cat([right(p.sampling_logp, T, 0.0) for p in parts]),
        torch.cat([p.truncated for p in parts]), kept, routing)
