"""The ``math`` verifier's equivalence check, run in worker processes (docs/architecture.md#verifiers):
``math_verify.verify(parse(gold), parse(answer))``, gold first (math-verify's relation is not symmetric: a gold
set accepts an unordered list, a gold interval fixes its bounds), pair by pair over what each parse gives (a
sympy object and its normalised string, :func:`verify_any`), so an answer sympy cannot compare (``12:00``) still
equals the same text. math-verify times out with SIGALRM, which only works on a process's main thread, so these
functions run in a worker pool's processes (:class:`training.verifiers.math_answer.MathVerifier` drives it).

The gold is read as LaTeX, or as a prose number when it is one with a space or comma (:func:`gold_input`); an
answer as the extraction read it (:func:`parse_input`). Math-verify's own timeout on the answer is a 0 with the
reason "answer timed out" (the answer's fault); on the gold it is status ``timeout``, which the verifier raises
as a VerifierError: it could not judge.
"""
from __future__ import annotations

import functools
import re
import time
from itertools import product

UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")
# A plain number as Math-Verify reads one in prose (its ExprExtractionConfig): thousands groups after a space
# or a comma ("1 000", "-1,234.5"), or a decimal comma ("2,5"). As LaTeX "1 000" is 1*000 and "2,5" a set.
_PROSE_NUMBER = re.compile(r"-?(?:[1-9]\d{0,2}(?:[ ,]\d{3})+(?:\.\d+)?|\d+,\d{1,2})")
READ_AS = ("latex", "text", "completion")


def _has_math(text: str) -> bool:
    return bool(UNESCAPED_DOLLAR.search(text)) or "\\boxed" in text or "\\fbox" in text


def parse_input(text: str, read_as: str) -> str:
    """The string handed to ``math_verify.parse`` for an answer read as ``read_as``, so that it parses as
    Math-Verify parses that answer where the completion gives it.

    ``latex`` (a box's content, a math span's): wrapped in ``$…$`` unless it holds a math delimiter already
    (an unescaped ``$`` — ``\\$`` is a dollar sign — or a box). ``text`` (plain text after an answer marker,
    in an answer tag, after ``####``): as the text of an "Answer:" line, so ``1 000`` is 1000, ``2,5`` is 2.5,
    a ``$…$`` span in it is found as Math-Verify finds it, and LaTeX outside ``$…$`` means what it means to
    Math-Verify there. ``completion`` (mode lenient): as it is.

    >>> parse_input("1 000", "text"), parse_input("1 000", "latex"), parse_input(r"\\$16", "latex")
    ('Answer: 1 000', '$1 000$', '$\\\\$16$')
    """
    if read_as == "completion":
        return text
    text = text.strip()
    if read_as == "text":
        return f"Answer: {text}"
    return text if _has_math(text) else f"${text}$"


def gold_input(gold: str) -> str:
    """The string handed to ``math_verify.parse`` for a gold answer: LaTeX (datasets write ``\\frac{1}{2}``
    without dollars; wrapped as :func:`parse_input` wraps a box), except a plain number with a space or comma
    in it, which reads as Math-Verify reads numbers in prose (``1 000`` is 1000, ``2,5`` is 2.5).

    >>> gold_input("1 000"), gold_input(r"\\frac{1}{2}"), gold_input("$x$")
    ('1 000', '$\\\\frac{1}{2}$', '$x$')
    """
    gold = gold.strip()
    return gold if _PROSE_NUMBER.fullmatch(gold) else parse_input(gold, "latex")


@functools.lru_cache(maxsize=4096)
def _parse_gold(gold: str, timeout_s: int):
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse
    return parse(gold_input(gold), [LatexExtractionConfig(), ExprExtractionConfig()],
                 parsing_timeout=timeout_s, raise_on_error=True)


def _is_nan_or_zoo(obj) -> bool:
    from sympy import Basic, nan, zoo
    return isinstance(obj, Basic) and (obj == nan or obj == zoo)


def verify_any(gold_parsed: list, answer_parsed: list, float_rounding: int, timeout_s: int) -> tuple[bool, str | None]:
    """``(correct, why)``: Math-Verify's ``verify(gold, answer)`` over every (gold, answer) pair of the two
    parses (each a sympy object and its string), correct when any pair is equal — its own rule, as in
    ``math_verify.grader.verify``, with one difference: a timeout raises ``TimeoutException`` (the caller
    reports that it could not judge) instead of counting as "not equal". A pair that sympy cannot compare
    (``12:00`` parses to ``zoo``; ``zoo == zoo`` raises) is not equal, and the next pair is tried: the two
    strings, equal when the normalised texts are.
    """
    from math_verify import verify
    from math_verify.errors import TimeoutException

    failed = None
    for gold, answer in product(gold_parsed, answer_parsed):
        try:
            if verify(gold, answer, float_rounding=float_rounding, timeout_seconds=timeout_s, raise_on_error=True):
                return True, None
        except TimeoutException:
            raise
        except Exception as exc:  # sympy could not compare this pair: not the same answer; try the next pair
            failed = failed or f"comparison failed: {type(exc).__name__}"
    return False, failed or "not equivalent to the gold answer"


def check_in_worker(gold: str, answer: str, float_rounding: int, timeout_s: int,
                    same_text_shortcut: bool = True, read_as: str = "latex") -> dict:
    """math-verify on this process's main thread. Returns {"status": ok|timeout|bad_gold, ...}.

    The gold is read by :func:`gold_input`, the answer as ``read_as`` (:func:`parse_input`)."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse
    from math_verify.errors import TimeoutException

    start = time.perf_counter()
    try:
        gold_parsed = _parse_gold(gold, timeout_s)
    except TimeoutException:
        return {"status": "timeout", "where": "parsing the gold answer"}
    except Exception as exc:  # the gold is data we were given: not parseable means we cannot judge
        return {"status": "bad_gold", "error": f"{type(exc).__name__}: {exc}"}
    if not gold_parsed:
        return {"status": "bad_gold", "error": "math-verify extracted nothing from the gold answer"}
    answer_input = parse_input(answer, read_as)
    if same_text_shortcut and answer_input == gold_input(gold) and not _is_nan_or_zoo(gold_parsed[0]):
        # The same text parses to the same objects, which math-verify's first test (a == b) accepts: skip
        # the second parse and the comparison. (For nan / zoo that test raises instead: no shortcut.)
        return {"status": "ok", "correct": True, "gold_parsed": str(gold_parsed[0]),
                "answer_parsed": str(gold_parsed[0]), "why": None, "gold_multi": _is_several_values(gold_parsed[0]),
                "check_s": round(time.perf_counter() - start, 6)}
    try:
        answer_parsed = parse(answer_input, [LatexExtractionConfig(), ExprExtractionConfig()],
                              parsing_timeout=timeout_s, raise_on_error=True)
    except TimeoutException:  # the model's own answer is too slow to read: a 0, with the reason
        return _answer_timed_out(gold_parsed, "parsing the answer", start)
    except Exception as exc:  # malformed model output: a wrong answer, not an infrastructure failure
        return {"status": "ok", "correct": False, "gold_parsed": str(gold_parsed[-1]),
                "answer_parsed": None, "why": f"answer not parseable: {type(exc).__name__}"}
    if not answer_parsed:
        return {"status": "ok", "correct": False, "gold_parsed": str(gold_parsed[-1]), "answer_parsed": None,
                "why": "answer not parseable"}
    try:
        correct, why = verify_any(gold_parsed, answer_parsed, float_rounding, timeout_s)
    except TimeoutException:
        return _answer_timed_out(gold_parsed, "comparing", start)
    return {"status": "ok", "correct": correct, "gold_parsed": str(gold_parsed[0]),
            "answer_parsed": str(answer_parsed[0]), "why": why, "answer_text": str(answer_parsed[-1]),
            "gold_multi": _is_several_values(gold_parsed[0]), "check_s": round(time.perf_counter() - start, 6)}


def _answer_timed_out(gold_parsed: list, where: str, start: float) -> dict:
    """The reply for an answer math-verify could not read or compare in time: wrong, reason "answer timed
    out" (Math-Verify's own verdict on a timeout is False too). A gold that times out is the verifier's
    problem instead (status "timeout": VerifierError)."""
    return {"status": "ok", "correct": False, "gold_parsed": str(gold_parsed[0]), "answer_parsed": None,
            "why": "answer timed out", "timed_out": where, "check_s": round(time.perf_counter() - start, 6)}


def _is_several_values(obj) -> bool:
    """Whether a parsed gold is several values: a set, a tuple, an interval, a union of them, or an inequality
    (what "$x = -3$ or $x = 2$", a list, a range or a bound may equal)."""
    from sympy import And, Equality, FiniteSet, Interval, Or, Tuple, Union
    from sympy.core.relational import Relational
    inequality = isinstance(obj, Relational) and not isinstance(obj, Equality)
    return (isinstance(obj, (Interval, Union, And, Or)) or inequality
            or (isinstance(obj, (FiniteSet, Tuple)) and len(obj.args) >= 2))


def check_chunk_in_worker(pairs: list[tuple[str, str, str]], float_rounding: int, timeout_s: int,
                          budget_s: float) -> list[dict | None]:
    """:func:`check_in_worker` on each (gold, answer, read_as) key (read_as "latex" when left out); None for
    the keys not started within ``budget_s``.

    The first pair always runs, so every chunk makes progress; the budget keeps a chunk (at most ``budget_s``
    plus one item's worst case, 3 x timeout_s) inside the pool's outer deadline.
    """
    start = time.perf_counter()
    replies: list[dict | None] = []
    for i, (gold, answer, *how) in enumerate(pairs):
        if i and time.perf_counter() - start > budget_s:
            replies.extend([None] * (len(pairs) - i))
            break
        replies.append(check_in_worker(gold, answer, float_rounding, timeout_s, read_as=how[0] if how else "latex"))
    return replies
