"""The ``reasoning_gym`` verifier: a reasoning-gym task's answer judged by that task's own ``score_answer``
(the package's reference scorer: partial credit where the task gives it, e.g. a near-miss number).

The answer is first taken out of the completion the way the prompt asked for it (``extract``, one of the forms
of :mod:`training.verifiers.answers`, shared with ``math``): inside ``<answer>…</answer>`` (reasoning-gym's
convention; the last one counts), in the last ``\\boxed{}``, after ``####``, on an "Answer:" line, on the last
non-empty line, the last number, or the whole completion.
"""
from __future__ import annotations

import functools

from training.verifiers.answers import FORMS, extract
from training.verifiers.base import Param, VerifierError, VerifierResult, register_verifier


def extract_answer(completion: str, how: str = "answer_tag") -> str | None:
    """The answer part of a completion, or None when it has none in the asked form (one of
    :data:`training.verifiers.answers.FORMS`).

    >>> extract_answer("I think <answer>4</answer>, no: <answer> 5 </answer>")
    '5'
    >>> extract_answer("so \\\\boxed{12}", "boxed"), extract_answer("work\\n\\n 7 \\n", "last_line")
    ('12', '7')
    """
    return extract(completion, how)


def _hedges(answer: str, gold: str) -> bool:
    """Whether the answer hedges ("3 or 4", "maybe 3", "3?", "$3$/$4$") where the gold does not: the ``math``
    verifier's rule for a plain-text answer (:func:`training.verifiers.math_answer.text_hedge`).

    >>> _hedges("-4 or -3", "-4"), _hedges("maybe -4", "-4"), _hedges("-4", "-4"), _hedges("yes or no", "yes or no")
    (True, True, False, False)
    """
    from training.verifiers.math_answer import text_hedge
    return text_hedge(answer, "text") is not None and text_hedge(gold, "text") is None


def _tampers(answer: str) -> bool:
    """Whether the answer holds TeX programming (``\\def``, ``\\newcommand``, ``\\let``, ``\\iffalse``), the
    ``math`` verifier's rule (:data:`training.verifiers.math_answer.TEX_PROGRAMMING`); "#" and "%" are left to
    the task (a grid or a percentage may hold them)."""
    from training.verifiers.math_answer import TEX_PROGRAMMING
    return TEX_PROGRAMMING.search(answer) is not None


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
    if _hedges(answer, str(example.get("answer", ""))):  # the tasks' scorers give "3 or 4" partial credit
        return VerifierResult(0.0, {"reason": "hedged answer", "task": task, "answer": answer[:200]})
    if _tampers(answer):  # and "\\def\\ans{-4}\\ans" too
        return VerifierResult(0.0, {"reason": "checker tampering", "task": task, "answer": answer[:200]})
    try:
        score = float(_scorer(task)(answer, example))
    except Exception as exc:  # the package's scorer failing is an infrastructure error, not a wrong answer
        raise VerifierError(f"reasoning_gym {task}: score_answer failed: {exc}") from exc
    return VerifierResult(score, {"task": task, "answer": answer[:200], "expected": str(example.get("answer"))[:200]})


reasoning_gym_score.PARAMS = {"extract": Param(str, choices=FORMS)}
