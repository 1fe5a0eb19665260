"""Which runs may train together in one process (docs/architecture.md#packed-seeds): the rule, in one place.

Seeds of a packed group share every model call of a step (``training.seed_group.StackGroup``), so their configs
must agree on everything that shapes those calls or is shared by them: the model, the batch (prompts per step,
group size, completion length, micro-batches), the sampler's options, the precision, the algorithm's switches.
They may differ in ``PER_SEED``: the seed, the optimizer's numbers, the clip ranges, the temperature (each row
is sampled and scored at its own seed's), a KL weight when every seed has one or none does (zero means no
reference model), and when they stop, checkpoint, evaluate and log. Only Seedbed's own engine packs, one process
(``nproc_per_node`` and ``nnodes`` 1), the hf sampler, no keep-routing (MoE replay), and a Llama-family model
(``training.prefill.LLAMA_FAMILY``, checked when the model is loaded).
"""
from __future__ import annotations

#: the model types a packed group trains (``training.stack_forward`` is their decoder): ``training.prefill``'s
#: LLAMA_FAMILY, named here without torch so the web app can check a sweep's model (tests hold them equal)
PACKABLE_MODEL_TYPES = frozenset({"llama", "mistral", "qwen2"})

#: the config fields the seeds of one packed group may differ in: none changes a step's shapes or shared calls
PER_SEED = frozenset({
    "seed", "lr", "weight_decay", "warmup_steps", "max_grad_norm", "eps_low", "eps_high", "dual_clip",
    "temperature", "kl_coef", "total_steps", "checkpoint_every", "keep_checkpoints", "keep_best",
    "keep_best_metric", "samples_per_step", "eval_every", "max_restarts",
})


def solo_only(cfg) -> str | None:
    """Why a run of ``cfg`` trains alone whatever the others are (None when it may be packed)."""
    if cfg.engine != "seedbed":
        return f"engine {cfg.engine}: only Seedbed's own loop packs seeds"
    if cfg.nproc_per_node != 1 or cfg.nnodes != 1:
        return "a run over several ranks (nproc_per_node or nnodes above 1) is not packed"
    if cfg.rollout_engine != "hf":
        return f"rollout_engine {cfg.rollout_engine}: packed seeds sample with the hf engine"
    if cfg.keep_routing:
        return "keep_routing replays one model's experts: not packed"
    return None


def pack_conflict(configs: list) -> str | None:
    """Why these runs cannot train in one process (the first reason found, naming the field), or None."""
    for cfg in configs:
        reason = solo_only(cfg)
        if reason:
            return reason
    first = configs[0].to_dict()
    for cfg in configs[1:]:
        other = cfg.to_dict()
        for key in sorted(set(first) | set(other)):
            if key not in PER_SEED and first.get(key) != other.get(key):
                return (f"{key} differs ({first.get(key)!r} and {other.get(key)!r}): packed seeds differ only in "
                        f"{', '.join(sorted(PER_SEED))}")
        if (configs[0].kl_coef > 0) != (cfg.kl_coef > 0):
            return "kl_coef: zero for some seeds and not others (zero means no reference model)"
    return None
