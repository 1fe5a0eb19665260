"""The built-in tiny model, made on this machine (never downloaded).

``bootstrap_tiny(out)`` builds a character-level tokenizer (the tokenizers library, wrapped as a
PreTrainedTokenizerFast) and a ~650 k-parameter Llama-style model, then warms it up with a short supervised
phase on the arithmetic task until its pass@1 at temperature 1 lies in the band RL can learn from
(10–50 %: some successes to reinforce, plenty of room to improve).
"""
from __future__ import annotations

import json
import os
import string
import time

import torch

from training.data import BUILTIN_TASKS, HELD_OUT_OFFSET

SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]
ALPHABET = string.digits + "+-*/=()<>:,. " + string.ascii_lowercase


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS + list(ALPHABET))}
    # BPE with no merges over a character vocabulary = a character-level tokenizer with <unk> fallback.
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>",
                                   eos_token="<eos>", unk_token="<unk>", padding_side="left")


def build_model(tokenizer, seed: int = 0, hidden: int = 128, layers: int = 4):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=128, tie_word_embeddings=True,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    return LlamaForCausalLM(config)


def encode_prompt(tokenizer, prompt: str) -> list[int]:
    """Prompt token ids: the tokenizer's BOS (when it has one and does not add it itself), then the text."""
    ids = tokenizer.encode(prompt, add_special_tokens=True)
    bos = tokenizer.bos_token_id
    if bos is not None and (not ids or ids[0] != bos):
        ids = [bos] + ids
    return ids


def _sft_batch(tokenizer, indices: list[int], task: str):
    """Teacher-forcing batch: loss only on answer tokens and the closing <eos>."""
    seqs, labels = [], []
    for i in indices:
        ex = BUILTIN_TASKS[task](i)
        p = encode_prompt(tokenizer, ex["prompt"])
        a = tokenizer.encode(ex["answer"], add_special_tokens=False) + [tokenizer.eos_token_id]
        seqs.append(p + a)
        labels.append([-100] * len(p) + a)
    width = max(map(len, seqs))
    pad = tokenizer.pad_token_id
    ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs])
    lab = torch.tensor([lb + [-100] * (width - len(lb)) for lb in labels])
    att = (torch.arange(width)[None, :] < torch.tensor([len(s) for s in seqs])[:, None]).long()
    return ids, lab, att


def bootstrap_tiny(out_dir: str, *, task: str = "arithmetic", seed: int = 0, band=(0.15, 0.45),
                   max_steps: int = 4000, lr: float = 1e-3, log=print) -> dict:
    """Build, warm up and save the tiny model; returns what happened (steps, pass@1, seconds)."""
    from training.evaluate import evaluate_examples

    t0 = time.time()
    torch.manual_seed(seed)
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, seed=seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    held_out = [BUILTIN_TASKS[task](HELD_OUT_OFFSET + i) for i in range(200)]
    pass1, step = 0.0, 0
    for step in range(1, max_steps + 1):
        idx = torch.randint(0, HELD_OUT_OFFSET, (128,), generator=gen).tolist()
        ids, lab, att = _sft_batch(tokenizer, idx, task)
        loss = model(input_ids=ids, attention_mask=att, labels=lab).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 25 == 0:
            model.eval()
            res = evaluate_examples(model, tokenizer, held_out, n=4, ks=[1], temperature=1.0,
                                    max_new_tokens=8, rewards=[{"name": "exact"}], seed=seed)
            model.train()
            pass1 = res["pass@k"]["1"]
            log(f"bootstrap step {step}: sft loss {loss.item():.3f}, pass@1 {pass1:.3f}")
            if pass1 >= band[0]:
                break
    if not band[0] <= pass1 <= band[1]:
        raise RuntimeError(f"tiny model warm-up ended at pass@1 {pass1:.3f}, outside {band}")
    os.makedirs(out_dir, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    info = {"task": task, "sft_steps": step, "pass@1": pass1, "seconds": round(time.time() - t0, 1),
            "parameters": sum(p.numel() for p in model.parameters())}
    with open(os.path.join(out_dir, "seedbed_bootstrap.json"), "w") as fh:
        json.dump(info, fh, indent=2)
    return info
