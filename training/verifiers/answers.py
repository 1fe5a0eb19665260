"""Taking the final answer out of a completion, in the form its prompt asked for: pure functions shared by the
verifiers that read an answer (``math``, ``reasoning_gym``), so a form means the same thing in both.

Forms (:data:`FORMS`, the names a reward spec uses):

* ``boxed``: the last ``\\boxed{...}`` / ``\\fbox{...}`` (braces matched) — the MATH / DeepSeek-R1 convention;
* ``answer_tag``: the last ``<answer>...</answer>`` — reasoning-gym's and many R1-style prompts';
* ``hash``: the rest of the line after the last ``####`` — GSM8K's reference solutions;
* ``answer_line``: the rest of the last line that starts "Answer:" / "Final answer:" / "Answer is";
* ``last_number``: the last number in the text (``-3``, ``1,234`` → ``1234``, ``3.5``, ``3/4``);
* ``last_line``: the last non-empty line; ``whole``: the whole completion.

Each returns the answer text stripped of surrounding whitespace, or None when the completion has no answer in
that form (an empty ``<answer></answer>`` is none).
"""
from __future__ import annotations

import re

FORMS = ("answer_tag", "boxed", "hash", "answer_line", "last_number", "last_line", "whole")

_BOXED_START = re.compile(r"\\(?:boxed|fbox)\s*")
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_ANSWER_LINE = re.compile(r"(?im)^\W*(?:final\s+answer|answer)\s*(?:is)?\s*[:：]?\s*(.+?)\s*$")
# A number not glued to a word, a closing bracket or a decimal point before it (so "5-3" ends in 3, not -3);
# thousands groups only in threes ("1,2,3" is three numbers); a fraction "3/4" is one number.
_NUMBER = re.compile(r"(?<![\w.)\]])[-−]?(?:\d{1,3}(?:,\d{3})+(?!\d|,\d)|\d+)(?:\.\d+)?(?:/\d+)?")


def find_boxed(text: str) -> list[str]:
    """Contents of every ``\\boxed{...}`` / ``\\fbox{...}`` (braces matched; ``\\boxed 5`` form too), in order.

    >>> find_boxed(r"so \\boxed{\\frac{1}{2}} or \\boxed 3 and \\boxed{")
    ['\\\\frac{1}{2}', '3']
    """
    found = []
    for m in _BOXED_START.finditer(text):
        i = m.end()
        if i < len(text) and text[i] == "{":
            depth, j = 0, i
            while j < len(text):
                if text[j] == "{" and text[j - 1] != "\\":
                    depth += 1
                elif text[j] == "}" and text[j - 1] != "\\":
                    depth -= 1
                    if depth == 0:
                        found.append(text[i + 1:j].strip())
                        break
                j += 1
        else:  # "\boxed 5": one token up to whitespace or '$'
            token = re.match(r"[^\s$]+", text[i:])
            if token and m.group(0).endswith((" ", "\t")):
                found.append(token.group(0))
    return found


def answer_tag(text: str) -> str | None:
    """The content of the last ``<answer>...</answer>`` (any case).

    >>> answer_tag("I think <answer>4</answer>, no: <ANSWER> 5 </ANSWER>"), answer_tag("<answer> </answer>")
    ('5', None)
    """
    found = _ANSWER_TAG.findall(text)
    return (found[-1].strip() or None) if found else None


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


def answer_line(text: str) -> str | None:
    """The rest of the last line that begins "Answer:" / "Final answer:" / "Answer is" (any case).

    >>> answer_line("Work...\\nAnswer: $12$.\\nFinal answer is 13")
    '13'
    """
    lines = _ANSWER_LINE.findall(text)
    return lines[-1].strip() if lines else None


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
