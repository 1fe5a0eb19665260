"""One sampling step after another: the next-token logits of the rows still being decoded.

``HFRolloutEngine.generate`` prefills the prompts with the model's own forward, then asks a *stepper* for each
next token's logits. Two steppers, one interface (``step``: the logits after feeding one token per row; ``keep``:
drop the rows that have ended, so the batch a step computes shrinks as completions end):

- ``HFSteps``: the model's own forward and KV cache (any architecture);
- ``LeanLlamaSteps``: the same decoder layers written out as plain tensor calls over preallocated key/value
  buffers, the prompts' prefill included, for the Llama family (``lean_decode_supported``). A decode step of a
  small model is mostly fixed cost (module calls, mask building, the cache's concatenations), not arithmetic:
  this does the arithmetic alone. Its logits equal the model's forward (tests/training/test_decode_steps.py),
  so π_rollout is the policy's π.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from training.prefill import distinct_prompts, llama_family, positions_from_mask, shared_prefill


def lean_decode_supported(model, context: int) -> bool:
    """Whether ``LeanLlamaSteps`` computes exactly what ``model`` does for sequences of ``context`` tokens."""
    if not llama_family(getattr(model, "config", None), context) or getattr(model, "hf_quantizer", None) is not None:
        return False
    head = model.get_output_embeddings()
    return type(head) is torch.nn.Linear and not getattr(model.config, "final_logit_softcapping", None)


class HFSteps:
    """The model's own forward with its own KV cache."""

    def __init__(self, model, cache, prompt_mask: torch.Tensor):
        self.model, self.cache = model, cache
        self.attn, self.pos = prompt_mask, positions_from_mask(prompt_mask)[:, -1:]

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        self.attn = torch.cat([self.attn, self.attn.new_ones((self.attn.shape[0], 1))], dim=1)
        self.pos = self.pos + 1
        out = self.model(input_ids=tokens[:, None], attention_mask=self.attn, position_ids=self.pos,
                         past_key_values=self.cache, use_cache=True)
        self.cache = out.past_key_values
        return out.logits[:, -1]

    def keep(self, idx: torch.Tensor) -> None:
        for layer in self.cache.layers:
            layer.batch_select_indices(idx)
        self.attn, self.pos = self.attn[idx], self.pos[idx]


#: key/value buffers up to this many bytes in all are kept from one generation to the next (``BufferPool``)
POOL_MAX_BYTES = 64 << 20


class BufferPool:
    """Tensors an engine keeps between generations, by name, up to ``POOL_MAX_BYTES`` in all. A fresh buffer is
    a page fault per 4 KiB on its first write: for a small model's few-MiB KV cache that is a tenth of the
    sampling time; a larger model's cache is allocated afresh (its arithmetic dwarfs the faults, and its
    training step wants the memory)."""

    def __init__(self):
        self.held: dict = {}

    def take(self, name, shape: tuple, dtype, device, fresh: bool = True) -> torch.Tensor | None:
        """A [shape] tensor under ``name`` (its content whatever was left there); past the pool's bytes a fresh
        one, or None when not ``fresh``."""
        numel = 1
        for n in shape:
            numel *= n
        buf = self.held.get(name)
        if buf is None or buf.numel() < numel or buf.dtype != dtype or buf.device != torch.device(device):
            others = sum(t.numel() * t.element_size() for key, t in self.held.items() if key != name)
            if others + numel * torch.empty((), dtype=dtype).element_size() > POOL_MAX_BYTES:
                return torch.empty(shape, dtype=dtype, device=device) if fresh else None
            buf = self.held[name] = torch.empty(numel, dtype=dtype, device=device)
        return buf[:numel].view(shape)


class LeanLlamaSteps:
    """Llama-family prefill and decode steps over key/value buffers [B, kv heads, P + new tokens, head dim]: the
    distinct prompts run once (``prefill``) and their columns are fanned out to every row, then each step writes
    one column in place; the attention reads the columns written so far, with the prompt's padding masked."""

    def __init__(self, model, max_new_tokens: int, pool: BufferPool | None = None):
        self.model, self.decoder, self.max_new_tokens = model, model.get_decoder(), max_new_tokens
        self.pool = pool or BufferPool()
        self.fused = [self._fuse(i, layer) for i, layer in enumerate(self.decoder.layers)]

    def _fuse(self, i: int, layer):
        """The layer's q, k, v projections as one matrix and its gate and up projections as another, copied into
        the pool (fewer, larger products: at a decode step's few rows each product is mostly fixed cost); None
        where the copies would not fit the pool or the projections' biases differ in kind."""
        attn, mlp = layer.self_attn, layer.mlp
        parts = ((attn.q_proj, attn.k_proj, attn.v_proj), (mlp.gate_proj, mlp.up_proj))
        fused = []
        for j, linears in enumerate(parts):
            if len({lin.bias is None for lin in linears}) > 1:
                return None
            weights = [lin.weight for lin in linears]
            shape = (sum(w.shape[0] for w in weights), weights[0].shape[1])
            out = self.pool.take(("fused", i, j), shape, weights[0].dtype, weights[0].device, fresh=False)
            if out is None:  # past the pool's bytes: a fresh copy each generation is not worth its memory
                return None
            torch.cat(weights, out=out)
            bias = None if linears[0].bias is None else torch.cat([lin.bias for lin in linears])
            fused.append((out, bias))
        return fused

    @torch.no_grad()
    def prefill(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> torch.Tensor:
        """Run the prompts (left-padded [B, P]) once per distinct prompt; returns the last position's logits [B, V]."""
        B, P = prompt_ids.shape
        ids, mask, inverse = distinct_prompts(prompt_ids, prompt_mask)
        mask = mask.bool()
        U, width = ids.shape[0], P + self.max_new_tokens
        self.width = width
        self.keys, self.values = [None] * len(self.decoder.layers), [None] * len(self.decoder.layers)
        causal = torch.ones((P, P), dtype=torch.bool, device=ids.device).tril()
        # a padding query sees itself, so that no softmax runs over nothing (its output is never read)
        sees = causal & mask[:, None, :] | torch.eye(P, dtype=torch.bool, device=ids.device)
        self.length, self.pos = 0, positions_from_mask(mask)
        logits = self._forward(ids, sees[:, None])[:, -1]
        self.pos = self.pos[:, -1:]
        self.visible = torch.ones((U, 1, 1, width), dtype=torch.bool, device=ids.device)
        self.visible[:, 0, 0, :P] = mask
        self.visible, self.pos = self.visible[inverse], self.pos[inverse]
        for name, bufs in (("keys", self.keys), ("values", self.values)):  # every row its prompt's columns
            for i, buf in enumerate(bufs):
                fanned = self.pool.take((name, i), (B,) + tuple(buf.shape[1:]), buf.dtype, buf.device)
                bufs[i] = torch.index_select(buf, 0, inverse, out=fanned)
        return logits[inverse]

    @torch.no_grad()
    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed one token per row [B]; returns the next-token logits [B, V]."""
        self.pos = self.pos + 1
        return self._forward(tokens[:, None], self.visible[..., :self.length + 1])[:, -1]

    def _forward(self, ids: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        """Tokens ``ids`` [b, s] at positions ``self.pos`` [b, s] into columns length .. length + s; ``visible``
        [b, 1, s, length + s]: which columns each query attends to. Returns the logits [b, s, V]."""
        dec, eps, (b, s), t = self.decoder, self.model.config.rms_norm_eps, ids.shape, self.length
        x = dec.embed_tokens(ids)
        cos, sin = dec.rotary_emb(x, self.pos)
        cos, sin = cos[:, None], sin[:, None]
        for i, layer in enumerate(dec.layers):
            attn, mlp, d = layer.self_attn, layer.mlp, layer.self_attn.head_dim
            h = rms_norm(x, layer.input_layernorm.weight, eps)
            if self.fused[i] is not None:
                qkv = F.linear(h, *self.fused[i][0]).view(b, s, -1, d).transpose(1, 2)
                heads, kv = qkv.shape[1] - 2 * attn.k_proj.out_features // d, attn.k_proj.out_features // d
                qk = rotate(qkv[:, :heads + kv], cos, sin)  # one rotation for the queries and the keys
                q, k, v = qk[:, :heads], qk[:, heads:], qkv[:, heads + kv:]
            else:
                q = rotate(project(attn.q_proj, h).view(b, s, -1, d).transpose(1, 2), cos, sin)
                k = rotate(project(attn.k_proj, h).view(b, s, -1, d).transpose(1, 2), cos, sin)
                v = project(attn.v_proj, h).view(b, s, -1, d).transpose(1, 2)
            if self.keys[i] is None:  # the prefill: buffers in the dtype the projections give (autocast's)
                shape = (b, k.shape[1], self.width, d)
                self.keys[i] = self.pool.take(("prompt keys", i), shape, k.dtype, k.device)
                self.values[i] = self.pool.take(("prompt values", i), shape, v.dtype, v.device)
            k_buf, v_buf = self.keys[i], self.values[i]
            k_buf[:, :, t:t + s], v_buf[:, :, t:t + s] = k, v
            o = F.scaled_dot_product_attention(q, k_buf[:, :, :t + s], v_buf[:, :, :t + s], attn_mask=visible,
                                               scale=attn.scaling, enable_gqa=q.shape[1] != k_buf.shape[1])
            x = x + project(attn.o_proj, o.transpose(1, 2).reshape(b, s, -1))
            h = rms_norm(x, layer.post_attention_layernorm.weight, eps)
            if self.fused[i] is not None:
                gate, up = F.linear(h, *self.fused[i][1]).chunk(2, dim=-1)
            else:
                gate, up = project(mlp.gate_proj, h), project(mlp.up_proj, h)
            x = x + project(mlp.down_proj, F.silu(gate) * up)
        self.length += s
        return project(self.model.get_output_embeddings(), rms_norm(x[:, -1:], dec.norm.weight, eps))

    def keep(self, idx: torch.Tensor) -> None:
        self.keys = [k[idx] for k in self.keys]
        self.values = [v[idx] for v in self.values]
        self.visible, self.pos = self.visible[idx], self.pos[idx]


def project(linear: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return F.linear(x, linear.weight, linear.bias)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Llama's RMSNorm: w · x / sqrt(mean(x²) + ε), computed in float32 and cast back to x's dtype first."""
    if x.dtype == torch.float32 and weight.dtype == torch.float32:
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    x32 = x.float()
    return weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding, the half-split convention: x·cos + (−x₂, x₁)·sin."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


def decode_steps(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, max_new_tokens: int,
                 pool: BufferPool | None = None):
    """The prompts prefilled and the stepper that goes on from them: the lean one where it computes exactly the
    model's forward, else the model's own. Returns (last-position logits [B, V], stepper)."""
    if lean_decode_supported(model, prompt_ids.shape[1] + max_new_tokens):
        steps = LeanLlamaSteps(model, max_new_tokens, pool)
        return steps.prefill(prompt_ids, prompt_mask), steps
    last, cache = shared_prefill(model, prompt_ids, prompt_mask)
    return last, HFSteps(model, cache, prompt_mask)
