"""String verifiers: ``exact`` and ``regex``."""
from __future__ import annotations

import re

from training.verifiers.base import Param, VerifierError, VerifierResult, register_verifier


def _normalise(text: str, case_sensitive: bool) -> str:
    text = " ".join(str(text).split())  # strip and collapse runs of whitespace
    return text if case_sensitive else text.casefold()


@register_verifier("exact")
def exact(completion: str, example: dict, *, answer_key: str = "answer", case_sensitive: bool = True) -> VerifierResult:
    """1.0 when the completion, stripped (inner whitespace collapsed), equals ``example[answer_key]``.

    >>> exact(" 42\\n", {"answer": "42"}).score
    1.0
    >>> exact("Paris", {"answer": "paris"}).score, exact("Paris", {"answer": "paris"}, case_sensitive=False).score
    (0.0, 1.0)
    """
    if answer_key not in example:
        raise VerifierError(f"exact: example has no field {answer_key!r}")
    got, want = _normalise(completion, case_sensitive), _normalise(example[answer_key], case_sensitive)
    return VerifierResult(1.0 if got == want else 0.0, {"extracted": got, "expected": want})


_FLAG_NAMES = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}


def _compile(pattern: str, flags: str) -> re.Pattern:
    bits = 0
    for ch in flags:
        if ch not in _FLAG_NAMES:
            raise ValueError(f"regex: unknown flag {ch!r} in flags={flags!r}; use any of 'imsx'")
        bits |= _FLAG_NAMES[ch]
    return re.compile(pattern, bits)


@register_verifier("regex")
def regex(completion: str, example: dict, *, pattern: str = "", pattern_key: str = "pattern", flags: str = "",
          mode: str = "search") -> VerifierResult:
    """1.0 when the pattern matches the completion. The pattern is the ``pattern`` parameter, else ``example[pattern_key]``.

    ``mode`` is ``search`` (anywhere) or ``fullmatch`` (the whole stripped completion).

    >>> regex("The answer is 17.", {}, pattern=r"answer is \\d+").score
    1.0
    >>> regex("17 apples", {"pattern": r"\\d+"}, mode="fullmatch").score
    0.0
    """
    if mode not in ("search", "fullmatch"):
        raise ValueError(f"regex: mode must be 'search' or 'fullmatch'; got {mode!r}")
    source = pattern or example.get(pattern_key)
    if not source:
        raise VerifierError(f"regex: no pattern parameter and example has no field {pattern_key!r}")
    compiled = _compile(source, flags)
    text = completion.strip() if mode == "fullmatch" else completion
    match = compiled.fullmatch(text) if mode == "fullmatch" else compiled.search(text)
    return VerifierResult(1.0 if match else 0.0, {"pattern": source, "match": match.group(0) if match else None})


# What a reward spec may set (types and bounds checked at submit time; training.verifiers.base.Param).
exact.PARAMS = {"answer_key": Param(str, max_len=100), "case_sensitive": Param(bool)}
regex.PARAMS = {"pattern": Param(str, max_len=1000), "pattern_key": Param(str, max_len=100),
                "flags": Param(str, max_len=10), "mode": Param(str, choices=("search", "fullmatch"))}
