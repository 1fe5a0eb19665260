"""The rollout engine a run names (``rollout_engine``; docs/architecture.md "The training core"): ``hf``, the
policy's own transformers model (``training.rollout.HFRolloutEngine``), or ``vllm`` (``training.rollout_vllm``, the
optional ``gpu`` extra, imported only when named). Both build on ``training.rollout``'s batch and end tokens; the
choice sits above them so that neither imports the other back.
"""
from __future__ import annotations

from training.rollout import HFRolloutEngine, RolloutEngine


def make_rollout_engine(name: str, model, tokenizer, **kw) -> RolloutEngine:
    if name == "hf":
        return HFRolloutEngine(model, tokenizer)
    if name == "vllm":
        from training.rollout_vllm import VLLMRolloutEngine  # optional 'gpu' extra
        return VLLMRolloutEngine(model, tokenizer, **kw)
    raise ValueError(f"rollout_engine: unknown engine {name!r}")
