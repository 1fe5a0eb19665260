"""The ``math`` verifier's answer extraction, mode strict (in the trusted parent, cheap): which text of a
completion is its final answer, and whether it hedges (docs/architecture.md#verifiers).

The answer is read in the form the run's prompt asks for (``extract``; the forms are
:mod:`training.verifiers.answers`, shared with ``reasoning_gym``): ``boxed`` (the default) takes the
completion's last ``\\boxed{...}`` (or ``\\fbox{...}``), with braces matched, together with the boxes joined
to it ("``\\boxed{-2}`` and ``\\boxed{1}``": one answer, the set {-2, 1}, as Math-Verify reads it) unless a
"final answer is" marker follows them, and when there is none the configurable fallback (default: what follows
the last "Answer:" / "Final answer:" / "the answer is" marker, mid-line too, up to its sentence's end or across
the display block it opens); ``answer_tag`` the last ``<answer>...</answer>``; ``hash`` the text after the last
``####`` (GSM8K); ``last_number`` the last number; ``auto`` tries boxed, then an answer tag, then ``####``, then
the fallback. ``details["method"]`` names the form that matched. After a marker the answer runs to the end of its
sentence (an abbreviation's full stop ends none: "approx.", "i.e.", "No. 5"): math spans joined as Math-Verify
joins them (``$-3$ and $2$``, up to six, by ",", "and" or "or") are one answer, a set, and the rest of the
sentence is read for a hedge; candidates followed by a clause that keeps one of them ("…, but since $x$ is a side
length, $x = 3$") are the one kept (:func:`training.verifiers.math_candidates.kept_candidate`). A hedge scores 0
wherever it is written (in a box, between boxes or spans, after a marker, before or after a box in its sentence):
candidates joined by "or", a "/" between two separate math spans, an uncertain word ("maybe", "probably", "?"),
a second value offered after the answer ("(though $6$ is also plausible)"), an earlier box of the sentence
offered as another possibility ("$\\boxed{32}$, or maybe $\\boxed{64}$"); a list, range or bound ("3, 4, 5",
"between 3 and 5", "at least 3") counts only as the several values of a gold that is several values — as does a
complete list that Math-Verify reads as one set equal to a gold of several values (``$x = -3$ or $x = 2$`` for
the gold ``-3, 2``). No answer scores 0; so do more than :data:`MAX_BOXES` different boxes, an answer over
:data:`MAX_ANSWER_CHARS` and TeX programming in the answer (``\\def``, ``#``, a ``%`` comment: checker
tampering). A box's content, or a math span's after a marker, is read as LaTeX (``\\$`` in it is a dollar
sign); plain text after a marker as Math-Verify reads an "Answer:" line
(:func:`training.verifiers.math_equivalence.parse_input`).
"""
from __future__ import annotations

import re

from training.verifiers.answers import extract as extract_form
from training.verifiers.answers import (MAX_TAIL, NOT_AN_ABBREVIATION, final_answer_is_after, final_boxed_spans,
                                        find_boxed_spans, marked_answer)
from training.verifiers.math_candidates import (bound_after, bound_before, bound_in_latex, cue_between,
                                                first_value, kept_candidate, second_candidate, several_in_text)
from training.verifiers.math_equivalence import UNESCAPED_DOLLAR

# Hedges. Uncertain words: always a hedge. "or" between candidates: a hedge unless Math-Verify reads the
# candidates as one set (a box's content, boxes or math spans it joins) and the gold is that set of values.
UNCERTAIN = re.compile(r"\b(?:maybe|possibly|probably|perhaps)\b|\?", re.IGNORECASE)
_OR_WORDS = r"\b(?:or|either|o|ou|oder|oppure)\b"  # (several languages' "or": "5 o 6" hedges as "5 or 6" does)
_OR = re.compile(_OR_WORDS + r"|\\(?:lor|vee)\b", re.IGNORECASE)
# two separate math spans with "/" between them ("$3$/$4$"): candidates, not a fraction
_SLASH_BETWEEN_SPANS = re.compile(r"(?:(?<!\\)\$|\\\)|\})\s*/\s*(?:(?<!\\)\$|\\\(|\\boxed|\\fbox)")
# after an answer, in its sentence: another candidate ("or 4", "/ $4$", "or \boxed{4}")
_ALTERNATIVE_AFTER = re.compile(rf"(?:{_OR_WORDS}|\\(?:lor|vee)\b|/)\s*(?:\$|\\\(|\\\[|\\boxed|\\fbox|\\[dt]?frac|"
                                r"\\sqrt|[-−+]?\.?[0-9])", re.IGNORECASE)
# right before a box, in its sentence: a candidate and "or" ("3 or \boxed{4}"), or an uncertain word
_ALTERNATIVE_BEFORE = re.compile(r"(?:[0-9]|(?<!\\)\$|\\\)|\})\s*(?:\bor\b|/)$", re.IGNORECASE)
_UNCERTAIN_BEFORE = re.compile(r"\b(?:maybe|possibly|probably|perhaps)\b[\s:,]*$", re.IGNORECASE)
_SENTENCE_START = re.compile(r"(?<!\\)" + NOT_AN_ABBREVIATION + r"[.;!?](?=\s)|\n", re.IGNORECASE)
_TAIL_END = re.compile(r"(?<!\\)" + NOT_AN_ABBREVIATION + r"[.!?](?=\s)|\n", re.IGNORECASE)  # (";" goes on)
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
            if UNESCAPED_DOLLAR.search(info["answer"]):  # a box across math delimiters: "\\boxed{12 $ and $13}"
                info["checked"] = "".join(f"\\boxed{{{content}}}, " for content in group)[:-2]
            info["method"], info["read_as"], info["parts"] = "boxed", "latex", len(group)
            info["hedge"] = _boxes_hedge(completion, group_spans, spans)
            break
        if form == "answer_line":
            marked = marked_answer(completion)
            if marked is None:
                continue
            kept = kept_candidate(marked.spans, marked.tail)
            if kept is not None:  # "$x = 3$ or $x = -3$, but since x > 0, $x = 3$": the one kept, a rejected root
                info["answer"] = info["checked"] = kept
                info["read_as"], info["hedge"] = "latex", text_hedge(kept, "latex")
                info["guard"] = "Answer: " + marked.text + marked.tail  # Math-Verify's reading must agree
            elif len(marked.spans) > 1:  # spans Math-Verify joins into one answer: it reads them together
                info["answer"], info["checked"], info["read_as"] = ", ".join(marked.spans), marked.text, "latex"
                info["parts"] = len(marked.spans)
            else:
                info["answer"], info["checked"], info["read_as"] = _tidy(marked.text)
            info["method"] = form
            if kept is None:
                info["hedge"] = _marked_hedge(marked, info["read_as"])
            break
        answer = extract_form(completion, form)
        if answer is not None:
            (info["answer"], info["checked"], info["read_as"]), info["method"] = _tidy(answer), form
            info["hedge"] = text_hedge(info["answer"], info["read_as"])
            break
    if info["answer"] and len(info["checked"]) > MAX_ANSWER_CHARS:
        info["answer"], info["reason"] = None, "answer too long"
    elif info["answer"] and _TAMPERING.search(info["checked"]):
        info["answer"], info["reason"] = None, "checker tampering"
    if not info["answer"]:
        info["answer"] = None
        info["reason"] = info["reason"] or "no final answer found"
    return info


def text_hedge(text: str, read_as: str) -> str | None:
    """How an answer hedges (None: it does not): ``"uncertain"`` (maybe, probably, "?"), ``"alternative"``
    (candidates Math-Verify does not read as one set: "or" in prose, "/" between math spans, a second value
    offered after the first: "5 (though 6 is also plausible)"), ``"set"`` ("or" inside LaTeX, which Math-Verify
    reads as a set: ``3 \\text{ or } 4`` is {3, 4}) or ``"several"`` (a list, range or bound: "3, 4, 5", "between 3
    and 5", "at least 3", ``\\geq 3``; :mod:`training.verifiers.math_candidates`)."""
    if UNCERTAIN.search(text):
        return "uncertain"
    if _SLASH_BETWEEN_SPANS.search(text):
        return "alternative"
    if _OR.search(text):
        return "set" if read_as == "latex" else "alternative"
    if read_as == "latex":
        return "several" if bound_in_latex(text) else None
    first = first_value(text)
    if first is not None and second_candidate(first[1], first[0]):
        return "alternative"
    return "several" if several_in_text(text) else None


_ORDER = ("uncertain", "alternative", "several", "set")  # the worst kind first: what a verdict reports


def _worst(*hedges: str | None) -> str | None:
    return next((kind for kind in _ORDER if kind in hedges), None)


def _marked_hedge(marked, read_as: str) -> str | None:
    """How the answer after a marker hedges: in its spans, what joins them, or the rest of its sentence."""
    if not marked.spans:
        return text_hedge(marked.text, read_as)
    tail = marked.tail
    return _worst(*(text_hedge(span, "latex") for span in marked.spans),
                  "set" if any(_OR.search(joiner) for joiner in marked.joiners) else None,
                  "uncertain" if UNCERTAIN.search(tail) else None,
                  "alternative" if _ALTERNATIVE_AFTER.search(tail) or second_candidate(tail, marked.spans[-1])
                  else None,
                  "several" if bound_after(tail) else None)


def _boxes_hedge(completion: str, group_spans: list[tuple[int, int, str]],
                 spans: list[tuple[int, int, str]]) -> str | None:
    """How the final boxes hedge: in a box, between the boxes, in their sentence right before the first
    ("maybe \\boxed{3}", "3 or \\boxed{4}", "at least \\boxed{3}", an earlier box offered as another possibility:
    "$\\boxed{32}$, or maybe $\\boxed{64}$") or after the last ("\\boxed{3} or 4", "\\boxed{3}?", "\\boxed{5}
    (though 6 is also plausible)")."""
    hedges = [text_hedge(content, "latex") for _, _, content in group_spans]
    for (_, end, _), (start, _, _) in zip(group_spans, group_spans[1:]):
        between = completion[end:start]
        hedges.append("uncertain" if UNCERTAIN.search(between) else "alternative" if "/" in between
                      else "set" if _OR.search(between) else None)  # Math-Verify reads joined boxes as a set
    first, last = group_spans[0][0], group_spans[-1][1]
    earlier = [box for box in spans if box[1] <= first]
    if earlier:  # a box not joined to the final ones, in the same sentence: a correction, or another candidate
        between = completion[earlier[-1][1]:first]
        if not _SENTENCE_START.search(between) and cue_between(between):
            hedges.append("uncertain" if UNCERTAIN.search(between) else "alternative")
    head = completion[max(0, first - 80):first]
    head = head[max((m.end() for m in _SENTENCE_START.finditer(head)), default=0):].rstrip(" \t$([\\")
    stop = _TAIL_END.search(completion, last, last + MAX_TAIL)
    tail = completion[last:stop.end() if stop else last + MAX_TAIL].lstrip(" \t$)]\\")
    hedges += ["uncertain" if _UNCERTAIN_BEFORE.search(head) or UNCERTAIN.search(tail) else None,
               "alternative" if _ALTERNATIVE_BEFORE.search(head) or _ALTERNATIVE_AFTER.search(tail)
               or second_candidate(tail, group_spans[-1][2]) else None,
               "several" if bound_before(head) or bound_after(tail) else None]
    return _worst(*hedges)
