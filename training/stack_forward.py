"""The forwards of a packed group (docs/architecture.md#packed-seeds): the Llama-family decoder of
``training.decode_steps.LeanLlamaSteps`` written over the seed dimension of a ``training.seed_stack.SeedStack``.

Activations are [K, n, s, H] (K seeds, n sequences each, s positions); every projection is one batched product
over the seeds (``torch.bmm`` of [K, n·s, in] by each seed's [K, in, out]), the norms take each seed's weights,
the embedding reads each seed's table (its padding token's row gets no gradient, as in ``nn.Embedding``), and
the attention runs over the K·n sequences at once, with the masks a solo forward builds (attention never crosses
sequences, so never seeds). A seed's outputs are the ones its own model computes, to the rounding of a matrix
product blocked over another number of rows.

- ``StackDecoder``: the batched decoder, with or without key/value buffers;
- ``stack_logprobs``: the training forward of several seeds' micro-batches in one call, each seed's completions
  in the packs of ``training.completion_forward.pack_layout`` (every row on its own when a pack would be too
  long), padded to a common shape, then log π and the entropy per seed (``training.rollout.token_logprobs``);
- ``StackSteps``: the sampler's stepper (``prefill``, ``step``, ``keep``) for rows of several seeds, so the HF
  rollout engine samples every seed's completions in one decode loop.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
import torch.utils.checkpoint

from training.completion_forward import pack_layout
from training.decode_steps import rotate
from training.prefill import distinct_prompts, positions_from_mask


class StackDecoder:
    """The decoder of ``stack``'s ``slots`` (in that order), their weights from ``SeedStack.weights``; with
    ``fuse`` the q, k, v projections are one product and the gate and up another (their weights concatenated: a
    copy, through which gradients still reach each)."""

    def __init__(self, stack, slots: list[int], *, fuse: bool = False, checkpoint: bool = False):
        self.stack, self.slots, self.checkpoint = stack, list(slots), checkpoint
        self.w = stack.weights(self.slots)
        cfg = stack.template.config
        self.heads, self.kv = cfg.num_attention_heads, cfg.num_key_value_heads
        self.d = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.eps, self.n_layers = cfg.rms_norm_eps, cfg.num_hidden_layers
        self.rotary = stack.template.get_decoder().rotary_emb
        self.padding_idx = stack.template.get_input_embeddings().padding_idx
        # a tied table's head gradient goes in place (SeedHead), its embedding's through autograd: both in place on
        # one table summed wrongly over micro-batches (a packed seed's gradient off its solo run's at step 3)
        self.tied = stack.names.get("lm_head.weight") == "model.embed_tokens.weight"
        self.fused = [self._fuse(i) for i in range(self.n_layers)] if fuse else None

    def get(self, name: str):
        return self.stack.weight(self.w, name)

    def _proj(self, i: int, part: str):
        prefix = f"model.layers.{i}.{part}"
        return self.get(prefix + ".weight"), self.get(prefix + ".bias")

    def _fuse(self, i: int):
        out = []
        for names in (("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"), ("mlp.gate_proj", "mlp.up_proj")):
            parts = [self._proj(i, n) for n in names]
            if len({b is None for _, b in parts}) > 1:
                return None
            out.append((torch.cat([w for w, _ in parts], dim=1),
                        None if parts[0][1] is None else torch.cat([b for _, b in parts], dim=1)))
        return out

    def norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        """Llama's RMSNorm with each seed's weight: w · x / sqrt(mean(x²) + ε), computed in float32 (one fused
        kernel for float32 input)."""
        w = self.get(name)[:, None, None, :]
        if x.dtype == torch.float32:
            return w * F.rms_norm(x, (x.shape[-1],), None, self.eps)
        x32 = x.float()
        return w * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)

    def forward(self, ids: torch.Tensor, pos: torch.Tensor, visible: torch.Tensor, cache=None) -> torch.Tensor:
        """Tokens ``ids`` [K, n, s] at positions ``pos`` [K·n, s]; ``visible`` [K·n, 1, s, keys] bool. With
        ``cache`` [keys, values, t, width] (buffers [K·n, kv heads, width, d], made at the first call; t the columns
        written so far) the new keys
        and values go into columns t .. t + s and the queries attend to columns 0 .. t + s; else to themselves.
        Returns the final-normed hidden states [K, n, s, H]."""
        K, n, s = ids.shape
        table = self.stack.weight(self.stack.stacked, "model.embed_tokens.weight")  # the stacked [slots, V, H]
        V = table.shape[1]
        offsets = torch.tensor(self.slots, device=ids.device)[:, None, None] * V
        x = embed_rows(ids + offsets, table, None if self.padding_idx is None else ids == self.padding_idx,
                       in_place=not self.tied)
        cos, sin = self.rotary(x.view(K * n, s, -1), pos)
        cos, sin = cos[:, None], sin[:, None]
        for i in range(self.n_layers):
            if self.checkpoint and cache is None and torch.is_grad_enabled():
                x = torch.utils.checkpoint.checkpoint(self.layer, i, x, cos, sin, visible, None, use_reentrant=False)
            else:
                x = self.layer(i, x, cos, sin, visible, cache)
        if cache is not None:
            cache[2] += s
        return self.norm(x, "model.norm.weight")

    def layer(self, i: int, x, cos, sin, visible, cache):
        K, n, s, _ = x.shape
        d, heads, kv, prefix = self.d, self.heads, self.kv, f"model.layers.{i}."
        h = self.norm(x, prefix + "input_layernorm.weight")
        if self.fused is not None and self.fused[i] is not None:
            qkv = bmm(h, *self.fused[i][0]).view(K * n, s, -1, d).transpose(1, 2)
            qk = rotate(qkv[:, :heads + kv], cos, sin)
            q, k, v = qk[:, :heads], qk[:, heads:], qkv[:, heads + kv:]
        else:
            q = rotate(bmm(h, *self._proj(i, "self_attn.q_proj")).view(K * n, s, heads, d).transpose(1, 2), cos, sin)
            k = rotate(bmm(h, *self._proj(i, "self_attn.k_proj")).view(K * n, s, kv, d).transpose(1, 2), cos, sin)
            v = bmm(h, *self._proj(i, "self_attn.v_proj")).view(K * n, s, kv, d).transpose(1, 2)
        if cache is not None:
            keys, values, t, width = cache
            if keys[i] is None:  # the prefill: buffers in the dtype the projections give (autocast's)
                keys[i] = k.new_empty((K * n, kv, width, d))
                values[i] = v.new_empty((K * n, kv, width, d))
            keys[i][:, :, t:t + s], values[i][:, :, t:t + s] = k, v
            k, v = keys[i][:, :, :t + s], values[i][:, :, :t + s]
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=visible, scale=d ** -0.5, enable_gqa=heads != kv)
        x = x + bmm(o.transpose(1, 2).reshape(K, n, s, heads * d), *self._proj(i, "self_attn.o_proj"))
        h = self.norm(x, prefix + "post_attention_layernorm.weight")
        if self.fused is not None and self.fused[i] is not None:
            gate, up = bmm(h, *self.fused[i][1]).chunk(2, dim=-1)
        else:
            gate, up = bmm(h, *self._proj(i, "mlp.gate_proj")), bmm(h, *self._proj(i, "mlp.up_proj"))
        return x + bmm(F.silu(gate) * up, *self._proj(i, "mlp.down_proj"))

    def head(self) -> torch.Tensor:
        """The output layer's weights [K, V, H] (the embedding's when tied)."""
        return self.get("lm_head.weight")

    def seed_head(self, j: int) -> "SeedHead":
        """Seed j's output layer for ``token_logprobs``, its weight gradient accumulated in place."""
        return SeedHead(self.stack.weight(self.stack.stacked, "lm_head.weight"), self.slots[j])


#: the training forward fuses the q/k/v and gate/up projections (one product each, their weights concatenated every
#: forward: fewer, larger calls) while the copies take at most this many bytes
FUSE_MAX_BYTES = 64 << 20


def fused_fits(stack, seeds: int) -> bool:
    """Whether ``seeds`` seeds' fused projection weights (and their gradients) stay within ``FUSE_MAX_BYTES``."""
    names = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")
    per_seed = sum(w[0].numel() * w.element_size() for name, w in stack.stacked.items()
                   if any(f".{n}." in name for n in names))
    return 2 * seeds * per_seed <= FUSE_MAX_BYTES


def bmm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    """Each seed's linear layer: x [K, …, in] by w [K, out, in] (+ b [K, out]) -> [K, …, out]."""
    K, shape = x.shape[0], x.shape[1:-1]
    flat = x.reshape(K, -1, x.shape[-1])
    y = torch.bmm(flat, w.transpose(1, 2)) if b is None else torch.baddbmm(b[:, None], flat, w.transpose(1, 2))
    return y.view(K, *shape, w.shape[1])


def embed_rows(rows: torch.Tensor, table: torch.Tensor, padding: torch.Tensor | None, *,
               in_place: bool = True) -> torch.Tensor:
    """Rows ``rows`` (slot · V + token) of the stacked embedding ``table`` [slots, V, H]; with gradients and
    ``in_place``, through ``EmbedGradInPlace`` (its gradient added into ``table.grad`` in place: no dense
    [slots, V, H] tensor per backward), else autograd's; ``padding`` [same shape as rows]: positions whose token is
    the padding token, whose row gets no gradient (as ``nn.Embedding(padding_idx)``'s)."""
    if torch.is_grad_enabled() and table.requires_grad and in_place:
        return EmbedGradInPlace.apply(rows, table, padding)
    x = F.embedding(rows, table.reshape(-1, table.shape[-1]))
    if padding is not None and torch.is_grad_enabled():
        x = torch.where(padding[..., None], x.detach(), x)
    return x


class EmbedGradInPlace(torch.autograd.Function):
    """The stacked embedding's lookup whose backward index-adds the rows' gradients into ``table.grad`` (made once
    per optimizer step) and hands autograd none for the table: the sparse gradient a solo run's tied embedding
    takes (``training.distributed.sparse_tied_embedding``), here for every seed's slice."""

    @staticmethod
    def forward(ctx, rows, table, padding):
        ctx.save_for_backward(rows if padding is None else rows[~padding])
        ctx.table, ctx.padding = table, padding
        return F.embedding(rows, table.reshape(-1, table.shape[-1]))

    @staticmethod
    def backward(ctx, grad):
        (rows,) = ctx.saved_tensors
        g = grad if ctx.padding is None else grad[~ctx.padding]
        stacked_grad(ctx.table).view(-1, ctx.table.shape[-1]).index_add_(
            0, rows.reshape(-1), g.reshape(-1, g.shape[-1]).to(ctx.table.dtype))
        return None, None, None


def stacked_grad(table: torch.Tensor) -> torch.Tensor:
    """``table.grad``, made (zeros) by the first in-place gradient of an optimizer step."""
    if table.grad is None:
        table.grad = torch.zeros_like(table)
    return table.grad


class SeedHead:
    """One seed's output layer for ``token_logprobs``: a bias-free linear map by slot ``slot`` of the stacked
    [slots, V, H] weights, whose weight gradient goes into the stacked ``.grad`` in place (``HeadGradInPlace``
    for one slot) where the weights train in the input's dtype (no autocast), else through autograd."""

    grad_in_place = False

    def __init__(self, table: torch.Tensor, slot: int):
        self.table, self.slot, self.out_features = table, slot, table.shape[1]
        self.weight = table[slot]

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        if (torch.is_grad_enabled() and self.table.requires_grad and h.dtype == self.table.dtype
                and not torch.is_autocast_enabled(h.device.type)):
            return SlotHeadGradInPlace.apply(h, self.table, self.slot)
        return F.linear(h, self.weight)


class SlotHeadGradInPlace(torch.autograd.Function):
    """z = h · W[slot]ᵀ whose backward adds (dL/dz)ᵀ h into ``W.grad[slot]`` in place (``addmm_``) and hands
    autograd no gradient for W (``training.rollout.HeadGradInPlace``, for a slot of the stack)."""

    @staticmethod
    def forward(ctx, h, table, slot):
        ctx.save_for_backward(h)
        ctx.table, ctx.slot = table, slot
        return F.linear(h, table[slot])

    @staticmethod
    def backward(ctx, grad):
        (h,) = ctx.saved_tensors
        stacked_grad(ctx.table)[ctx.slot].addmm_(grad.t(), h)
        return (grad.mm(ctx.table[ctx.slot]) if ctx.needs_input_grad[0] else None), None, None


def sequences_of(batch, max_tokens: int | None = None):
    """A micro-batch's training sequences (``pack_layout``: one pack per distinct prompt, or, when a pack would be
    longer than ``max_tokens``, ``PACK_MAX_TOKENS`` unless given, every row on its own) as (ids [U, S], pos [U, S], sees [U, S, S], where [B, T])."""
    fed = (batch.lengths.long() - 1).clamp(min=0, max=max(batch.completion_ids.shape[1] - 1, 0)).tolist()
    layout = pack_layout(batch.prompt_ids, batch.prompt_mask, batch.completion_ids, fed, max_tokens)
    if layout is not None:
        return layout
    rows = [pack_layout(batch.prompt_ids[r:r + 1], batch.prompt_mask[r:r + 1], batch.completion_ids[r:r + 1],
                        fed[r:r + 1], max_tokens=1 << 30) for r in range(len(fed))]
    return join_layouts(rows)


def join_layouts(layouts: list) -> tuple:
    """Layouts of ``pack_layout`` as one: each padded to the widest S (padding sees itself, at position 0), their
    sequences stacked, each ``where`` re-pointed into the joined flat states (U·S the zeros row)."""
    S = max(ids.shape[1] for ids, _, _, _ in layouts)
    U = sum(ids.shape[0] for ids, _, _, _ in layouts)
    all_ids, all_pos, all_sees, all_where, before = [], [], [], [], 0
    for ids, pos, sees, where in layouts:
        u, s = ids.shape
        all_ids.append(F.pad(ids, (0, S - s)))
        all_pos.append(F.pad(pos, (0, S - s)))
        wide = torch.eye(S, dtype=torch.bool).repeat(u, 1, 1)
        wide[:, :s, :s] = sees
        all_sees.append(wide)
        blank = where == u * s
        moved = (before + where // s) * S + where % s
        all_where.append(torch.where(blank, torch.full_like(where, -1), moved))
        before += u
    where = torch.cat(all_where) if all(w.shape[1] == all_where[0].shape[1] for w in all_where) else None
    if where is None:
        raise ValueError("join_layouts: layouts of one batch have one completion width")
    where[where < 0] = U * S
    return torch.cat(all_ids), torch.cat(all_pos), torch.cat(all_sees), where


def stack_logprobs(stack, parts: list, *, checkpoint: bool = False, max_tokens: int | None = None) -> list:
    """The training forward of several seeds at once: ``parts`` = [(slot, micro-batch, temperature, kept mask or
    None)], at most one per slot; returns [(log π [B, T], entropy [B, T])] in the same order (as
    ``training.rollout.sequence_logprobs(..., with_entropy=True)`` of each slot's own model)."""
    from training.rollout import token_logprobs

    layouts = [sequences_of(batch, max_tokens) for _, batch, _, _ in parts]
    U = max(ids.shape[0] for ids, _, _, _ in layouts)
    S = max(ids.shape[1] for ids, _, _, _ in layouts)
    K, dev = len(parts), parts[0][1].completion_ids.device
    ids = torch.zeros((K, U, S), dtype=torch.long)
    pos = torch.zeros((K, U, S), dtype=torch.long)
    sees = torch.eye(S, dtype=torch.bool).repeat(K, U, 1, 1)
    for j, (i, p, v, _) in enumerate(layouts):
        u, s = i.shape
        ids[j, :u, :s], pos[j, :u, :s], sees[j, :u, :s, :s] = i, p, v
    decoder = StackDecoder(stack, [slot for slot, _, _, _ in parts], checkpoint=checkpoint,
                           fuse=fused_fits(stack, len(parts)))
    hidden = decoder.forward(ids.to(dev), pos.view(K * U, S).to(dev), sees.view(K * U, 1, S, S).to(dev))
    out = []
    for j, ((_, batch, temperature, kept), (i, _, _, where)) in enumerate(zip(parts, layouts)):
        u, s = i.shape
        own = hidden[j, :u, :s].reshape(u * s, -1)
        flat = torch.cat([own, own.new_zeros((1, own.shape[-1]))])
        states = flat[where.to(dev)]
        out.append(token_logprobs(states, decoder.seed_head(j), batch.completion_ids, temperature=temperature,
                                  kept=kept, with_entropy=True, checkpoint=checkpoint and torch.is_grad_enabled()))
    return out
