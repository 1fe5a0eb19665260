"""One sampling step after another: the next-token logits of the rows still being decoded.

``HFRolloutEngine.generate`` prefills the prompts with the model's own forward, then asks a *stepper* for each
next token's logits. Two steppers, one interface (``step``: the logits after feeding one token per row; ``keep``:
drop the rows that have ended, so the batch a step computes shrinks as completions end):

- ``HFSteps``: the model's own forward and KV cache (any architecture);
- ``LeanLlamaSteps``: the same decoder layers written out as plain tensor calls over preallocated key/value
  buffers, for the Llama family (``lean_decode_supported``). A decode step of a small model is mostly fixed cost
  (module calls, mask building, the cache's concatenations), not arithmetic: this does the arithmetic alone. Its
  logits equal the model's forward (tests/training/test_decode_steps.py), so π_rollout is the policy's π.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

#: architectures whose decoder layer is exactly: x + o(attn(rope(q), rope(k), v)) of rms_norm(x), then
#: x + down(silu(gate) * up) of rms_norm(x), with optional biases on the projections
LEAN_DECODE_MODELS = frozenset({"llama", "mistral", "qwen2"})


def llama_family(config, context: int, attention=("sdpa", "eager")) -> bool:
    """Whether a model of ``config`` is a plain Llama-family decoder (``LEAN_DECODE_MODELS``, SiLU MLP) under one of
    the ``attention`` implementations, whose sliding window, if any, does not cut a sequence of ``context``."""
    if getattr(config, "model_type", None) not in LEAN_DECODE_MODELS:
        return False
    if getattr(config, "_attn_implementation", "sdpa") not in attention:
        return False
    window = getattr(config, "sliding_window", None)
    if window is not None and getattr(config, "use_sliding_window", True) and window < context:
        return False  # a window that would cut this sequence: the model's own masks know how
    return getattr(config, "hidden_act", "silu") == "silu"


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
        self.attn, self.pos = prompt_mask, (prompt_mask.long().cumsum(-1) - 1).clamp(min=0)[:, -1:]

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


class LeanLlamaSteps:
    """Llama-family decode steps over key/value buffers [B, kv heads, P + new tokens, head dim], filled from the
    prefill's cache, written in place one column per step; the attention reads the columns written so far,
    with the prompt's padding masked."""

    def __init__(self, model, cache, prompt_mask: torch.Tensor, max_new_tokens: int):
        self.model, self.decoder = model, model.get_decoder()
        B, P = prompt_mask.shape
        self.keys, self.values = [], []
        for layer in cache.layers:
            k = layer.keys.new_empty((B, layer.keys.shape[1], P + max_new_tokens, layer.keys.shape[-1]))
            v = torch.empty_like(k)
            k[:, :, :P], v[:, :, :P] = layer.keys, layer.values
            self.keys.append(k)
            self.values.append(v)
        self.visible = torch.ones((B, 1, 1, P + max_new_tokens), dtype=torch.bool, device=prompt_mask.device)
        self.visible[:, 0, 0, :P] = prompt_mask.bool()
        self.pos = (prompt_mask.long().cumsum(-1) - 1).clamp(min=0)[:, -1:]
        self.length = P  # columns written

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        dec, config = self.decoder, self.model.config
        self.pos = self.pos + 1
        x = dec.embed_tokens(tokens[:, None])
        cos, sin = dec.rotary_emb(x, self.pos)
        cos, sin = cos[:, None], sin[:, None]
        t, eps = self.length, config.rms_norm_eps
        visible = self.visible[..., :t + 1]
        for layer, k_buf, v_buf in zip(dec.layers, self.keys, self.values):
            attn, mlp = layer.self_attn, layer.mlp
            h = rms_norm(x, layer.input_layernorm.weight, eps)
            q = project(attn.q_proj, h).view(x.shape[0], 1, -1, k_buf.shape[-1]).transpose(1, 2)
            k = project(attn.k_proj, h).view(x.shape[0], 1, -1, k_buf.shape[-1]).transpose(1, 2)
            k_buf[:, :, t:t + 1] = rotate(k, cos, sin)
            v_buf[:, :, t:t + 1] = project(attn.v_proj, h).view(x.shape[0], 1, -1, k_buf.shape[-1]).transpose(1, 2)
            o = F.scaled_dot_product_attention(rotate(q, cos, sin), k_buf[:, :, :t + 1], v_buf[:, :, :t + 1],
                                               attn_mask=visible, scale=attn.scaling,
                                               enable_gqa=q.shape[1] != k_buf.shape[1])
            x = x + project(attn.o_proj, o.transpose(1, 2).reshape(x.shape[0], 1, -1))
            h = rms_norm(x, layer.post_attention_layernorm.weight, eps)
            x = x + project(mlp.down_proj, F.silu(project(mlp.gate_proj, h)) * project(mlp.up_proj, h))
        self.length += 1
        return project(self.model.get_output_embeddings(), rms_norm(x, dec.norm.weight, eps))[:, -1]

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


def decode_steps(model, cache, prompt_mask: torch.Tensor, max_new_tokens: int):
    """The stepper for ``model``: the lean one where it computes exactly the model's forward, else the model's."""
    if lean_decode_supported(model, prompt_mask.shape[1] + max_new_tokens):
        return LeanLlamaSteps(model, cache, prompt_mask, max_new_tokens)
    return HFSteps(model, cache, prompt_mask)
