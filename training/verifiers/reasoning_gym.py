"""The ``reasoning_gym`` verifier: a reasoning-gym task's answer judged by that task's own ``score_answer``
(the package's reference scorer: partial credit where the task gives it, e.g. a near-miss number).

The answer is first taken out of the completion the way the prompt asked for it: inside
``<answer>…</answer>`` (reasoning-gym's convention; the last one counts), in the last ``\\boxed{}``, on the
last non-empty line, the last number, or the whole completion.
"""
from __future__ import annotations

import functools
import re

from training.verifiers.base import Param, VerifierError, VerifierResult, register_verifier
from training.verifiers.math_answer import find_boxed

_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def extract_answer(completion: str, how: str = "answer_tag") -> str | None:
    """The answer part of a completion, or None when it has none in the asked form.

    >>> extract_answer("I think <answer>4</answer>, no: <answer> 5 </answer>")
    '5'
    >>> extract_answer("so \\\\boxed{12}", "boxed"), extract_answer("work\\n\\n 7 \\n", "last_line")
    ('12', '7')
    """
    if how == "answer_tag":
        found = _ANSWER_TAG.findall(completion)
        return found[-1].strip() if found else None
    if how == "boxed":
        boxed = find_boxed(completion)
        return boxed[-1].strip() if boxed else None
    if how == "last_number":
        numbers = _NUMBER.findall(completion)
        return numbers[-1] if numbers else None
    if how == "last_line":
        lines = [line.strip() for line in completion.splitlines() if line.strip()]
        return lines[-1] if lines else None
    return completion.strip()


@functools.lru_cache(maxsize=None)
def _scorer(task: str):
    import reasoning_gym

    return reasoning_gym.get_score_answer_fn(task)


@register_verifier("reasoning_gym")
def reasoning_gym_score(completion: str, example: dict, *, extract: str = "answer_tag") -> VerifierResult:
    """Score in [0, 1] from the task's own ``score_answer(answer, entry)``; 0 when no answer was given in the
    asked form. ``example`` is a reasoning-gym entry (question, answer, metadata.source_dataset)."""
    task = (example.get("metadata") or {}).get("source_dataset")
    if not task:
        raise VerifierError("reasoning_gym: the example is not a reasoning-gym entry (no metadata.source_dataset)")
    answer = extract_answer(completion, extract)
    if answer is None:
        return VerifierResult(0.0, {"reason": f"no answer in the form asked ({extract})", "task": task})
    try:
        score = float(_scorer(task)(answer, example))
    except Exception as exc:  # the package's scorer failing is an infrastructure error, not a wrong answer
        raise VerifierError(f"reasoning_gym {task}: score_answer failed: {exc}") from exc
    return VerifierResult(score, {"task": task, "answer": answer[:200], "expected": str(example.get("answer"))[:200]})


reasoning_gym_score.PARAMS = {"extract": Param(str, choices=("answer_tag", "boxed", "last_line", "last_number",
                                                             "whole"))}
