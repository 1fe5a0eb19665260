"""The training forward's layout: each distinct prompt once, then each completion without its padding.

A GRPO batch holds each prompt G times and completions of unequal length, right-padded to the longest. Three
things in it predict nothing and are not computed (docs/architecture.md, "The training core"):

- the G − 1 repeats of a prompt: ``prefill_distinct`` runs each distinct prompt once and ``rows_of_cache`` fans
  its KV cache out to the rows that share it (an index, so every completion's gradient flows back into the one
  prompt computation: the same math as G copies);
- a completion's last token: the state after it would predict a token that was never sampled, so row i feeds
  only its first L_i − 1 completion tokens (the state before token t, t ≥ 1, is the output at token t − 1; the
  state before token 0 is the prompt's last);
- the padding after a shorter completion. For the Llama family under SDPA, when a prompt's completions are short
  (``PACK_MAX_TOKENS``), each distinct prompt and its rows' completion tokens go in one packed sequence
  (``packed_states``): a block mask lets each completion see its prompt and itself, position ids restart after
  the prompt for each; one forward call, no padding but the packs' ends. Otherwise rows are fed in groups of like
  length (``length_buckets``) after a prefill of the distinct prompts, each group padded only to its own longest,
  the grouping chosen to minimise fed positions plus a per-call cost.

How many forward calls that takes depends on the rows (one pack, or a prefill and a call per length group). A
model sharded over ranks (FSDP2) cannot allow that: each call of its modules is an all-gather in the forward and
an all-gather and a reduce-scatter in the backward, which every rank must make in the same order, so ranks with
other lengths would wait for each other's collectives for ever. With ``single_call`` the forward is exactly one
model call whatever the rows: the pack when it fits, else every row's prompt and fed completion tokens in one
right-padded forward (``whole_states``); the same outputs either way.

Every row's output is its own computation whatever group it is in (attention never crosses rows, masked keys add
exactly nothing); only the blocking of a matrix product over a different number of rows can change the last bits.
"""
from __future__ import annotations

import torch

from training.prefill import distinct_prompts, llama_family, positions_from_mask, prefill_distinct, rows_of_cache

#: one more forward call costs about this many floating-point operations' worth of fixed work per decoder layer
#: (kernel launches, Python and autograd bookkeeping, forward and backward): measured 4-6 ms per extra call of the
#: tiny model's 4 layers, the time of 50 (one CPU thread) to 90 (two) of its row-positions
CALL_COST_FLOP_PER_LAYER = 8e7


def length_buckets(widths: list[int], call_cost: float) -> list[list[int]]:
    """Rows grouped so that Σ over groups (rows × the group's widest + ``call_cost``) is least.

    ``widths``: the positions each row needs; ``call_cost``: the fixed cost of one more forward call in
    row-positions. Rows of width 0 need no call and are left out. Sorted by width, an optimal grouping is a
    partition into runs of consecutive widths (a row never belongs with wider rows than a wider row does), found by
    dynamic programming over the distinct widths: best[j] = min over i < j of best[i] + rows(i..j) × w_j + cost.
    Returns the groups as lists of row indices, narrowest first.
    """
    distinct = sorted({w for w in widths if w > 0})
    if not distinct:
        return []
    count = [0] * len(distinct)
    where = {w: k for k, w in enumerate(distinct)}
    for w in widths:
        if w > 0:
            count[where[w]] += 1
    n = len(distinct)
    best, cut = [0.0] + [float("inf")] * n, [0] * (n + 1)
    for j in range(1, n + 1):
        rows = 0
        for i in range(j - 1, -1, -1):  # the last group holds distinct widths i..j-1
            rows += count[i]
            cost = best[i] + rows * distinct[j - 1] + call_cost
            if cost < best[j]:
                best[j], cut[j] = cost, i
    bounds, j = [], n
    while j > 0:
        bounds.append((distinct[cut[j]], distinct[j - 1]))
        j = cut[j]
    groups = []
    for low, high in reversed(bounds):
        groups.append([r for r, w in enumerate(widths) if low <= w <= high])
    return groups


def call_cost_rows(model) -> float:
    """``CALL_COST_FLOP_PER_LAYER`` in row-positions of ``model``: a row-position costs about 6 FLOP per
    parameter of a decoder layer (forward 2, backward 4)."""
    layers = getattr(model, "layers", None)
    if not layers:
        return 0.0
    per_layer = sum(p.numel() for p in layers[0].parameters())
    return CALL_COST_FLOP_PER_LAYER / max(1, 6 * per_layer)


#: the longest packed sequence (a prompt and its rows' completion tokens): the attention of a pack is quadratic in
#: its length, so past this the grouped forward is cheaper (and the [U, S, S] mask stays small)
PACK_MAX_TOKENS = 1024


def packed_states(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, completion_ids: torch.Tensor,
                  fed: list[int], *, hidden: bool):
    """``completion_states`` in one forward of the packs of ``pack_layout``; None when a pack would be longer
    than ``PACK_MAX_TOKENS``."""
    layout = pack_layout(prompt_ids, prompt_mask, completion_ids, fed)
    if layout is None:
        return None
    ids, pos, sees, where = layout
    dev = completion_ids.device
    out = model(input_ids=ids.to(dev), attention_mask=sees[:, None].to(dev), position_ids=pos.to(dev),
                use_cache=False)
    states = out.last_hidden_state if hidden else out.logits
    U, S = ids.shape
    flat = torch.cat([states.reshape(U * S, -1), states.new_zeros((1, states.shape[-1]))])
    return flat[where.to(dev)]


def pack_layout(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, completion_ids: torch.Tensor,
                fed: list[int], max_tokens: int | None = None):
    """The packs of one forward: per distinct prompt u, the sequence [prompt u (left-padded to P), then each of
    its rows' first ``fed`` completion tokens], packs right-padded to the longest S; None when S > ``max_tokens``
    (``PACK_MAX_TOKENS`` unless given).
    Returns CPU tensors (ids [U, S], position ids [U, S], sees [U, S, S] bool, where [B, T]: the flat index
    u·S + s of the output predicting each completion token, U·S for one that predicts padding).

    Query i of pack u sees key j when j ≤ i and either both lie in one row's completion, or j is a real prompt
    token and i is in the prompt or any completion of u; every position sees itself (a padding query then has a
    key, so no softmax over nothing). Position ids: the prompt's own, then for a row's k-th token prompt length + k.
    """
    B, P, T = completion_ids.shape[0], prompt_ids.shape[1], completion_ids.shape[1]
    u_ids, u_mask, inverse = distinct_prompts(prompt_ids, prompt_mask)
    U, owner = u_ids.shape[0], inverse.tolist()
    ends = [P] * U
    starts = []
    for r in range(B):  # each row's completion segment: [start, start + fed) in its prompt's pack
        starts.append(ends[owner[r]])
        ends[owner[r]] += fed[r]
    S = max(ends)
    if S > (PACK_MAX_TOKENS if max_tokens is None else max_tokens):
        return None
    # built as Python lists, one tensor each at the end: a slice assignment per row costs more than the forward
    prompt_len = u_mask.sum(-1).tolist()
    segment = [[-1] * P + [-2] * (S - P) for _ in range(U)]  # -1 prompt, r: row r's completion, -2: padding
    ids = [row + [0] * (S - P) for row in u_ids.tolist()]
    pos = [row + [0] * (S - P) for row in positions_from_mask(u_mask).tolist()]
    where = [[U * S] * T for _ in range(B)]  # row U·S of the flat states is zeros: positions predicting padding
    for r, (u, a, f, tokens) in enumerate(zip(owner, starts, fed, completion_ids.tolist())):
        segment[u][a:a + f] = [r] * f
        ids[u][a:a + f] = tokens[:f]
        pos[u][a:a + f] = range(prompt_len[u], prompt_len[u] + f)
        where[r][:f + 1] = [u * S + P - 1, *range(u * S + a, u * S + a + f)]
    segment, ids, pos = torch.tensor(segment), torch.tensor(ids, dtype=prompt_ids.dtype), torch.tensor(pos)
    real_key = torch.cat([u_mask.cpu().bool(), segment[:, P:] >= 0], dim=1)  # [U, S]
    causal = torch.ones((S, S), dtype=torch.bool).tril()
    q_seg, k_seg = segment[:, :, None], segment[:, None, :]
    sees = causal & real_key[:, None, :] & ((k_seg == -1) & (q_seg != -2) | (q_seg == k_seg) & (q_seg >= 0))
    sees |= torch.eye(S, dtype=torch.bool)
    return ids, pos, sees, torch.tensor(where)


def whole_states(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, completion_ids: torch.Tensor,
                 fed: list[int], *, hidden: bool) -> torch.Tensor:
    """``completion_states`` in one forward of every row whole: [prompt (left-padded to P), its first ``fed``
    completion tokens, padding to T − 1], the padding masked. The output at sequence position P − 1 + t is
    position t's; t > ``fed`` is set to zeros (``torch.where``: no gradient reaches what a padding query computed).
    Costs the prompt's G repeats and the padding the other paths skip: for a sharded model, whose call count
    must not depend on the rows, when the pack is too long."""
    B, P, T = completion_ids.shape[0], prompt_ids.shape[1], max(completion_ids.shape[1], 1)
    dev = completion_ids.device
    fed_t = torch.tensor(fed, device=dev)[:, None]
    real = torch.arange(T - 1, device=dev)[None, :] < fed_t  # [B, T - 1]: the completion tokens fed
    ids = torch.cat([prompt_ids, completion_ids[:, :T - 1]], dim=1)
    mask = torch.cat([prompt_mask, real.to(prompt_mask.dtype)], dim=1)
    kw = {} if hidden else {"logits_to_keep": T}
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions_from_mask(mask), use_cache=False, **kw)
    states = (out.last_hidden_state if hidden else out.logits)[:, -T:]
    keep = torch.arange(T, device=dev)[None, :] <= fed_t  # position 0 (the prompt's last) and 1..fed
    return torch.where(keep[..., None], states, states.new_zeros(()))


def completion_states(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, completion_ids: torch.Tensor,
                      lengths: torch.Tensor, *, hidden: bool, single_call: bool = False) -> torch.Tensor:
    """The output at every position that predicts a completion token, [B, T, ·] (T = ``completion_ids``'s
    width): position 0 is the prompt's last, position t ≥ 1 the output at completion token t − 1; positions at
    or past a row's length ``lengths`` [B] are zeros (they predict padding, which every loss masks).

    ``hidden``: ``model`` is the decoder and the output its last hidden state; else the model's logits.
    ``single_call``: exactly one call of ``model`` whatever the rows (the module's docstring says why).
    """
    B, P, T = completion_ids.shape[0], prompt_ids.shape[1], completion_ids.shape[1]
    fed = (lengths.long() - 1).clamp(min=0, max=max(T - 1, 0)).tolist()
    decoder = model if hidden else model.get_decoder()
    # packing hands the model a [U, 1, S, S] mask of its own: the plain Llama family reads it as is; SDPA only, as
    # eager attention would keep [U, heads, S, S] probabilities per layer for the backward
    if llama_family(model.config, P + T, attention=("sdpa",)) and T > 1:
        packed = packed_states(model, prompt_ids, prompt_mask, completion_ids, fed, hidden=hidden)
        if packed is not None:
            return packed
    if single_call:
        return whole_states(model, prompt_ids, prompt_mask, completion_ids, fed, hidden=hidden)
    last, cache, inverse = prefill_distinct(model, prompt_ids, prompt_mask, hidden=hidden)
    last = last if inverse is None else last[inverse]
    if T <= 1:
        return last[:, None]
    parts, order = [], []
    for group in length_buckets(fed, call_cost_rows(decoder)):
        idx = torch.tensor(group, device=completion_ids.device)
        width = max(fed[r] for r in group)
        mask = torch.cat([prompt_mask[idx], torch.ones((len(group), width), dtype=prompt_mask.dtype,
                                                        device=prompt_mask.device)], dim=1)
        out = model(input_ids=completion_ids[idx, :width], attention_mask=mask,
                    position_ids=positions_from_mask(mask)[:, P:], use_cache=True,
                    past_key_values=rows_of_cache(cache, idx if inverse is None else inverse[idx]))
        states = out.last_hidden_state if hidden else out.logits
        parts.append(torch.nn.functional.pad(states, (0, 0, 0, T - 1 - width)))
        order.extend(group)
    rest = [r for r in range(B) if fed[r] == 0]
    if rest:
        parts.append(last.new_zeros((len(rest), T - 1, last.shape[-1])))
        order.extend(rest)
    after = torch.cat(parts)[torch.argsort(torch.tensor(order, device=last.device))]
    return torch.cat([last[:, None], after.to(last.dtype)], dim=1)
