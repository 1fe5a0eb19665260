"""vLLM rollout engine (GPU only; the optional ``gpu`` extra). Importing this module without vLLM raises
ImportError with the way to get it, so the rest of Seedbed never needs vLLM.

The policy's weights live in the trainer's model; after every optimizer step ``sync_weights`` pushes them
into the vLLM engine (``load_weights`` on the engine's model), so sampling always uses the current policy.
Sampled-token log-probabilities are taken after temperature/top-p processing
(``logprobs_mode="processed_logprobs"``) so they are π_rollout, the distribution actually sampled from.
Completions end where the hf engine ends them: at the model's end tokens (``end_token_ids``) or once the text
contains a stop string (``stop``; vLLM keeps the tokens up to the one that completed it, and so do we).
"""
from __future__ import annotations

try:
    import vllm
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
except ImportError as exc:  # pragma: no cover - exercised only where vLLM is absent
    raise ImportError("rollout_engine 'vllm' needs vLLM, a GPU-only optional extra: "
                      "pip install -e '.[gpu]' on a CUDA machine (or use rollout_engine: hf)") from exc

import torch

from training.rollout import RolloutBatch, end_token_ids


class VLLMRolloutEngine:
    def __init__(self, model, tokenizer, *, gpu_memory_utilization: float = 0.35, seed: int = 0):
        self.pad_id, self.end_ids = tokenizer.pad_token_id, end_token_ids(model, tokenizer)
        self.llm = LLM(model=model.name_or_path, tokenizer=model.name_or_path, dtype=str(model.dtype).split(".")[-1],
                       gpu_memory_utilization=gpu_memory_utilization, seed=seed, enable_prefix_caching=False,
                       logprobs_mode="processed_logprobs")
        self.sync_weights(model)

    def sync_weights(self, model) -> None:
        state = {k: v.detach() for k, v in model.state_dict().items()}
        if hasattr(self.llm, "apply_model"):  # vLLM >= 0.10 (V1 engine)
            self.llm.apply_model(lambda m: m.load_weights(state.items()))
        else:
            self.llm.llm_engine.model_executor.driver_worker.model_runner.model.load_weights(state.items())

    def generate(self, prompts, *, max_new_tokens, temperature, top_p, top_k, generator,
                 keep_sampling_mask=False, record_routing=False, stop=(), row_seeds=None) -> RolloutBatch:
        if keep_sampling_mask or record_routing:
            raise ValueError("rollout_engine 'vllm': keep_sampling_mask and keep_routing need the hf engine "
                             "(vLLM does not return kept-token masks or expert choices)")
        # one seed per request: with row_seeds a row's sample does not depend on the batch around it (vLLM seeds
        # each request's own generator), as in the hf engine
        seeds = ([int(s) % (2**31 - 1) for s in row_seeds] if row_seeds is not None else
                 [int(torch.randint(0, 2**31 - 1, (1,), generator=generator))] * len(prompts))
        params = [SamplingParams(n=1, temperature=temperature, top_p=top_p, top_k=top_k if top_k > 0 else -1,
                                 max_tokens=max_new_tokens, logprobs=0, seed=seed, stop=list(stop) or None,
                                 include_stop_str_in_output=True, stop_token_ids=self.end_ids) for seed in seeds]
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], sampling_params=params,
                                 use_tqdm=False)
        B, P = len(prompts), max(map(len, prompts))
        T = max(1, max(len(o.outputs[0].token_ids) for o in outs))
        prompt_ids = torch.full((B, P), self.pad_id, dtype=torch.long)
        prompt_mask = torch.zeros((B, P), dtype=torch.long)
        comp = torch.full((B, T), self.pad_id, dtype=torch.long)
        cmask = torch.zeros((B, T))
        logp = torch.zeros((B, T))
        truncated = torch.zeros(B, dtype=torch.bool)
        for i, (p, o) in enumerate(zip(prompts, outs)):
            prompt_ids[i, P - len(p):] = torch.tensor(p)
            prompt_mask[i, P - len(p):] = 1
            c = o.outputs[0]
            ids = list(c.token_ids)
            comp[i, :len(ids)] = torch.tensor(ids, dtype=torch.long)
            cmask[i, :len(ids)] = 1
            logp[i, :len(ids)] = torch.tensor([lp[t].logprob for t, lp in zip(ids, c.logprobs)])
            truncated[i] = c.finish_reason == "length"
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        return RolloutBatch(prompt_ids.to(dev), prompt_mask.to(dev), comp.to(dev), cmask.to(dev), logp.to(dev),
                            truncated.to(dev))


__all__ = ["VLLMRolloutEngine", "vllm"]
