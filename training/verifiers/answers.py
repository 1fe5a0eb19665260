"""Taking the final answer out of a completion, in the form its prompt asked for: pure functions shared by the
verifiers that read an answer (``math``, ``reasoning_gym``), so a form means the same thing in both.

Forms (:data:`FORMS`, the names a reward spec uses):

* ``boxed``: the last ``\\boxed{...}`` / ``\\fbox{...}`` (braces matched) — the MATH / DeepSeek-R1 convention;
* ``answer_tag``: the last ``<answer>...</answer>`` — reasoning-gym's and many R1-style prompts';
* ``hash``: the rest of the line after the last ``####`` — GSM8K's reference solutions;
* ``answer_line``: what follows the last answer marker — "Answer:" / "Final answer:" anywhere in a line,
  "the (final) answer is", or a line opening "Answer ..." — up to the end of its sentence (an abbreviation's
  full stop, "approx." or "i.e.", ends none), or the display
  block (``$$ … $$``, ``\\[ … \\]``) it opens, however many lines later that closes;
* ``last_number``: the last number in the text (``-3``, ``1,234`` → ``1234``, ``3.5``, ``3/4``);
* ``last_line``: the last non-empty line; ``whole``: the whole completion.

Each returns the answer text stripped of surrounding whitespace, or None when the completion has no answer in
that form (an empty ``<answer></answer>`` is none).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

FORMS = ("answer_tag", "boxed", "hash", "answer_line", "last_number", "last_line", "whole")

_BOXED_START = re.compile(r"\\(?:boxed|fbox)\s*")
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
# Math delimiters an answer may open with, and their closers ($$ before $: the longer opener first).
_MATH_OPENERS = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))
# A full stop that ends no sentence: an abbreviation's ("approx. 6.28", "i.e. $4$", "e.g.", "vs.", "ca.", "cf.",
# "resp.", "viz.", "esp.", "incl.", "eq.", "fig.", and "No." before a number), which an answer may hold or follow
ABBREVIATIONS = ("approx", "ca", "cf", "vs", "i.e", "e.g", "resp", "viz", "esp", "incl", "eq", "fig")
NOT_AN_ABBREVIATION = "".join(rf"(?<!\b{re.escape(a)})" for a in ABBREVIATIONS) + r"(?<!\bno(?=\.\s*[-−+#\d$\\]))"
# Where a prose answer ends: a full stop, semicolon or "!" followed by a space (not "3.5", not "\$3.", not an
# abbreviation's), or a line end.
_SENTENCE_END = re.compile(r"(?<!\\)" + NOT_AN_ABBREVIATION + r"[.;!](?=\s|$)|\n", re.IGNORECASE)
MAX_ANSWER_REGION = 2000  # characters read after a marker: a display block longer than this is not an answer
MAX_TAIL = 300  # characters of a sentence read after its answer, for a hedge
# Math spans Math-Verify reads as one answer (a set): the first and up to five more, each joined to the one before
# by "," / "and" / "or" (an Oxford comma only glued to the word: ",and"), as its answer regexes do
MAX_JOINED_SPANS = 6
_SPAN_JOINER = re.compile(r"\s*(?:,?and|,?or|,)\s*")
# where the sentence after an answer ends, for a hedge after it: a question mark too ("$3$? Or $4$"), not a
# semicolon ("$5$; $6$" and "$3$; maybe $4$" go on with candidates)
_SENTENCE_OR_QUESTION_END = re.compile(r"(?<!\\)" + NOT_AN_ABBREVIATION + r"[.!?](?=\s|$)|\n", re.IGNORECASE)
_BOX_SEPARATOR = re.compile(r"\b(?:and|or)\b|[,;]")
_MARKER_TIERS = (  # Math-Verify's order of strength: "final answer ... is", then "answer:", then the rest
    # words between "final answer" and "is" ("to this problem"), never math, a number, a colon or a full stop
    re.compile(r"\bfinal\s+answer\b[^\n$\\\d.:：]{0,100}?\bis\b[*_]*\s*[:：]?", re.IGNORECASE),
    re.compile(r"\banswer(?:\s+is)?[*_]*\s*[:：]", re.IGNORECASE),
    re.compile(r"\bthe\s+answer\s+is\b|^[^\w\n<]*(?:final\s+)?answer\b(?:\s+is\b)?", re.IGNORECASE | re.MULTILINE))  # "<answer>" is a tag
UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")
# what Math-Verify reads right after "final answer is": math, or a number
_READABLE_AFTER_IS = re.compile(r"\s*(?:\$|\\\(|\\\[|-?\d|\.\d)")
_INLINE_DOLLAR_CLOSE = re.compile(r"(?<!\\)\$|\n")  # an inline $...$ closes on its line
# A number not glued to a word, a closing bracket or a decimal point before it (so "5-3" ends in 3, not -3);
# thousands groups only in threes ("1,2,3" is three numbers); a fraction "3/4" is one number.
_NUMBER = re.compile(r"(?<![\w.)\]])[-−]?(?:\d{1,3}(?:,\d{3})+(?!\d|,\d)|\d+)(?:\.\d+)?(?:/\d+)?", re.ASCII)


def find_boxed_spans(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, content)`` of every ``\\boxed{...}`` / ``\\fbox{...}`` (braces matched, escaped braces
    skipped; the ``\\boxed 5`` form too), in order; ``text[start:end]`` is the whole box. Linear in the text's
    length: the braces are matched once, so a megabyte of unclosed boxes costs what reading it does.

    >>> find_boxed_spans(r"a \\boxed{1} b")
    [(2, 11, '1')]
    """
    found = []
    closing: dict[int, int] | None = None
    for m in _BOXED_START.finditer(text):
        i = m.end()
        if i < len(text) and text[i] == "{":
            if closing is None:
                closing = _matching_braces(text)
            j = closing.get(i)
            if j is not None:
                found.append((m.start(), j + 1, text[i + 1:j].strip()))
        else:  # "\boxed 5": one token up to whitespace or '$'
            token = re.match(r"[^\s$]+", text[i:i + MAX_ANSWER_REGION])
            if token and m.group(0).endswith((" ", "\t")):
                found.append((m.start(), i + token.end(), token.group(0)))
    return found


_BRACE = re.compile(r"(?<!\\)[{}]")
# Math spans as Math-Verify's answer regexes find them: $$…$$ and \[…\] (across lines), $…$ (one line, not opened
# right after a digit) and \(…\)
_MATH_SPAN = re.compile(r"(?<!\\)\$\$(?:[^$]|\$(?!\$)){1,%d}?\$\$|(?<!\\)\\\[(?:[^\\]|\\(?!\])){1,%d}?\\\]|"
                        r"(?<!\\|\d)\$(?:\\\$|[^\n$])+?(?<!\\)\$|(?<!\\)\\\((?:[^\\\n]|\\(?!\))){1,%d}?\\\)"
                        % ((MAX_ANSWER_REGION,) * 3))
MAX_SPAN_LOOKBACK = 20_000  # characters before the last box scanned for math spans (boxes further back: none)


def _math_spans_before(text: str, end: int) -> list[tuple[int, int]]:
    """The math spans of ``text`` ending by ``end``, scanned from a line start at most
    :data:`MAX_SPAN_LOOKBACK` characters before it (bounded work, whatever the completion's length)."""
    start = text.rfind("\n", 0, max(0, end - MAX_SPAN_LOOKBACK)) + 1
    return [(m.start(), m.end()) for m in _MATH_SPAN.finditer(text, start, min(len(text), end + MAX_ANSWER_REGION))]


def _span_holding(math_spans: list[tuple[int, int]], box: tuple[int, int, str]) -> tuple[int, int] | None:
    return next(((s, e) for s, e in math_spans if s < box[0] and box[1] < e), None)


def _matching_braces(text: str) -> dict[int, int]:
    """The position of the ``}`` that closes each unescaped ``{`` (those never closed are left out)."""
    closing, opened = {}, []
    for m in _BRACE.finditer(text):
        if m.group() == "{":
            opened.append(m.start())
        elif opened:
            closing[opened.pop()] = m.start()
    return closing


def find_boxed(text: str) -> list[str]:
    """Contents of every ``\\boxed{...}`` / ``\\fbox{...}`` (braces matched; ``\\boxed 5`` form too), in order.

    >>> find_boxed(r"so \\boxed{\\frac{1}{2}} or \\boxed 3 and \\boxed{")
    ['\\\\frac{1}{2}', '3']
    """
    return [content for _, _, content in find_boxed_spans(text)]


def final_boxed_group(text: str, spans: list[tuple[int, int, str]] | None = None) -> list[str]:
    """The contents of the boxes that together give the final answer: the last box and, going left, each box
    that is close to the next one (under 10 characters between them) or, holding a different answer, is
    joined to it by "and", "or", "," or ";" within 70 characters. Repeated neighbours count once. Math-Verify
    reads such boxes as one answer (a set), so ``\\boxed{-2} and \\boxed{1}`` means {-2, 1}; boxes further
    apart are a corrected answer, and the last one counts. (Rule: latex2sympy2_extended
    ``extract_boxed_content``, the normalisation Math-Verify 0.9.0 applies to boxed answers.) A last box inside
    a math span of its own is read as Math-Verify reads spans: joined only to boxes in spans before it joined by
    "," / "and" / "or" alone, so "$\\boxed{32}$, but ..., so the total is $\\boxed{64}$" is the corrected 64.

    >>> final_boxed_group(r"roots \\boxed{-2} and \\boxed{1}")
    ['-2', '1']
    >>> final_boxed_group(r"\\boxed{3}. Wait: that step was wrong. \\boxed{4}")
    ['4']
    >>> final_boxed_group(r"\\boxed{4} \\boxed{4}"), final_boxed_group("none")
    (['4'], [])
    """
    return [content for _, _, content in final_boxed_spans(text, spans)]


def final_boxed_spans(text: str, spans: list[tuple[int, int, str]] | None = None) -> list[tuple[int, int, str]]:
    """:func:`final_boxed_group` as ``(start, end, content)`` spans (a repeated neighbour keeps its first)."""
    spans = find_boxed_spans(text) if spans is None else spans  # (the caller's, when it has them already)
    if not spans:
        return []
    group = [spans[-1]]
    math_spans = _math_spans_before(text, spans[-1][1]) if len(spans) > 1 else []
    for box in reversed(spans[:-1]):
        following = group[0]
        box_span, following_span = _span_holding(math_spans, box), _span_holding(math_spans, following)
        if following_span is not None and box_span != following_span:
            # the later box in a math span of its own: Math-Verify reads that span, and the spans joined to it
            # by "," / "and" / "or" alone ("$\boxed{-2}$ and $\boxed{1}$"), not a box further back in the clause
            joined = box_span is not None and _SPAN_JOINER.fullmatch(text[box_span[1]:following_span[0]]) is not None
        else:
            between = text[box[1]:following[0]]
            joined = len(between) < 10 or (box[2] != following[2] and len(between) < 70
                                            and _BOX_SEPARATOR.search(between) is not None)
        if not joined:
            break
        group.insert(0, box)
    return [box for i, box in enumerate(group) if i == 0 or box[2] != group[i - 1][2]]


def answer_tag(text: str) -> str | None:
    """The content of the last ``<answer>...</answer>`` (any case); none when it holds another answer tag
    (``<answer><answer>3</answer></answer>`` is malformed, not an answer).

    >>> answer_tag("I think <answer>4</answer>, no: <ANSWER> 5 </ANSWER>"), answer_tag("<answer> </answer>")
    ('5', None)
    >>> answer_tag("<answer><answer>3</answer></answer>") is None
    True
    """
    found = _ANSWER_TAG.findall(text)
    if not found or re.search(r"</?answer>", found[-1], re.IGNORECASE):
        return None
    return found[-1].strip() or None


def hash_answer(text: str) -> str | None:
    """GSM8K's form: the first non-empty text after the last ``####``.

    >>> hash_answer("48/2 = 24 clips in May.\\n#### 72"), hash_answer("#### 1\\n####\\n 2,000 \\nok")
    ('72', '2,000')
    >>> hash_answer("# 3") is None
    True
    """
    at = text.rfind("####")
    if at < 0:
        return None
    rest = text[at + 4:].lstrip("#")
    return next((line.strip() for line in rest.splitlines() if line.strip()), None)


@dataclass(frozen=True)
class MarkedAnswer:
    """The answer after a marker. ``text``: as :func:`answer_line` gives it (the math spans with their
    delimiters and what joins them, or the prose up to the end of its sentence); ``spans``: the contents of
    its math spans, joined as Math-Verify joins them (up to :data:`MAX_JOINED_SPANS`, by ",", "and" or "or":
    one answer, a set), empty for a prose answer; ``joiners``: the text between consecutive spans; ``tail``:
    the rest of the sentence after the spans (where a hedge like ``or $4$`` or "maybe" may follow)."""

    text: str
    spans: tuple[str, ...] = ()
    joiners: tuple[str, ...] = ()
    tail: str = ""


def answer_line(text: str) -> str | None:
    """The answer after the last answer marker (see :data:`FORMS`), markers tried by strength as Math-Verify
    ranks them: "final answer … is", then "answer:", then "the answer is" / a line opening "Answer". The
    answer is the math spans the marker is followed by, delimiters included (``$…$``, ``\\(…\\)``, ``$$…$$``,
    ``\\[…\\]``, across lines), with the spans joined to the first as Math-Verify joins them (``$-3$ and $2$``),
    else the text up to the end of its sentence (its full stop kept), markdown bold dropped; on the next
    non-empty line when the marker ends its line.

    >>> answer_line("Work...\\nAnswer: $12$.\\nFinal answer is 13"), answer_line("so the Final Answer: $x=3$ done")
    ('13', '$x=3$')
    >>> answer_line("Answer:\\n$$\\nx = 3\\n$$"), answer_line("**Answer:** **42**! Probably"), answer_line("none")
    ('$$\\nx = 3\\n$$', '42!', None)
    >>> answer_line("Answer: $-3$ and $2$, so done")
    '$-3$ and $2$'
    """
    found = marked_answer(text)
    return found.text if found else None


def marked_answer(text: str) -> MarkedAnswer | None:
    """:func:`answer_line`'s answer with its parts (:class:`MarkedAnswer`), or None.

    >>> marked_answer("The answer is $3$ or $4$. I hope so.")
    MarkedAnswer(text='$3$ or $4$', spans=('3', '4'), joiners=(' or ',), tail='.')
    >>> marked_answer("Answer: $3$/$4$ maybe").tail
    '/$4$ maybe'
    """
    for marker in _MARKER_TIERS:
        found = list(marker.finditer(text))
        if found:
            return _answer_after(text, found[-1].end())
    return None


def final_answer_is_after(text: str, position: int) -> bool:
    """Whether a "final answer … is" marker (the strongest, :data:`_MARKER_TIERS`' first) ends after
    ``position``: a box before it is working, not the answer (Math-Verify ranks the two alike, the later wins).

    >>> final_answer_is_after(r"so \\boxed{200}. Final Answer: The final answer is $10,455$.", 14)
    True
    """
    return any(_READABLE_AFTER_IS.match(text, m.end()) for m in _MARKER_TIERS[0].finditer(text, position))


def _math_span_at(rest: str, at: int) -> tuple[int, str] | None:
    """``(end, content)`` of the math span opening at ``rest[at]`` (its closer included), or None: none opens
    there, or it is not closed (an inline ``$…$`` closes on its own line, at a ``$`` that is not ``\\$``)."""
    for opener, closer in _MATH_OPENERS:
        if rest.startswith(opener, at):
            if closer == "$":
                close = _INLINE_DOLLAR_CLOSE.search(rest, at + 1)
                end = close.start() if close and close.group() == "$" else -1
            else:
                end = rest.find(closer, at + len(opener))
            if end < 0:
                return None
            return end + len(closer), rest[at + len(opener):end]
    return None


def _answer_after(text: str, start: int) -> MarkedAnswer | None:
    """The answer that follows a marker ending at ``start`` (bounded to :data:`MAX_ANSWER_REGION` characters)."""
    rest = text[start:start + MAX_ANSWER_REGION].lstrip(" \t*_:：")
    if rest.startswith(("\n", "\r")):
        rest = rest.lstrip()  # the marker ends its line: the answer is on the next non-empty one
    first = _math_span_at(rest, 0)
    if first is not None:
        end, content = first
        if not content.strip():
            return None
        spans, joiners = [content], []
        while len(spans) < MAX_JOINED_SPANS:  # the spans Math-Verify reads with it, as one answer
            joiner = _SPAN_JOINER.match(rest, end)
            following = _math_span_at(rest, joiner.end()) if joiner else None
            if following is None or not following[1].strip():
                break
            joiners.append(joiner.group())
            end, content = following
            spans.append(content)
        # the sentence goes on after the spans up to its end: where a hedge ("or $4$", "maybe") would be
        stop = _SENTENCE_OR_QUESTION_END.search(rest, end)
        tail = rest[end:stop.start() if stop and stop.group() == "\n" else stop.end() if stop else len(rest)]
        return MarkedAnswer(rest[:end], tuple(s.strip() for s in spans), tuple(joiners), tail[:MAX_TAIL])
    m = _SENTENCE_END.search(rest)  # the sentence's own full stop stays: "19/7." is what a reader sees
    answer = rest[:m.end() if m and m.group() != "\n" else m.start()] if m else rest
    answer = answer.replace("**", "").strip(" \t*")  # markdown bold is not math
    if not UNESCAPED_DOLLAR.sub("", answer).rstrip(".;!").strip():  # a lone "$" is none
        return None
    return MarkedAnswer(answer)


def last_number(text: str) -> str | None:
    """The last number, thousands separators dropped and a Unicode minus made ASCII.

    >>> [last_number(t) for t in ("so x = -3.", "It costs $1,234.50 in all", "3/4 of them", "5-3", "none")]
    ['-3', '1234.50', '3/4', '3', None]
    >>> last_number("the digits 1,2,3"), last_number("1,2345"), last_number("v1.2.3"), last_number("−7 degrees")
    ('3', '2345', None, '-7')
    """
    numbers = _NUMBER.findall(text)
    return numbers[-1].replace(",", "").replace("−", "-") if numbers else None


def last_line(text: str) -> str | None:
    """The last non-empty line.

    >>> last_line("work\\n\\n 7 \\n")
    '7'
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else None


def extract(text: str, form: str) -> str | None:
    """The completion's answer in ``form`` (one of :data:`FORMS`), or None when it gives none that way.

    >>> extract("so \\\\boxed{12}", "boxed"), extract("<answer>4</answer>", "answer_tag"), extract("  x ", "whole")
    ('12', '4', 'x')
    """
    if form == "boxed":
        boxed = find_boxed(text)
        return boxed[-1] if boxed else None
    if form == "whole":
        return text.strip()
    try:
        return _EXTRACTORS[form](text)
    except KeyError:
        raise ValueError(f"answer form must be one of {', '.join(FORMS)}; got {form!r}") from None


_EXTRACTORS = {"answer_tag": answer_tag, "hash": hash_answer, "answer_line": answer_line, "last_number": last_number,
               "last_line": last_line}
