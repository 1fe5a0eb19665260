"""``arithmetic``: "a+b=" with a, b in 0..99, scored by ``exact`` (the task the built-in tiny model learns)."""
from __future__ import annotations

import random

from training.tasks import Task


def arithmetic_example(index: int) -> dict:
    """``"a+b="`` with a, b in 0..99; the answer is the decimal sum.

    >>> arithmetic_example(0)["prompt"] == arithmetic_example(0)["prompt"]
    True
    """
    rng = random.Random(index * 7919 + 17)
    a, b = rng.randrange(100), rng.randrange(100)
    return {"prompt": f"{a}+{b}=", "answer": str(a + b)}


TASK = Task(name="arithmetic", example=arithmetic_example, rewards=({"name": "exact", "weight": 1.0},),
            what="a+b= with two-digit numbers (generated)", order=0)
