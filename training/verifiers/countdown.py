"""``countdown``: the expression a completion gives, checked against the given digits and the target of a
``countdown`` example (``training/tasks/countdown.py``)."""
from __future__ import annotations

from training.tasks.countdown import safe_eval
from training.verifiers.base import VerifierResult, register_verifier


@register_verifier("countdown")
def countdown(completion: str, example: dict) -> VerifierResult:
    """Score 1.0 when the expression uses only the given digits (each at most once) and + - *, and hits
    the target.

    >>> countdown("3*5+7", {"numbers": [3, 5, 7], "target": 22}).score
    1.0
    """
    expr = completion.strip()
    nums = list(example["numbers"])
    # ASCII digits only: str.isdigit() and int() also take "３" and "٣" for 3, and "²" for a digit
    ok_shape = (len(expr) % 2 == 1 and all(c in "0123456789" for c in expr[0::2])
                and all(c in "+-*" for c in expr[1::2]))
    if not ok_shape:
        return VerifierResult(0.0, {"reason": "not an expression of digits and + - *", "expr": expr})
    for d in expr[0::2]:
        if int(d) not in nums:
            return VerifierResult(0.0, {"reason": f"digit {d} not available", "expr": expr})
        nums.remove(int(d))
    value = safe_eval(expr)
    return VerifierResult(float(value == example["target"]), {"value": value, "target": example["target"]})
