"""The prompt prefill the sampler (``decode_steps``) and the training forward (``completion_forward``) share: each
distinct prompt of a GRPO batch (G rows hold each) run once, its KV cache fanned out to the rows that share it,
and the positions of left-padded rows. Imports nothing of ``training``, so either may import it.
"""
from __future__ import annotations

import copy

import torch

#: architectures whose decoder layer is exactly: x + o(attn(rope(q), rope(k), v)) of rms_norm(x), then
#: x + down(silu(gate) * up) of rms_norm(x), with optional biases on the projections
LLAMA_FAMILY = frozenset({"llama", "mistral", "qwen2"})


def llama_family(config, context: int, attention=("sdpa", "eager")) -> bool:
    """Whether a model of ``config`` is a plain Llama-family decoder (``LLAMA_FAMILY``, SiLU MLP) under one of
    the ``attention`` implementations, whose sliding window, if any, does not cut a sequence of ``context``."""
    if getattr(config, "model_type", None) not in LLAMA_FAMILY:
        return False
    if getattr(config, "_attn_implementation", "sdpa") not in attention:
        return False
    window = getattr(config, "sliding_window", None)
    if window is not None and getattr(config, "use_sliding_window", True) and window < context:
        return False  # a window that would cut this sequence: the model's own masks know how
    return getattr(config, "hidden_act", "silu") == "silu"


def positions_from_mask(mask: torch.Tensor) -> torch.Tensor:
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


def distinct_prompts(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor):
    """The distinct (ids, mask) rows in order of first appearance, and ``inverse`` [B]: each row's distinct prompt
    (``torch.unique(dim=0)``'s answer in another order; a dictionary of the rows' values, several times faster
    for the few dozen rows of a batch)."""
    first: dict = {}  # a row's values -> its distinct prompt
    picks, inverse = [], []
    for r, row in enumerate(torch.cat([prompt_ids, prompt_mask], dim=1).tolist()):
        u = first.setdefault(tuple(row), len(picks))
        if u == len(picks):
            picks.append(r)
        inverse.append(u)
    picks = torch.tensor(picks, device=prompt_ids.device)
    return prompt_ids[picks], prompt_mask[picks], torch.tensor(inverse, device=prompt_ids.device)


def prefill_distinct(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, *, hidden: bool):
    """Run each *distinct* prompt once. Returns (last-position output [U, ·], its KV cache [U rows], ``inverse``
    [B]: the distinct prompt of each row, or None when all rows differ). ``hidden``: ``model`` is the decoder
    and the output its last hidden state [U, H]; else the model and its last-position logits [U, V] (the head
    over a large vocabulary at every prompt position would be wasted work)."""
    u_ids, u_mask, inverse = distinct_prompts(prompt_ids, prompt_mask)
    if u_ids.shape[0] == prompt_ids.shape[0]:
        inverse = None
    else:
        prompt_ids, prompt_mask = u_ids, u_mask
    kw = {} if hidden else {"logits_to_keep": 1}
    out = model(input_ids=prompt_ids, attention_mask=prompt_mask, position_ids=positions_from_mask(prompt_mask),
                use_cache=True, **kw)
    return (out.last_hidden_state if hidden else out.logits)[:, -1], out.past_key_values, inverse


def rows_of_cache(cache, rows: torch.Tensor | None):
    """A cache holding ``rows`` of ``cache`` (all of it for None), leaving ``cache`` as it was: each layer is a
    shallow copy whose tensors are replaced by indexed ones (``batch_select_indices``), so the same prefill can
    feed several groups of rows, and their gradients flow back into it."""
    if rows is None:
        return cache
    picked = copy.copy(cache)
    picked.layers = [copy.copy(layer) for layer in cache.layers]
    for layer in picked.layers:
        layer.batch_select_indices(rows)
    return picked


def shared_prefill(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor):
    """The prompts run once per distinct prompt (``prefill_distinct``) and the KV cache fanned out to every row.
    Returns (last-position logits [B, V], cache)."""
    last, cache, inverse = prefill_distinct(model, prompt_ids, prompt_mask, hidden=False)
    return (last, cache) if inverse is None else (last[inverse], rows_of_cache(cache, inverse))
