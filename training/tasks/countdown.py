"""``countdown``: reach a target with three given digits and + - *, scored by the ``countdown`` verifier
(``training/verifiers/countdown.py``)."""
from __future__ import annotations

import random

from training.tasks import Task


def countdown_example(index: int) -> dict:
    """Reach ``target`` with three given numbers, each used at most once, with + - * (a harder task).

    The prompt is ``"3 5 7>22:"``; a completion is an expression such as ``3*5+7``; the verifier
    ``countdown`` evaluates it safely.
    """
    rng = random.Random(index * 104729 + 3)
    nums = [rng.randrange(1, 10) for _ in range(3)]
    a, b, c = nums
    ops = [rng.choice("+-*") for _ in range(2)]
    target = safe_eval(f"{a}{ops[0]}{b}{ops[1]}{c}")
    return {"prompt": f"{a} {b} {c}>{target}:", "answer": str(target), "numbers": nums, "target": target}


def safe_eval(expr: str) -> int:
    """Evaluate an expression of single digits and + - * only (no eval())."""
    tokens = list(expr)
    # precedence: first fold multiplications, then + and - left to right
    terms: list = []
    i = 0
    while i < len(tokens):
        terms.append(tokens[i])
        i += 1
    out = [int(terms[0])]
    ops = []
    for j in range(1, len(terms), 2):
        op, val = terms[j], int(terms[j + 1])
        if op == "*":
            out[-1] = out[-1] * val
        else:
            ops.append(op)
            out.append(val)
    total = out[0]
    for op, val in zip(ops, out[1:]):
        total = total + val if op == "+" else total - val
    return total


TASK = Task(name="countdown", example=countdown_example, rewards=({"name": "countdown", "weight": 1.0},),
            what="reach a target with three digits and + - * (generated)", order=1)
