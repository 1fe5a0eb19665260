"""Several seeds' weights in one tensor per parameter: the seed dimension of a packed group
(docs/architecture.md#packed-seeds).

A packed group trains K runs of one model in one process. Each parameter of the model is held once, stacked
over K *slots* (``stacked[name]``: [K, ...]), and each slot has its own Hugging Face model (``models[k]``) whose
parameters are views of slot k, so everything that reads or writes one run's weights (its optimizer, its
checkpoint, its evaluation, a resume loading a checkpoint) does so through an ordinary model, as a solo run's
would. The batched forwards (``training.stack_forward``) read the stacked tensors: one matrix product per
projection for all the seeds at once (``torch.bmm``), and the backward of the sum of the seeds' losses leaves
each seed's gradient in its own slice (seed k's loss depends only on slot k), which ``grads_to`` hands to that
slot's model before its optimizer steps. The seeds' optimizers stay separate (their own learning rates, their own
moments and clipping), so a step of a packed seed is the step it would take alone.
"""
from __future__ import annotations

import copy

import torch


class SeedStack:
    """K slots of one Llama-family model (``training.prefill.LLAMA_FAMILY``), their parameters stacked."""

    def __init__(self, template, slots: int):
        self.template, self.size = template, slots
        self.names: dict[str, str] = {}  # each parameter's name -> the name it is held under (tied ones share)
        self.stacked: dict[str, torch.nn.Parameter] = {}
        first: dict[int, str] = {}
        for name, p in template.named_parameters(remove_duplicate=False):
            held = first.setdefault(id(p), name)
            self.names[name] = held
            if held == name:
                self.stacked[name] = torch.nn.Parameter(p.detach().unsqueeze(0).repeat(
                    (slots,) + (1,) * p.dim()).contiguous())
        self.models = [self._slot_model(k) for k in range(slots)]
        self.template = self.models[0]  # (the template's own weights are not kept)

    def _slot_model(self, k: int):
        """A copy of the template whose parameters are views of slot k (tied parameters stay one tensor)."""
        model = copy.deepcopy(self.template)
        for name, p in model.named_parameters():
            p.data = self.stacked[self.names[name]].data[k]
        return model

    def load(self, k: int, model) -> None:
        """Slot k takes ``model``'s weights (a resumed checkpoint, the base model for a seed that joins)."""
        mine = dict(self.models[k].named_parameters())
        with torch.no_grad():
            for name, p in model.named_parameters():
                mine[name].copy_(p)

    def weights(self, slots: list[int]) -> dict[str, torch.Tensor]:
        """The stacked tensors of ``slots``, in that order: the parameters themselves when they are every slot in
        order, else their rows (an index: a copy, through which gradients still reach the stacked parameter)."""
        if slots == list(range(self.size)):
            return dict(self.stacked)
        idx = torch.tensor(slots, device=next(iter(self.stacked.values())).device)
        return {name: w.index_select(0, idx) for name, w in self.stacked.items()}

    def weight(self, weights: dict, name: str) -> torch.Tensor | None:
        """The stacked tensor of parameter ``name`` (a tied one's under its first name), None when absent."""
        held = self.names.get(name)
        return None if held is None else weights[held]

    def grads_to(self, k: int) -> None:
        """Slot k's share of the stacked gradients to its model's parameters (views: no copy)."""
        for name, p in self.models[k].named_parameters():
            grad = self.stacked[self.names[name]].grad
            p.grad = None if grad is None else grad[k]

    def zero_grad(self) -> None:
        for p in self.stacked.values():
            p.grad = None
