"""Keep routing on a tiny random Qwen2-MoE (2 layers, 4 experts, top-2) on CPU."""
import torch
from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

from training.rollout import HFRolloutEngine, sequence_logprobs
from training.routing import RoutingReplay, router_modules


class _Tok:
    pad_token_id, eos_token_id = 0, 1


def _tiny_moe():
    torch.manual_seed(0)
    cfg = Qwen2MoeConfig(vocab_size=32, hidden_size=32, intermediate_size=64, moe_intermediate_size=32,
                         shared_expert_intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=4, num_experts=4, num_experts_per_tok=2, decoder_sparse_step=1,
                         max_position_embeddings=64, pad_token_id=0, eos_token_id=1, bos_token_id=2)
    model = Qwen2MoeForCausalLM(cfg)
    for name, mod in router_modules(model).items():  # make routing non-trivial
        torch.nn.init.normal_(mod.weight, std=1.0)
    return model


def test_recorded_experts_are_replayed_in_training(tmp_path):
    model = _tiny_moe()
    routers = router_modules(model)
    assert len(routers) == 2
    prompts = [[2, 5, 6, 7], [2, 9, 3], [2, 4, 4, 4, 8]]
    batch = HFRolloutEngine(model, _Tok()).generate(prompts, max_new_tokens=5, temperature=1.0, top_p=1.0,
                                                     top_k=0, generator=torch.Generator().manual_seed(1),
                                                     record_routing=True)
    L = batch.prompt_ids.shape[1] + batch.completion_ids.shape[1]
    assert set(batch.routing) == set(routers)
    for ids in batch.routing.values():
        assert ids.shape == (3, L, 2)
        assert (ids[:, :-1] >= 0).all()  # everything but the last sampled token went through the model

    # the same weights: replay reproduces the sampling log-probs
    with RoutingReplay(model, batch.routing):
        logp, _ = sequence_logprobs(model, batch, temperature=1.0)
    m = batch.completion_mask.bool()
    assert torch.allclose(logp[m], batch.sampling_logp[m], atol=1e-4)

    # change the routers (as an optimizer step would): without replay the experts change, with replay not
    with torch.no_grad():
        for mod in routers.values():
            mod.weight.add_(torch.randn_like(mod.weight) * 2.0)
    seen = {}

    def capture(name):
        def hook(mod, inp, out):
            seen[name] = out[2].reshape(3, L, 2)
        return hook

    handles = [mod.register_forward_hook(capture(n)) for n, mod in routers.items()]
    sequence_logprobs(model, batch, temperature=1.0)
    free = {n: v.clone() for n, v in seen.items()}
    for h in handles:
        h.remove()
    with RoutingReplay(model, batch.routing):
        # registered after the replay hook, so it sees the router's output as the model uses it
        handles = [mod.register_forward_hook(capture(n)) for n, mod in routers.items()]
        logp_replay, _ = sequence_logprobs(model, batch, temperature=1.0)
    for h in handles:
        h.remove()
    changed = any(not torch.equal(free[n][:, :-1], batch.routing[n][:, :-1]) for n in routers)
    assert changed, "perturbing the router should change some expert choices"
    for n in routers:
        assert torch.equal(seen[n][:, :-1], batch.routing[n][:, :-1])
    # gradients still reach the router through the recomputed weights of the replayed experts
    (-(logp_replay * batch.completion_mask).sum()).backward()
    assert all(mod.weight.grad is not None and mod.weight.grad.abs().sum() > 0 for mod in routers.values())
