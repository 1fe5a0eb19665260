"""Sampling a packed group's completions in one decode loop (docs/architecture.md#packed-seeds).

``StackRolloutEngine`` is the HF rollout engine (``training.rollout.HFRolloutEngine``: the same sampling, stops
and log-probabilities) whose stepper is ``StackSteps``: the rows of several seeds, each row naming its seed's
slot, decoded by ``training.stack_forward.StackDecoder``. Rows sit in a [K, m] layout (K seeds, m rows each,
padded with copies of a row of the same seed where a seed has fewer): each seed's distinct prompts are prefilled
once and their key/value columns fanned out to its rows, as ``LeanLlamaSteps`` does for one model; as rows end,
``keep`` shrinks m to the most rows any seed still runs. A row's tokens depend on its own seed's weights and its
own uniforms alone (``training.rollout.row_uniforms``), so they are the ones its solo run samples.
"""
from __future__ import annotations

import torch

from training.prefill import distinct_prompts, positions_from_mask
from training.rollout import HFRolloutEngine
from training.stack_forward import StackDecoder, bmm


class StackSteps:
    """The stepper of ``HFRolloutEngine.generate`` for rows of several slots of ``stack`` (``slots``: each row's)."""

    def __init__(self, stack, slots: list[int], max_new_tokens: int):
        self.sel = sorted(set(slots))
        self.seed_of = [self.sel.index(s) for s in slots]  # each row's place in the seed dimension
        self.decoder = StackDecoder(stack, self.sel, fuse=True)
        self.max_new_tokens = max_new_tokens

    @torch.no_grad()
    def prefill(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> torch.Tensor:
        """Each seed's distinct prompts (left-padded [B, P] rows) run once; returns each row's last logits [B, V]."""
        B, P = prompt_ids.shape
        K, dev = len(self.sel), prompt_ids.device
        rows = [[r for r in range(B) if self.seed_of[r] == j] for j in range(K)]
        distinct = []
        for j in range(K):
            idx = torch.tensor(rows[j], device=dev)
            distinct.append(distinct_prompts(prompt_ids[idx], prompt_mask[idx]))
        U = max(d[0].shape[0] for d in distinct)
        ids = torch.zeros((K, U, P), dtype=torch.long, device=dev)
        mask = torch.zeros((K, U, P), dtype=torch.bool, device=dev)
        for j, (u_ids, u_mask, _) in enumerate(distinct):
            u = u_ids.shape[0]
            ids[j, :u], mask[j, :u] = u_ids, u_mask.bool()
            ids[j, u:], mask[j, u:] = u_ids[:1], u_mask[:1].bool()  # padding: a copy of the seed's first prompt
        flat_mask = mask.view(K * U, P)
        causal = torch.ones((P, P), dtype=torch.bool, device=dev).tril()
        sees = causal & flat_mask[:, None, :] | torch.eye(P, dtype=torch.bool, device=dev)
        pos = positions_from_mask(flat_mask)
        width = P + self.max_new_tokens
        n_layers = self.decoder.n_layers
        self.cache = [[None] * n_layers, [None] * n_layers, 0, width]
        hidden = self.decoder.forward(ids, pos, sees[:, None], self.cache)
        logits = bmm(hidden[:, :, -1], self.decoder.head()).reshape(K * U, -1)
        # the [K, m] layout: row c of seed j at j·m + c; a seed with fewer rows repeats its first
        self.m = max(len(r) for r in rows)
        source, self.fed = [], [0] * B
        for j, (_, _, inverse) in enumerate(distinct):
            inv = inverse.tolist()
            for c in range(self.m):
                source.append(j * U + inv[c if c < len(inv) else 0])
            for c, r in enumerate(rows[j]):
                self.fed[r] = j * self.m + c
        source = torch.tensor(source, device=dev)
        visible = torch.ones((K * U, 1, 1, width), dtype=torch.bool, device=dev)
        visible[:, 0, 0, :P] = flat_mask
        self._select(source, visible, pos[:, -1:])
        self.fed = torch.tensor(self.fed, device=dev)  # where each row the sampler feeds sits in the layout
        return logits[source][self.fed]

    def _select(self, source: torch.Tensor, visible: torch.Tensor, pos: torch.Tensor) -> None:
        keys, values = self.cache[0], self.cache[1]
        for i in range(len(keys)):
            keys[i], values[i] = keys[i][source], values[i][source]
        self.visible, self.pos = visible[source], pos[source]

    @torch.no_grad()
    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed one token per fed row [b]; returns their next-token logits [b, V]."""
        K = len(self.sel)
        feed = torch.zeros(K * self.m, dtype=torch.long, device=tokens.device)
        feed[self.fed] = tokens
        self.pos = self.pos + 1
        t = self.cache[2]
        hidden = self.decoder.forward(feed.view(K, self.m, 1), self.pos, self.visible[..., :t + 1], self.cache)
        logits = bmm(hidden[:, :, -1], self.decoder.head()).reshape(K * self.m, -1)
        return logits[self.fed]

    def keep(self, idx: torch.Tensor) -> None:
        """Only the fed rows at ``idx`` go on: each seed's in m' = the most any seed keeps (at least 1) places."""
        K, m = len(self.sel), self.m
        kept = self.fed[idx].tolist()
        per_seed = [[f for f in kept if f // m == j] for j in range(K)]
        m_new = max(1, max(len(p) for p in per_seed))
        source, place = [], {}
        for j, own in enumerate(per_seed):
            for c in range(m_new):
                source.append(own[c] if c < len(own) else (own[0] if own else j * m))
            for c, f in enumerate(own):
                place[f] = j * m_new + c
        self.m = m_new
        self._select(torch.tensor(source, device=self.fed.device), self.visible, self.pos)
        self.fed = torch.tensor([place[f] for f in kept], device=self.fed.device)


class StackRolloutEngine(HFRolloutEngine):
    """HF sampling for the slots of a ``SeedStack``: ``generate(..., slots=[each row's slot])``."""

    def __init__(self, stack, tokenizer):
        super().__init__(stack.template, tokenizer)
        self.stack = stack

    def sync_weights(self, model) -> None:  # the stacked tensors are the weights: nothing to push
        pass

    def stepper(self, prompt_ids, prompt_mask, max_new_tokens, slots=None):
        steps = StackSteps(self.stack, slots, max_new_tokens)
        return steps.prefill(prompt_ids, prompt_mask), steps
