"""The ``math`` verifier's reading of answers that give more than one value, mode strict (in the trusted parent,
cheap, pure functions; docs/architecture.md#verifiers).

Math-Verify reads the first value of a prose list ("3, 4, 5"), of a range ("between 3 and 5"), of a bound ("at
least 3", ``\\geq 3``) and of an answer followed by a second candidate in any phrasing ("$5$ (though $6$ is also
plausible)", "5 o 6"), so listing candidates would be rewarded. Here:

* a **list, range or bound** (:func:`several_in_text`, :func:`bound_in_latex`, :func:`bound_before`,
  :func:`bound_after`) is several values: it counts only where the gold is several values too (a set, tuple,
  interval or inequality) and Math-Verify finds them equal, as candidates joined by "or" inside LaTeX do;
* a **second candidate** after the answer, in its sentence (:func:`second_candidate`): a value other than the
  answer's, with a word that offers it as another possibility (or, o, ou, though, also, plausible, i.e., vs., ...):
  a hedge, 0 whatever the gold;
* a **kept candidate** (:func:`kept_candidate`): candidates followed, in the same sentence, by a clause that keeps
  one of them ("$x = 3$ or $x = -3$, but since $x$ is a side length, $x = 3$"): the answer is the one kept, not a
  hedge (a rejected root);
* between two boxes in separate math spans of one sentence, a word that offers the second as another possibility
  (:func:`cue_between`): a hedge; without one, the later box is a correction and counts alone, as Math-Verify
  reads it.

>>> several_in_text("3, 4, 5, 6"), several_in_text("between 3 and 5"), several_in_text("at least 3")
(True, True, True)
>>> several_in_text("1,234"), several_in_text("approx. 6.28"), several_in_text("3 over 4")
(False, False, False)
>>> second_candidate(" (though $6$ is also plausible)", "5"), second_candidate(" since $3 \\\\cdot 4 = 12$.", "12")
(True, False)
"""
from __future__ import annotations

import re

from training.verifiers.math_fastpath import decide, parse_fast

# Words that offer a value as another possibility beside the answer. Strong: any value after them in the sentence
# that is not the answer's own is a second candidate ("or" in several languages, "though", "vs.", "instead").
# Restating: only a value that is certainly another ("3 (i.e. $4$)"; "$12$ (i.e. $3 \cdot 4$)" restates 12).
# Weak: only a value at most two words from them ("$6$ is also plausible", "could also be 6").
_STRONG_CUES = (r"\b(?:or|o|ou|oder|oppure|either|alternatively|otherwise|else|unless|though|although|instead|"
                r"rather|vs|versus)\b|\?")
_RESTATING_CUES = r"\b(?:i\.e|e\.g|namely|that\s+is)\b"
_WEAK_CUES = (r"\b(?:maybe|possibly|probably|perhaps|plausibl[ey]|possible|likely|might|could|may|also|guess|unsure|"
              r"if)\b")
CANDIDATE_CUES = re.compile(f"{_STRONG_CUES}|{_RESTATING_CUES}|{_WEAK_CUES}", re.IGNORECASE)
_STRONG = re.compile(_STRONG_CUES, re.IGNORECASE)
_RESTATING = re.compile(_RESTATING_CUES, re.IGNORECASE)
_WEAK = re.compile(_WEAK_CUES, re.IGNORECASE)
_NEAR = r"\W*(?:[^\W\d]+\W+){0,2}?"  # at most two words between a weak cue and its value
# A value written in prose or LaTeX: a number (not glued to a word or a decimal point), or a math span holding one.
_NUMBER = r"[-−+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:/\d+)?\s?%?"
_SPAN = r"(?<!\\)\$[^$\n]*?\d[^$\n]*?(?<!\\)\$|\\\([^\n]*?\d[^\n]*?\\\)"
_VALUE = re.compile(rf"{_SPAN}|(?<![\w.]){_NUMBER}")
# What joins the values of a list or a range: a comma or semicolon before a space, a word (and, or, to, through,
# vs., several languages' "or" and "and"), a dash, an ellipsis.
_LIST_JOIN = (r"(?:\s*[,;]\s+|\s*;\s*|\s+(?:and|or|o|ou|oder|y|und|et|e|to|till|until|through|thru|vs\.?|versus|&)\s+"
              r"|\s*[–—]\s*|\s*(?:\.\.\.?|…)\s*)")
_LIST = re.compile(rf"(?:{_SPAN}|(?<![\w.]){_NUMBER})(?:{_LIST_JOIN})(?:{_SPAN}|{_NUMBER})", re.IGNORECASE)
# A bound: a word before the value, or an inequality sign anywhere.
_BOUND_WORDS = (r"(?:at\s+(?:least|most)|no\s+(?:more|less|fewer|greater|smaller|larger)\s+than|"
                r"(?:more|less|fewer|greater|smaller|larger|bigger|higher|lower)\s+than|up\s+to|over|under|above|"
                r"below|not\s+(?:more|less)\s+than|min(?:imum)?\s+of|max(?:imum)?\s+of)")
_BOUND_SIGN = re.compile(r"[<>≥≤⩾⩽≧≦]|\\(?:geq?|leq?|gt|lt|geqslant|leqslant|ngeq|nleq|gtrsim|lesssim)(?![a-zA-Z])")
_BOUND_BEFORE = re.compile(rf"(?:^|[\s(*_])(?:{_BOUND_WORDS})[\s:]*$", re.IGNORECASE)
_BOUND_AFTER = re.compile(r"^[\s$)\]}]*(?:,?\s*(?:or|and)\s+(?:more|less|fewer|greater|higher|lower|above|below|up|"
                          r"over|under|larger|smaller)\b|\+(?![\d$\\]))", re.IGNORECASE)
# Right after an answer: another value after a comma or semicolon ("$5$; $6$", "\\boxed{5}, 6"), a list.
_LIST_AFTER = re.compile(rf"^[\s$)\]}}]*[,;]\s*(?:{_SPAN}|{_NUMBER})")
# A clause that keeps one of the candidates before it: "but since x is a side length, x = 3".
_KEEPING = re.compile(r"^\s*[,;:]?\s*(?:but|so|hence|thus|therefore|since|as|because|however|and\s+since)\b",
                      re.IGNORECASE)
_INLINE_SPAN = re.compile(r"(?<!\\)\$([^$\n]+?)(?<!\\)\$|\\\((.+?)\\\)")
_KEPT_END = re.compile(r"^[\s.!;)]*(?:only)?[\s.!;)]*$", re.IGNORECASE)


def several_in_text(text: str) -> bool:
    """Whether a plain-text answer gives several values: a list or range of them ("3, 4, 5", "3 to 5",
    "between $3$ and $5$"), or a bound ("at least 3", "x ≥ 3", "3 or more")."""
    first = _VALUE.search(text)
    if first is None:
        return False
    return bool(_LIST.search(text) or _BOUND_SIGN.search(text) or _BOUND_BEFORE.search(text[:first.start()])
                or _BOUND_AFTER.match(text[first.end():]))


def bound_in_latex(content: str) -> bool:
    """Whether LaTeX (a box's or a math span's content) writes a bound: ``\\geq 3``, ``x < 3``."""
    return bool(_BOUND_SIGN.search(content))


def bound_before(head: str) -> bool:
    """Whether the text right before an answer makes it a bound ("at least \\boxed{3}")."""
    return bool(_BOUND_BEFORE.search(head))


def bound_after(tail: str) -> bool:
    """Whether the text right after an answer makes it a bound or a list ("$3$ or more", "$5$; $6$")."""
    return bool(_BOUND_AFTER.match(tail) or _LIST_AFTER.match(tail))


def _same_value(a: str, b: str) -> bool:
    """Whether two written values are the same: the same text, or equal in the fast grammar."""
    a, b = a.strip().strip("$").strip(), b.strip().strip("$").strip()
    if re.sub(r"\s+", "", a) == re.sub(r"\s+", "", b):
        return True
    fa, fb = parse_fast(a.replace("−", "-")), parse_fast(b.replace("−", "-"))
    return fa is not None and fb is not None and decide(fa, fb) is True


def _other_value(a: str, b: str) -> bool:
    """Whether two written values are certainly different: both in the fast grammar, and unequal there."""
    fa = parse_fast(a.strip().strip("$").strip().replace("−", "-"))
    fb = parse_fast(b.strip().strip("$").strip().replace("−", "-"))
    return fa is not None and fb is not None and decide(fa, fb) is False


def values_in(text: str) -> list[str]:
    """The values written in ``text``: each math span holding a digit, each number outside them."""
    return [m.group(0) for m in _VALUE.finditer(text)]


def first_value(text: str) -> tuple[str, str] | None:
    """``(value, rest)``: the first value written in ``text`` and the text after it, or None when it has none."""
    m = _VALUE.search(text)
    return (m.group(0), text[m.end():]) if m else None


_OPERATOR_AFTER = re.compile(r"\s*(?:[-+*/×·^=<>]|\\(?:cdot|times|div)\b)\s*[\d$(\\.]")
_OPERATOR_BEFORE = re.compile(r"(?:[-+*/×·^=<>]|\\(?:cdot|times|div))\s*$")


def _candidates(text: str) -> list[re.Match]:
    """The values of ``text`` that stand alone (not an operand: "3 + 4" is one expression, not two values)."""
    return [m for m in _VALUE.finditer(text) if not _OPERATOR_AFTER.match(text, m.end())
            and not (m.group(0)[0] not in "-−+" and _OPERATOR_BEFORE.search(text[:m.start()]))]


def second_candidate(tail: str, answer: str) -> bool:
    """Whether the rest of an answer's sentence offers another value beside ``answer``: after a strong cue a
    value not the answer's ("$5$ (though $6$ is also plausible)", "5 vs. 6"), after a restating one a value
    certainly another ("3 (i.e. $4$)"), next to a weak one a value not the answer's ("could also be 6")."""
    if not CANDIDATE_CUES.search(tail):
        return False
    strong = _STRONG.search(tail)
    if strong and any(not _same_value(m.group(0), answer) for m in _candidates(tail) if m.start() >= strong.end()):
        return True
    restating = _RESTATING.search(tail)
    if restating and any(_other_value(m.group(0), answer) for m in _candidates(tail) if m.start() >= restating.end()):
        return True
    for m in _candidates(tail):
        before, after = tail[:m.start()], tail[m.end():]
        near = (re.search(f"(?:{_WEAK_CUES}){_NEAR}$", before, re.IGNORECASE)
                or re.match(f"{_NEAR}(?:{_WEAK_CUES})", after, re.IGNORECASE))
        if near and not _same_value(m.group(0), answer):
            return True
    return False


def cue_between(between: str) -> bool:
    """Whether the text between two boxes in separate math spans offers the later one as another possibility
    ("$\\boxed{32}$, or maybe $\\boxed{64}$"), rather than correcting the first ("…, so the total is")."""
    return bool(CANDIDATE_CUES.search(between))


def kept_candidate(spans: tuple[str, ...], tail: str) -> str | None:
    """The candidate kept by the clause after them (``tail``, the rest of their sentence), or None: the clause
    opens with "but" / "so" / "since" / "hence" ..., offers no other possibility, holds no value but in its last
    math span, and that span (at the clause's end) is one of the candidates.

    >>> kept_candidate(("x = 3", "x = -3"), ", but since $x$ is a side length, $x = 3$.")
    'x = 3'
    >>> kept_candidate(("3", "-3"), ", so $x = 4$."), kept_candidate(("3", "4"), ", but maybe $3$.")
    (None, None)
    """
    if len(spans) < 2 or not _KEEPING.match(tail) or CANDIDATE_CUES.search(tail):
        return None
    found = list(_INLINE_SPAN.finditer(tail))
    if not found or not _KEPT_END.match(tail[found[-1].end():]):
        return None
    before = tail[:found[-1].start()]
    if values_in(before) or any(re.search(r"\d", m.group(1) or m.group(2)) for m in found[:-1]):
        return None
    kept = (found[-1].group(1) or found[-1].group(2)).strip()
    return kept if any(re.sub(r"\s+", "", kept) == re.sub(r"\s+", "", span) for span in spans) else None
