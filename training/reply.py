"""One reply from a model folder, for the models page's "try it" box (run by a worker, see
webapp.library.services.model_try_run).

No Django here: the folder is loaded with transformers (float32, CPU), the prompt is rendered by Seedbed's own
``PromptTemplate`` (the model's chat template when it has one and chat is on, plain text otherwise: what a run
with ``chat_template: auto`` or ``off`` would give it), and the reply is sampled at ``temperature`` (greedy at 0)
until an EOS token, ``max_new_tokens``, or the end of the model's context.
"""
from __future__ import annotations

import time


def generate_reply(folder: str, prompt: str, *, max_new_tokens: int, temperature: float, chat: bool) -> dict:
    """Load ``folder`` and answer ``prompt``. Returns {"reply", "rendered", "chat_used", "tokens", "stop_reason",
    "seconds"}; ``tokens`` counts the generated tokens, the EOS included; ``stop_reason`` is "eos",
    "max_new_tokens" or "context" (the model's context length was reached first). Raises ValueError when the
    prompt alone fills the context."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from training.prompts import PromptTemplate
    from training.rollout import end_token_ids

    started = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).to("cpu").eval()
    template = PromptTemplate(chat="auto" if chat else "off")
    ids = template.encode(tokenizer, prompt)
    context = getattr(model.config, "max_position_embeddings", None)
    room = max_new_tokens if context is None else min(max_new_tokens, context - len(ids))
    if room < 1:
        raise ValueError(f"prompt: {len(ids)} tokens once rendered; the model's context holds {context}")
    stops = end_token_ids(model, tokenizer)  # EOS, the generation config's, the chat template's end of turn
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (stops[0] if stops else 0)
    # A fresh generation config: only what the form says (the folder's own defaults, e.g. a top_k, stay out).
    sampling = dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0) if temperature > 0 else \
        dict(do_sample=False)
    config = GenerationConfig(max_new_tokens=room, eos_token_id=stops or None, pad_token_id=pad, **sampling)
    prompt_ids = torch.tensor([ids])
    with torch.no_grad():
        out = model.generate(prompt_ids, attention_mask=torch.ones_like(prompt_ids), generation_config=config)
    new = out[0, len(ids):].tolist()
    ended = next((i for i, t in enumerate(new) if t in stops), None)
    if ended is not None:
        new = new[:ended + 1]
    stop_reason = "eos" if ended is not None else "max_new_tokens" if room == max_new_tokens else "context"
    return {"reply": tokenizer.decode(new, skip_special_tokens=True), "rendered": template.render(tokenizer, prompt),
            "chat_used": template.uses_chat(tokenizer), "tokens": len(new), "stop_reason": stop_reason,
            "seconds": time.monotonic() - started}
