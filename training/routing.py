"""Keep routing for MoE models (DeepSeek-V3.2 §3.1): the experts chosen while sampling are replayed in the
training forward, so π_θ and π_old are computed by the same sub-network.

Works with transformers' top-k router modules that return ``(router_logits, routing_weights, expert_ids)``
(Qwen2-MoE, Qwen3-MoE, Mixtral, … in transformers 5). During sampling a forward hook records expert ids per
token (prefill, then one call per decode step); in training a forward hook replaces the router's choice with
the recorded ids and recomputes their weights from the current router logits, so gradients still reach the
router.
"""
from __future__ import annotations

import torch


def router_modules(model) -> dict[str, torch.nn.Module]:
    return {name: m for name, m in model.named_modules()
            if type(m).__name__.endswith("Router") and hasattr(m, "top_k")}


class RoutingRecorder:
    def __init__(self, model):
        self.calls: dict[str, list[torch.Tensor]] = {}
        self.handles = []
        for name, mod in router_modules(model).items():
            self.calls[name] = []
            self.handles.append(mod.register_forward_hook(self._hook(name)))

    def _hook(self, name):
        def hook(module, inputs, output):
            self.calls[name].append(output[2].detach().clone())
        return hook

    def finish(self, batch_size: int, total_len: int) -> dict[str, torch.Tensor]:
        """Expert ids per position, [B, total_len, k]; -1 where nothing was recorded (the last token)."""
        for h in self.handles:
            h.remove()
        routing = {}
        for name, calls in self.calls.items():
            parts = [c.reshape(batch_size, -1, c.shape[-1]) for c in calls]
            ids = torch.cat(parts, dim=1)
            pad = total_len - ids.shape[1]
            if pad > 0:
                ids = torch.cat([ids, ids.new_full((batch_size, pad, ids.shape[-1]), -1)], dim=1)
            routing[name] = ids[:, :total_len]
        return routing


class RoutingReplay:
    """Context manager forcing recorded expert ids in every router of ``model``."""

    def __init__(self, model, routing: dict[str, torch.Tensor] | None):
        self.model, self.routing, self.handles = model, routing, []

    def __enter__(self):
        if not self.routing:
            return self
        for name, mod in router_modules(self.model).items():
            if name in self.routing:
                self.handles.append(mod.register_forward_hook(self._hook(self.routing[name])))
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        return False

    @staticmethod
    def _hook(recorded: torch.Tensor):
        def hook(module, inputs, output):
            logits, _, chosen = output
            rec = recorded.reshape(-1, recorded.shape[-1]).to(chosen.device)
            if rec.shape != chosen.shape:
                raise RuntimeError(f"keep_routing: recorded routing {tuple(rec.shape)} does not match the "
                                   f"training forward {tuple(chosen.shape)}")
            ids = torch.where(rec >= 0, rec, chosen)
            probs = torch.softmax(logits, dim=-1, dtype=torch.float)
            weights = probs.gather(-1, ids)
            if getattr(module, "norm_topk_prob", False):
                weights = weights / weights.sum(-1, keepdim=True)
            return logits, weights.to(logits.dtype), ids
        return hook
