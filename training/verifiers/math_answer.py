"""The ``math`` verifier: final-answer extraction plus math-verify, run in worker processes.

Two modes (``mode``). **strict** (the default, for training: format is part of the reward) reads the answer
in the form the run's prompt asks for; **lenient** hands the whole completion to Math-Verify's own extraction
(the last mathematical expression, after its "final answer is" / box / "Answer:" priorities), as TRL's and
open-r1's rewards read it: what pass@k of a base model needs.

Extraction, strict (in the trusted parent, cheap), in the form the run's prompt asks for (``extract``; the forms
are :mod:`training.verifiers.answers`, shared with ``reasoning_gym``): ``boxed`` (the default) takes the
completion's last ``\\boxed{...}`` (or ``\\fbox{...}``), with braces matched, together with the boxes joined
to it ("``\\boxed{-2}`` and ``\\boxed{1}``": one answer, the set {-2, 1}, as Math-Verify reads it) unless a
"final answer is" marker follows them, and when there is none the configurable fallback (default: what follows the last "Answer:" / "Final answer:" / "the
answer is" marker, mid-line too, up to its sentence's end or across the display block it opens);
``answer_tag`` the last ``<answer>...</answer>``; ``hash`` the text after the last ``####`` (GSM8K);
``last_number`` the last number; ``auto`` tries boxed, then an answer tag, then ``####``, then the fallback.
``details["method"]`` names the form that matched. After a marker the answer runs to the end of its sentence:
math spans joined as Math-Verify joins them (``$-3$ and $2$``, up to six, by ",", "and" or "or") are one answer,
a set, and the rest of the sentence is read for a hedge. A hedge scores 0 wherever it is written (in a box,
between boxes or spans, after a marker, before or after a box in its sentence): candidates joined by "or", a "/"
between two separate math spans, an uncertain word ("maybe", "probably", "?") — except a complete list that
Math-Verify reads as one set equal to a gold of several values (``$x = -3$ or $x = 2$`` for the gold ``-3, 2``).
No answer scores 0; so do more than :data:`MAX_BOXES` different boxes, an answer over :data:`MAX_ANSWER_CHARS`,
TeX programming in the answer (``\\def``, ``#``, a ``%`` comment: checker tampering), and an answer whose
parsing or comparison times out (reason "answer timed out"; a gold that times out is a :class:`VerifierError`). A box's content, or a math span's after a marker,
is read as LaTeX (``\\$`` in it is a dollar sign); plain text after a marker as Math-Verify reads an "Answer:"
line (``1 000`` is 1000, ``2,5`` is 2.5; :func:`parse_input`); the gold as LaTeX, or as a prose number when it
is one with a space or comma (:func:`gold_input`).

Checking, fast: when gold and answer both fall in the small grammar of :mod:`math_fastpath` (integers,
decimals, fractions, percentages, simple radicals, ``x = v``), the parent decides exactly in microseconds,
and only where that module's rules give math-verify's own verdict; anything else, or too close to call, goes
to math-verify.

Checking, general: ``math_verify.verify(parse(gold), parse(answer))``, gold first (math-verify's relation
is not symmetric: a gold set accepts an unordered list, a gold interval fixes its bounds), pair by pair over
what each parse gives (a sympy object and its normalised string, :func:`verify_any`), so an answer sympy cannot
compare (``12:00``) still equals the same text. math-verify times out with SIGALRM, which only works on a
process's main thread, so checks run in a :class:`WorkerPool` whose workers do exactly that, under an outer
deadline that kills a stuck worker. Pairs travel in chunks (one message per chunk, not per pair); a worker
stops starting new pairs once a chunk has used its time budget, and a chunk that times out is retried one pair
per task so only the stuck pair fails. Math-verify's own timeout on the answer is a 0 (the answer's fault); on
the gold, the outer deadline, or a dead worker it raises :class:`VerifierError`: the verifier could not judge.

Agreement with Math-Verify 0.9.0 (``tests/verifiers/test_math_peer.py``): never a 1 where it gives 0; a 0 where
it gives 1 only for the :data:`INTENTIONAL_DIFFERENCES` (listed in :class:`MathVerifier`'s docstring and the
README).
"""
from __future__ import annotations

import functools
import hashlib
import math
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from itertools import product

from training.verifiers.answers import extract as extract_form
from training.verifiers.answers import (MAX_TAIL, final_answer_is_after, final_boxed_spans, find_boxed,
                                        find_boxed_spans, marked_answer)
from training.verifiers.base import Param, VerifierError, VerifierResult, register_verifier
from training.verifiers.math_fastpath import decide, parse_fast
from training.verifiers.workers import TaskFailed, TaskTimeout, WorkerPool

MAX_CHUNK = 16  # pairs per pool message: one round trip per chunk instead of per pair

# Hedges. Uncertain words: always a hedge. "or" between candidates: a hedge unless Math-Verify reads the
# candidates as one set (a box's content, boxes or math spans it joins) and the gold is that set of values.
_UNCERTAIN = re.compile(r"\b(?:maybe|possibly|probably|perhaps)\b|\?", re.IGNORECASE)
_OR = re.compile(r"\b(?:or|either)\b|\\(?:lor|vee)\b", re.IGNORECASE)
# two separate math spans with "/" between them ("$3$/$4$"): candidates, not a fraction
_SLASH_BETWEEN_SPANS = re.compile(r"(?:(?<!\\)\$|\\\)|\})\s*/\s*(?:(?<!\\)\$|\\\(|\\boxed|\\fbox)")
# after an answer, in its sentence: another candidate ("or 4", "/ $4$", "or \boxed{4}")
_ALTERNATIVE_AFTER = re.compile(r"(?:\b(?:or|either)\b|\\(?:lor|vee)\b|/)\s*(?:\$|\\\(|\\\[|\\boxed|\\fbox|\\[dt]?frac|"
                                r"\\sqrt|[-−+]?\.?[0-9])", re.IGNORECASE)
# right before a box, in its sentence: a candidate and "or" ("3 or \boxed{4}"), or an uncertain word
_ALTERNATIVE_BEFORE = re.compile(r"(?:[0-9]|(?<!\\)\$|\\\)|\})\s*(?:\bor\b|/)$", re.IGNORECASE)
_UNCERTAIN_BEFORE = re.compile(r"\b(?:maybe|possibly|probably|perhaps)\b[\s:,]*$", re.IGNORECASE)
_SENTENCE_START = re.compile(r"(?<!\\)[.;!?](?=\s)|\n")
# TeX programming in an answer: macro definitions, conditionals, a macro parameter "#", a "%" comment that hides
# the rest of its line. No answer needs them; they make the checker read something else than what is written
# ("\\boxed{4 # 3}" and "\\boxed{\\let\\four=3 \\four}" are 3 to Math-Verify, "4 %" + newline + "3" is 3 to a box)
_TEX_COMMANDS = (r"\\(?:[egx]?def|let|futurelet|(?:re)?newcommand|providecommand|DeclareMathOperator|"
                 r"catcode|input|include|csname|expandafter|makeatletter|else|fi|"
                 r"if(?:false|true|x|num|dim|case|mmode|defined|odd|cat))(?![a-zA-Z])")
TEX_PROGRAMMING = re.compile(_TEX_COMMANDS)  # (the commands alone: reasoning_gym's answers may hold "#" and "%")
_TAMPERING = re.compile(_TEX_COMMANDS + r"|(?<!\\)#|(?<!\\)%[^\n]*\n")
MAX_BOXES = 6  # different boxed answers a completion may hold: Math-Verify joins at most six boxes into one answer
MAX_ANSWER_CHARS = 2000  # an answer longer than this is none (a display block longer than it is no answer either)
# extract -> the answer forms tried in order (the first that gives an answer wins); "boxed" and "auto" end with
# the fallback (the "Answer:" line unless fallback is "none"), the others are exactly the form the prompt asked for
EXTRACT = {"boxed": ("boxed",), "answer_tag": ("answer_tag",), "hash": ("hash",), "last_number": ("last_number",),
           "auto": ("boxed", "answer_tag", "hash")}
# How the answer is found. strict: in the form the prompt asked for (a box or an answer marker by default), so
# format is part of the reward; lenient: the last mathematical expression anywhere, as Math-Verify finds it.
MODES = ("strict", "lenient")
MODE_HELP = ("strict (default, for training): the answer must be boxed or follow an 'Answer:' marker, prose "
             "scores 0; lenient: the last mathematical expression in the text, as Math-Verify reads it "
             "(pass@k of a base model)")
# The parameters that choose the answer form: mode strict only (a config setting them with mode lenient is told)
STRICT_ONLY_DEFAULTS = {"extract": "boxed", "fallback": "answer_line", "multiple_boxed": "last"}


@dataclass(frozen=True)
class IntentionalDifference:
    """A verdict where this verifier knowingly differs from Math-Verify's ``verify(parse(gold), parse(text))``:
    always a 0 where Math-Verify gives 1 (never the other way), recognised by the ``details["reason"]`` the
    verifier gives, in the modes listed."""

    reason: str
    modes: tuple[str, ...]
    why: str


# The one list of intentional differences from Math-Verify 0.9.0; the differential tests fail on any other.
INTENTIONAL_DIFFERENCES = (
    IntentionalDifference(
        "no final answer found", ("strict",),
        "Mode strict makes the format part of the reward: an answer given only in prose (no box, no answer "
        "marker, or not in the form extract asks for) scores 0, where Math-Verify reads the last number or "
        "expression anywhere in the text. Mode lenient reads it as Math-Verify does."),
    IntentionalDifference(
        "hedged answer", ("strict",),
        "An answer that hedges scores 0 wherever it is written: different candidates joined by \"or\" "
        "(\"3 or 4\", \"$3$ or $4$\", \"\\boxed{3} or 4\"), a \"/\" between two separate math spans "
        "(\"$3$/$4$\"), or an uncertain word (\"maybe\", \"probably\", \"3?\"), unless the candidates are "
        "one set Math-Verify reads whole and the gold is that set (\"$x = -3$ or $x = 2$\" for the gold -3, 2): "
        "Math-Verify takes the first value of a prose list, of a \"/\" or of \"or\" in some LaTeX forms, "
        "so listing candidates would be rewarded."),
    IntentionalDifference(
        "several different boxed answers", ("strict",),
        "Only with multiple_boxed=reject: a completion that boxes different answers apart from its final one "
        "scores 0, where Math-Verify reads the last."),
    IntentionalDifference(
        "too many different boxed answers", ("strict",),
        f"A completion holding more than {MAX_BOXES} different boxed answers scores 0 (a spray of candidates), "
        f"where Math-Verify reads the last box or group of boxes."),
    IntentionalDifference(
        "checker tampering", ("strict",),
        "An answer holding TeX programming (\\def, \\newcommand, \\let, \\iffalse, a macro parameter # or a % "
        "comment before a line break) scores 0: no answer needs it, and it makes the checker read something other "
        "than what is written (\\boxed{4 # 3} is 3 to Math-Verify)."),
    IntentionalDifference(
        "answer too long", ("strict",),
        f"An answer over {MAX_ANSWER_CHARS} characters scores 0 unread (no final answer is that long; reading "
        f"one costs the parser seconds), where Math-Verify reads it, or times out."),
)


def intentional_differences_doc() -> str:
    """The list above as reStructuredText bullets (the verifier's docstring and the README carry it)."""
    return "\n".join(f"* ``{d.reason}`` (mode {', '.join(d.modes)}): {d.why}" for d in INTENTIONAL_DIFFERENCES)


def intentional_difference(details: dict, mode: str) -> IntentionalDifference | None:
    """The listed difference a verdict's ``details`` show in ``mode``, or None."""
    return next((d for d in INTENTIONAL_DIFFERENCES if d.reason == details.get("reason") and mode in d.modes), None)


_MATH_SPANS = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))


def _tidy(answer: str) -> tuple[str, str, str]:
    """``(answer, checked, read_as)`` for an answer taken from the text: a math span's content, read as LaTeX,
    or plain text, read as text (:func:`parse_input`) as written (``checked``: "19/7." is 19/7.0 to
    Math-Verify) and shown without its closing punctuation (``answer``).

    >>> _tidy("$12$."), _tidy("$$\\nx = 3\\n$$"), _tidy("1 000.")
    (('12', '12', 'latex'), ('x = 3', 'x = 3', 'latex'), ('1 000', '1 000.', 'text'))
    """
    answer = answer.strip()
    span = answer.rstrip(".").strip()
    for opener, closer in _MATH_SPANS:
        if len(span) > len(opener) + len(closer) and span.startswith(opener) and span.endswith(closer):
            content = span[len(opener):-len(closer)].strip()
            return content, content, "latex"
    return answer.rstrip(".;!").strip(), answer, "text"


def extract_answer(completion: str, fallback: str = "answer_line", multiple_boxed: str = "last",
                   extract: str = "boxed") -> dict:
    """Pick the final answer (``mode="strict"``). Returns {"answer": str|None, "checked": str|None, "method":
    ..., "n_boxed": int, "reason": ..., "read_as": ...}; ``method`` is the form that gave it (boxed,
    answer_tag, hash, last_number, answer_line); ``checked`` the text math-verify reads, as ``read_as``
    (:func:`parse_input`): a box's or a math span's content as LaTeX, plain text as written, as text.

    Boxes: the last box and the boxes joined to it (:func:`training.verifiers.answers.final_boxed_group`) are
    one answer, a set or tuple written ``a, b``, as Math-Verify reads them.

    >>> extract_answer(r"I think \\boxed{3}. Wait: that was wrong. \\boxed{4}.")["answer"]
    '4'
    >>> extract_answer(r"The roots are \\boxed{-2} and \\boxed{1}.")["answer"]
    '-2, 1'
    >>> extract_answer("Work...\\nAnswer: $12$.")["answer"], extract_answer("no idea")["answer"]
    ('12', None)
    >>> text = "<answer>3</answer> so #### 1,234"
    >>> [extract_answer(text, extract=e)["answer"] for e in ("hash", "auto", "last_number")]
    ['1,234', '3', '1234']
    """
    spans = find_boxed_spans(completion)
    boxed = [content for _, _, content in spans]
    info = {"answer": None, "checked": None, "method": None, "n_boxed": len(boxed), "reason": None,
            "read_as": "text", "parts": 1, "hedge": None}
    forms = EXTRACT[extract] + (("answer_line",) if extract in ("boxed", "auto") and fallback == "answer_line" else ())
    if "boxed" in forms and len(set(boxed)) > MAX_BOXES:
        info["reason"] = "too many different boxed answers"
        return info
    for form in forms:
        if form == "boxed":
            if not boxed:
                continue
            if "answer_line" in forms and final_answer_is_after(completion, spans[-1][1]):
                continue  # "… the final answer is X" after the boxes: Math-Verify ranks them alike, the later wins
            group_spans = final_boxed_spans(completion, spans)
            group = [content for _, _, content in group_spans]
            if multiple_boxed == "reject" and set(boxed) - set(group):
                info["reason"] = "several different boxed answers"
                return info
            # an empty box ends the search: no answer
            info["answer"] = info["checked"] = ", ".join(group) if all(group) else ""
            if _UNESCAPED_DOLLAR.search(info["answer"]):  # a box across math delimiters: "\\boxed{12 $ and $13}"
                info["checked"] = "".join(f"\\boxed{{{content}}}, " for content in group)[:-2]
            info["method"], info["read_as"], info["parts"] = "boxed", "latex", len(group)
            info["hedge"] = _boxes_hedge(completion, group_spans)
            break
        if form == "answer_line":
            marked = marked_answer(completion)
            if marked is None:
                continue
            if len(marked.spans) > 1:  # spans Math-Verify joins into one answer: it reads them together
                info["answer"], info["checked"], info["read_as"] = ", ".join(marked.spans), marked.text, "latex"
                info["parts"] = len(marked.spans)
            else:
                info["answer"], info["checked"], info["read_as"] = _tidy(marked.text)
            info["method"], info["hedge"] = form, _marked_hedge(marked, info["read_as"])
            break
        answer = extract_form(completion, form)
        if answer is not None:
            (info["answer"], info["checked"], info["read_as"]), info["method"] = _tidy(answer), form
            info["hedge"] = _text_hedge(info["answer"], info["read_as"])
            break
    if info["answer"] and len(info["checked"]) > MAX_ANSWER_CHARS:
        info["answer"], info["reason"] = None, "answer too long"
    elif info["answer"] and _TAMPERING.search(info["checked"]):
        info["answer"], info["reason"] = None, "checker tampering"
    if not info["answer"]:
        info["answer"] = None
        info["reason"] = info["reason"] or "no final answer found"
    return info


def _text_hedge(text: str, read_as: str) -> str | None:
    """How an answer hedges (None: it does not): ``"uncertain"`` (maybe, probably, "?"), ``"alternative"``
    (candidates Math-Verify does not read as one set: "or" in prose, "/" between math spans) or ``"set"``
    ("or" inside LaTeX, which Math-Verify reads as a set: ``3 \\text{ or } 4`` is {3, 4})."""
    if _UNCERTAIN.search(text):
        return "uncertain"
    if _SLASH_BETWEEN_SPANS.search(text):
        return "alternative"
    if _OR.search(text):
        return "set" if read_as == "latex" else "alternative"
    return None


def _worst(*hedges: str | None) -> str | None:
    for kind in ("uncertain", "alternative", "set"):
        if kind in hedges:
            return kind
    return None


def _marked_hedge(marked, read_as: str) -> str | None:
    """How the answer after a marker hedges: in its spans, what joins them, or the rest of its sentence."""
    if not marked.spans:
        return _text_hedge(marked.text, read_as)
    tail = marked.tail
    return _worst(*(_text_hedge(span, "latex") for span in marked.spans),
                  "set" if any(_OR.search(joiner) for joiner in marked.joiners) else None,
                  "uncertain" if _UNCERTAIN.search(tail) else None,
                  "alternative" if _ALTERNATIVE_AFTER.search(tail) else None)


def _boxes_hedge(completion: str, group_spans: list[tuple[int, int, str]]) -> str | None:
    """How the final boxes hedge: in a box, between the boxes, or in their sentence right before the first
    ("maybe \\boxed{3}", "3 or \\boxed{4}") or after the last ("\\boxed{3} or 4", "\\boxed{3}?")."""
    hedges = [_text_hedge(content, "latex") for _, _, content in group_spans]
    for (_, end, _), (start, _, _) in zip(group_spans, group_spans[1:]):
        between = completion[end:start]
        hedges.append("uncertain" if _UNCERTAIN.search(between) else "alternative" if "/" in between
                      else "set" if _OR.search(between) else None)  # Math-Verify reads joined boxes as a set
    first, last = group_spans[0][0], group_spans[-1][1]
    head = completion[max(0, first - 80):first]
    head = head[max((m.end() for m in _SENTENCE_START.finditer(head)), default=0):].rstrip(" \t$([\\")
    stop = _SENTENCE_START.search(completion, last, last + MAX_TAIL)
    tail = completion[last:stop.end() if stop else last + MAX_TAIL].lstrip(" \t$)]\\")
    hedges += ["uncertain" if _UNCERTAIN_BEFORE.search(head) or _UNCERTAIN.search(tail) else None,
               "alternative" if _ALTERNATIVE_BEFORE.search(head) or _ALTERNATIVE_AFTER.search(tail) else None]
    return _worst(*hedges)


# ---- runs in the worker processes -------------------------------------------------------------------

_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")
# A plain number as Math-Verify reads one in prose (its ExprExtractionConfig): thousands groups after a space
# or a comma ("1 000", "-1,234.5"), or a decimal comma ("2,5"). As LaTeX "1 000" is 1*000 and "2,5" a set.
_PROSE_NUMBER = re.compile(r"-?(?:[1-9]\d{0,2}(?:[ ,]\d{3})+(?:\.\d+)?|\d+,\d{1,2})")
# Plain-text answers that Math-Verify reads after "Answer:" exactly as the fast path reads them (an integer,
# comma-grouped or not, a decimal, a percentage, a/b), closing punctuation allowed ("12."), but not after a/b:
# Math-Verify reads "19/7." as 19/7.0, a float.
_FAST_TEXT = re.compile(r"-?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?%?|\.\d+%?)[.;!]?|-?\d+/\d+[;!]?")
READ_AS = ("latex", "text", "completion")


def _has_math(text: str) -> bool:
    return bool(_UNESCAPED_DOLLAR.search(text)) or "\\boxed" in text or "\\fbox" in text


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
    """Whether a parsed gold is a set of values, a tuple or an interval (what "$x = -3$ or $x = 2$" may equal)."""
    from sympy import FiniteSet, Interval, Tuple
    return isinstance(obj, Interval) or (isinstance(obj, (FiniteSet, Tuple)) and len(obj.args) >= 2)


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


# ---- the verifier (parent side) -------------------------------------------------------------------

def _cache_key(key: tuple[str, str, str]) -> tuple:
    """The result cache's key for a (gold, answer, read_as) check: a long answer (mode lenient checks whole
    completions) by its digest, so a full cache holds bounded memory."""
    gold, answer, read_as = key
    return key if len(answer) <= 256 else (gold, hashlib.sha256(answer.encode()).digest(), read_as)


_POOLS: dict[tuple, WorkerPool] = {}
_POOLS_LOCK = threading.Lock()


def shared_pool(processes: int, deadline_s: float) -> WorkerPool:
    """One pool per (processes, deadline) in this process, shared by every math verifier built."""
    key = (processes, float(deadline_s))
    with _POOLS_LOCK:
        if key not in _POOLS:
            _POOLS[key] = WorkerPool("training.verifiers.math_answer:check_chunk_in_worker", processes=processes,
                                     deadline_s=deadline_s)
        return _POOLS[key]


@register_verifier("math")
class MathVerifier:
    """Score 1.0 when the completion's final answer is mathematically equal to ``example[answer_key]``.

    >>> v = MathVerifier(processes=1)
    >>> v(r"Half of it: \\boxed{\\dfrac{1}{2}}", {"answer": "0.5"}).score
    1.0
    >>> v(r"\\boxed{3 \\text{ or } 4}", {"answer": "3"}).details["reason"]
    'hedged answer'
    >>> MathVerifier(processes=1, extract="hash")("2 + 3 = 5\\n#### 5", {"answer": "5"}).details["method"]
    'hash'
    >>> prose = "Adding them gives 12 apples."
    >>> v(prose, {"answer": "12"}).score, MathVerifier(processes=1, mode="lenient")(prose, {"answer": "12"}).score
    (0.0, 1.0)

    Intentional differences from Math-Verify 0.9.0 (:data:`INTENTIONAL_DIFFERENCES`; each a 0 where it gives 1):

    """

    # What a reward spec may set, with bounds (checked at submit time; base.Param).
    PARAMS = {"mode": Param(str, choices=MODES, help=MODE_HELP),
              "answer_key": Param(str, max_len=100), "extract": Param(str, choices=tuple(EXTRACT)),
              "fallback": Param(str, choices=("answer_line", "none")),
              "multiple_boxed": Param(str, choices=("last", "reject")), "processes": Param(int, 1, 32),
              "deadline_s": Param(float, 1, 600), "timeout_s": Param(int, 1, 300), "float_rounding": Param(int, 0, 15),
              "cache_size": Param(int, 0, 1_000_000)}

    @staticmethod
    def check_params(*, timeout_s: int = 3, deadline_s: float = 10.0, mode: str = "strict", **params) -> str:
        """What is wrong with these parameters together ("" when nothing), at submit time."""
        if deadline_s <= timeout_s:
            return f"math: deadline_s must exceed timeout_s; got timeout_s={timeout_s}, deadline_s={deadline_s}"
        strict_only = sorted(set(params) & set(STRICT_ONLY_DEFAULTS))
        strict_only = [k for k in strict_only if params[k] != STRICT_ONLY_DEFAULTS[k]]
        if mode == "lenient" and strict_only:
            return (f"math: {', '.join(strict_only)} apply to mode 'strict' only (mode 'lenient' reads the answer "
                    f"as Math-Verify does); drop them or use mode 'strict'")
        return ""

    def __init__(self, *, mode: str = "strict", answer_key: str = "answer", extract: str = "boxed",
                 fallback: str = "answer_line", multiple_boxed: str = "last", processes: int = 2,
                 deadline_s: float = 10.0, timeout_s: int = 3, float_rounding: int = 6, cache_size: int = 100_000):
        if mode not in MODES:
            raise ValueError(f"math: mode must be one of {', '.join(MODES)}; got {mode!r}")
        if extract not in EXTRACT:
            raise ValueError(f"math: extract must be one of {', '.join(EXTRACT)}; got {extract!r}")
        if fallback not in ("answer_line", "none"):
            raise ValueError(f"math: fallback must be 'answer_line' or 'none'; got {fallback!r}")
        if multiple_boxed not in ("last", "reject"):
            raise ValueError(f"math: multiple_boxed must be 'last' or 'reject'; got {multiple_boxed!r}")
        if timeout_s < 1 or deadline_s <= timeout_s:
            raise ValueError(f"math: need 1 <= timeout_s < deadline_s; got timeout_s={timeout_s}, "
                             f"deadline_s={deadline_s}")
        self.mode, self.answer_key, self.extract = mode, answer_key, extract
        self.fallback, self.multiple_boxed = fallback, multiple_boxed
        self.timeout_s, self.float_rounding = int(timeout_s), float_rounding
        self.pool = shared_pool(processes, deadline_s)
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple, dict] = OrderedDict()

    def __call__(self, completion: str, example: dict) -> VerifierResult:
        result = self.batch([completion], [example])[0]
        if isinstance(result, VerifierError):
            raise result
        return result

    def _gold(self, example: dict) -> str:
        if self.answer_key not in example or example[self.answer_key] is None:
            raise VerifierError(f"math: example has no field {self.answer_key!r}")
        return str(example[self.answer_key])

    def batch(self, completions: list[str], examples: list[dict]) -> list:
        out: list = [None] * len(completions)
        todo: dict[tuple, list[int]] = {}
        infos = []
        for i, (completion, example) in enumerate(zip(completions, examples)):
            info = self._extract(completion)
            infos.append(info)
            try:
                gold = self._gold(example)
            except VerifierError as exc:
                out[i] = exc
                continue
            info["gold"] = gold
            hedge = info.get("hedge")
            if hedge == "uncertain" and _UNCERTAIN.search(gold):
                hedge = info["hedge"] = None  # the gold itself is phrased that way
            if info["answer"] is None:
                out[i] = VerifierResult(0.0, info)
            elif hedge in ("uncertain", "alternative") or (hedge == "set" and parse_fast(gold) is not None):
                # (a gold the fast grammar reads is one value: candidates joined by "or" are no set of it)
                info["reason"] = "hedged answer"
                out[i] = VerifierResult(0.0, info)
            elif (fast := self._fast(gold, info)) is not None:
                out[i] = fast
            else:
                key = (gold, info["checked"], info["read_as"])
                if _cache_key(key) in self._cache:
                    self._cache.move_to_end(_cache_key(key))
                    out[i] = self._result(info, self._cache[_cache_key(key)], cached=True)
                else:
                    todo.setdefault(key, []).append(i)
        if todo:
            for key, reply in self._check_in_pool(list(todo)).items():
                if isinstance(reply, dict) and reply.get("status") == "ok" and self.cache_size:
                    self._cache[_cache_key(key)] = reply
                    if len(self._cache) > self.cache_size:
                        self._cache.popitem(last=False)
                for i in todo[key]:
                    out[i] = self._result(infos[i], reply, cached=False)
        return out

    def _extract(self, completion: str) -> dict:
        """The answer to check: in mode strict the one :func:`extract_answer` finds (None when the completion
        gives none in the asked form); in mode lenient the whole completion, for Math-Verify to find its last
        mathematical expression."""
        if self.mode == "lenient":
            return {"answer": completion if completion.strip() else None, "checked": completion,
                    "method": "lenient", "n_boxed": len(find_boxed(completion)), "read_as": "completion",
                    "parts": 1, "hedge": None,
                    "reason": None if completion.strip() else "no final answer found"}
        return extract_answer(completion, self.fallback, self.multiple_boxed, self.extract)

    def _fast(self, gold: str, info: dict) -> VerifierResult | None:
        """The in-process verdict when both sides are in the fast grammar and it is certain, else None (always
        for a whole completion, mode lenient, and for an answer of several boxes: math-verify reads those)."""
        if (info["read_as"] == "completion" or info["parts"] > 1
                or (info["method"] == "boxed" and ", " in info["answer"])):
            return None
        if info["read_as"] == "text" and not (_FAST_TEXT.fullmatch(info["checked"]) and info["checked"].isascii()):
            return None  # e.g. "3{,}000" or "\\sqrt{2}" outside $…$: Math-Verify reads those its own way
        gold_parsed = parse_fast(gold)  # lru-cached: a group's G completions share one gold
        if gold_parsed is None:
            return None
        answer_parsed = parse_fast(info["answer"])
        if answer_parsed is None:
            return None
        correct = decide(gold_parsed, answer_parsed, self.float_rounding)
        if correct is None:
            return None
        return VerifierResult(1.0 if correct else 0.0, dict(
            info, gold_parsed=str(gold_parsed), answer_parsed=str(answer_parsed),
            reason=None if correct else "not equivalent to the gold answer", cached=False, fast_path=True))

    def _check_in_pool(self, keys: list[tuple[str, str, str]]) -> dict[tuple, object]:
        """math-verify on every (gold, answer, read_as) key, in chunks; a reply dict or TaskTimeout/TaskFailed per key.

        Chunks of up to ``MAX_CHUNK`` keys, about 4 per worker so the workers stay evenly loaded. Keys a
        worker did not reach within its budget go round again; the keys of a chunk that timed out or whose
        worker died are retried one per task, so only the item that is really stuck gets the error.
        """
        budget_s = max(0.05, self.pool.deadline_s - 3 * self.timeout_s - 0.5)
        replies: dict[tuple, object] = {}
        # Keys sharing a gold travel together, so a worker parses that gold once (check_in_worker caches it).
        first_seen = {key[0]: i for i, key in reversed(list(enumerate(keys)))}
        keys = sorted(keys, key=lambda key: first_seen[key[0]])
        size = max(1, min(MAX_CHUNK, math.ceil(len(keys) / (4 * self.pool.processes))))
        pending = [keys[i:i + size] for i in range(0, len(keys), size)]
        while pending:
            chunk_replies = self.pool.map([(chunk, self.float_rounding, self.timeout_s, budget_s)
                                           for chunk in pending])
            retry: list[list[tuple]] = []
            for chunk, chunk_reply in zip(pending, chunk_replies):
                if isinstance(chunk_reply, (TaskTimeout, TaskFailed)):
                    # One stuck or crashing pair took the chunk down: isolate it. A pool whose workers cannot
                    # start at all fails every key now rather than waiting for start-up once per key.
                    isolate = isinstance(chunk_reply, TaskTimeout) or str(chunk_reply).startswith("worker died")
                    if len(chunk) > 1 and isolate:
                        retry.extend([key] for key in chunk)
                    else:
                        replies.update((key, chunk_reply) for key in chunk)
                    continue
                not_reached = [key for key, reply in zip(chunk, chunk_reply) if reply is None]
                replies.update((key, reply) for key, reply in zip(chunk, chunk_reply) if reply is not None)
                if not_reached:
                    retry.append(not_reached)
            pending = retry
        return replies

    @staticmethod
    def _result(info: dict, reply, cached: bool):
        if isinstance(reply, TaskTimeout):
            return VerifierError(f"math: check timed out ({reply}) for answer {info['answer'][-200:]!r}")
        if isinstance(reply, TaskFailed):
            return VerifierError(f"math: worker failed: {reply}")
        if reply["status"] == "timeout":
            return VerifierError(f"math: math-verify timed out while {reply['where']} "
                                 f"(answer {info['answer'][-200:]!r})")
        if reply["status"] == "bad_gold":
            return VerifierError(f"math: cannot parse gold answer {info['gold'][:200]!r}: {reply['error']}")
        details = dict(info, gold_parsed=reply["gold_parsed"], answer_parsed=reply["answer_parsed"],
                       reason=reply["why"], cached=cached, fast_path=False)
        if info["read_as"] == "completion":  # mode lenient: the answer is what math-verify found, not the text
            details["answer"] = reply.get("answer_text", reply["answer_parsed"])
        if reply.get("timed_out"):
            details["timed_out"] = reply["timed_out"]
        correct = reply["correct"]
        if info.get("hedge") == "set" and not (correct and reply.get("gold_multi")):
            # candidates joined by "or" count only as the complete set of values the gold is
            correct, details["reason"] = False, "hedged answer"
        return VerifierResult(1.0 if correct else 0.0, details)


# the docstring carries the list itself, rendered from the one structure above
MathVerifier.__doc__ = (MathVerifier.__doc__.rstrip() + "\n\n"
                        + "\n".join("    " + line for line in intentional_differences_doc().splitlines()) + "\n")
