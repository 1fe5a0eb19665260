"""Held-out evaluation: n samples per problem, per-problem correct counts (n, c), unbiased pass@k.

A completion counts as correct when every verifier of the reward spec gives it its full score (1.0).
Results are stored per problem so any k can be recomputed later.
"""
from __future__ import annotations

import time

import torch

from training.algorithms import pass_at_k
from training.rollout import HFRolloutEngine
from training.verifiers import build_reward


def decode_completions(tokenizer, batch) -> list[str]:
    eos = tokenizer.eos_token_id
    kept = [[t for t, keep in zip(ids, m) if keep and t != eos]
            for ids, m in zip(batch.completion_ids.tolist(), batch.completion_mask.tolist())]
    return tokenizer.batch_decode(kept, skip_special_tokens=True)


def is_correct(reward_batch, i: int) -> bool:
    return all(col[i] is not None and col[i] >= 1.0 for col in reward_batch.scores.values())


def evaluate_examples(model, tokenizer, examples: list[dict], *, n: int, ks: list[int], temperature: float = 1.0,
                      top_p: float = 1.0, max_new_tokens: int = 8, rewards: list[dict], seed: int = 0,
                      batch_size: int = 256, keep_completions: int = 0, template=None) -> dict:
    from training.prompts import PLAIN

    template = template or PLAIN
    if not examples:
        raise ValueError("data: the evaluation dataset is empty")
    bad = [k for k in ks if k > n or k < 1]
    if bad:
        raise ValueError(f"k: every k must lie in 1..n (n={n}); got {bad}")
    t0 = time.time()
    engine = HFRolloutEngine(model, tokenizer)
    reward = build_reward(rewards)
    gen = torch.Generator().manual_seed(seed)
    jobs = [(pi, ex) for pi, ex in enumerate(examples) for _ in range(n)]
    correct = [0] * len(examples)
    samples: list[list[dict]] = [[] for _ in examples]
    for start in range(0, len(jobs), batch_size):
        chunk = jobs[start:start + batch_size]
        batch = engine.generate([template.encode_example(tokenizer, ex) for _, ex in chunk],
                                max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, top_k=0,
                                generator=gen, stop=template.stop)
        texts = decode_completions(tokenizer, batch)
        rb = reward(texts, [ex for _, ex in chunk])
        for i, (pi, _) in enumerate(chunk):
            ok = is_correct(rb, i)
            correct[pi] += ok
            if len(samples[pi]) < keep_completions:
                samples[pi].append({"completion": texts[i], "correct": ok, "details": rb.details[i]})
    problems = [{"prompt": ex["prompt"], "answer": ex.get("answer"), "n": n, "c": c, "samples": s}
                for ex, c, s in zip(examples, correct, samples)]
    curve = {str(k): sum(pass_at_k(n, c, k) for c in correct) / len(correct) for k in ks}
    return {"pass@k": curve, "problems": problems, "seconds": round(time.time() - t0, 2)}
