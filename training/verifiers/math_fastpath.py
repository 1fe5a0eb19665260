"""An exact, conservative in-process fast path for the ``math`` verifier's common answer shapes.

math-verify parses LaTeX with an ANTLR grammar and compares with sympy: 10-30 ms per answer, and it must run
in worker processes (its timeouts use SIGALRM). Most RL math answers are short numbers, so the parent first
tries a tiny grammar parsed with the stdlib into a canonical value ``q * sqrt(m)`` (``q`` a
:class:`fractions.Fraction`, ``m`` a square-free integer >= 1):

* integers, signed, with thousands separators (``1,000``, ``1{,}000``) or leading zeros (``042``);
* decimals (``-0.25``, ``1,000.5``, ``.5``);
* fractions ``a/b``, ``\\frac{a}{b}``, ``\\dfrac``, ``\\tfrac``, ``\\frac34``;
* non-negative percentages ``12.5\\%`` / ``12.5%``;
* radicals ``2\\sqrt{3}``, ``\\sqrt 8``, ``-\\frac{3\\sqrt{2}}{4}``, ``\\sqrt{2}/2``;
* any of the above (percentages and thousands separators excepted) as ``x = value`` with a one-letter variable.

:func:`decide` then returns math-verify's verdict, or ``None`` when it is not certain of it; the caller sends
``None`` cases (and everything outside the grammar) to math-verify. The rules mirror
``math_verify.grader.sympy_expr_eq`` for these shapes (version 0.9.0):

* a decimal is a sympy ``Float`` (math-verify turns only the literal ``0.5`` into ``1/2``); when a Float is
  involved math-verify compares ``round(a, 6) == round(b, 6)``. Hence: equal values -> equal; values further
  apart than 2e-6 cannot round to the same 6th decimal -> not equal; anything in between -> undecided;
* a percentage ``p%`` is ``p * (1/100)``; two integers-or-integer-percentages compare their *stripped*
  values (math-verify says ``5% == 5`` and ``5% == 0.05``): equal stripped values -> equal; unequal stripped
  but equal true values (``50`` vs ``5000%``, where sympy's simplify may see through) -> undecided;
* otherwise the comparison is exact (``doit`` equality, then ``simplify(a - b).is_zero``, or an ``evalf``
  of the difference for radicals): equal values -> equal; a relative difference above 1e-9 -> not equal;
  anything closer (never for these bounded sizes, but cheap to guard) -> undecided;
* ``x = 3`` vs ``3`` compares the value (math-verify unwraps an assignment when the other side is not an
  equation); two assignments must name the same variable, else undecided.

``tests/verifiers/test_math_fastpath.py`` checks every claimed verdict against math-verify over a generated
corpus of equal and unequal pairs of many shapes.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from fractions import Fraction

# Sizes beyond these go to math-verify: sympy Floats carry 15 significant digits, so bounded magnitudes keep
# the rounding argument above safe, and bounded radicands keep the square-free split cheap.
MAX_DECIMAL_DIGITS = 12
MAX_FLOAT_MAGNITUDE = Fraction(10**6)
MAX_RADICAND = 10**6
MAX_RADICAL_PART = 10**6

_INT = r"(?:[1-9]\d{0,2}(?:(?:,|\{,\})\d{3})+|\d+)"      # 1,000 / 1{,}000 / 042
_DEC = rf"(?:{_INT}?\.\d+)"                               # 0.25 / .5 / 1,000.5
_SIGN = r"(?P<sign>[+-]?)"
_FRAC_CMD = r"\\[dt]?frac"

_NUMBER_RE = re.compile(rf"{_SIGN}(?P<num>{_DEC}|{_INT})")
_PERCENT_RE = re.compile(r"(?P<num>\d*\.\d+|\d+)\\?%")  # "1,000%" is a set to math-verify
_PART = r"(?:0|[1-9]\d*)"                                # fraction parts: no leading zeros
_SLASH_RE = re.compile(rf"(?P<a>-?{_PART})/(?P<b>{_PART})")
_FRAC_RE = re.compile(rf"{_SIGN}{_FRAC_CMD}(?:\{{(?P<a>-?{_PART})\}}\{{(?P<b>{_PART})\}}|(?P<a1>\d)(?P<b1>\d))")
_SQRT = r"(?P<coef>(?:[1-9]\d*)?)\\sqrt(?:\{(?P<rad>\d+)\}|\s?(?P<rad1>\d)(?!\d))"
_RADICAL_RE = re.compile(rf"{_SIGN}{_SQRT}(?:/(?P<den>{_PART}))?")
_FRAC_RADICAL_RE = re.compile(rf"{_SIGN}{_FRAC_CMD}\{{(?P<isign>-?){_SQRT}\}}\{{(?P<den>{_PART})\}}")
_ASSIGNMENT_RE = re.compile(r"(?P<var>[a-df-hj-zA-DF-HJ-Z])\s*=\s*(?P<rhs>.+)")


@dataclass(frozen=True)
class Scalar:
    """The value ``q * sqrt(m)`` (``m`` square-free; ``m == 1`` for rationals) and how sympy will type it.

    ``floaty``: written as a decimal (a sympy Float). ``percent``: written ``p%``; ``q`` is then ``p`` (the
    stripped value) and :meth:`value` divides by 100. ``integer_literal``: a plain integer or a percentage of
    one (sympy ``Integer`` or ``Integer * (1/100)``), the shapes math-verify's integer rule applies to.
    """

    q: Fraction
    m: int = 1
    floaty: bool = False
    percent: bool = False
    integer_literal: bool = False

    def value(self) -> tuple[Fraction, int]:
        return (self.q / 100 if self.percent else self.q), self.m

    def approx(self) -> float:
        q, m = self.value()
        return float(q) * math.sqrt(m)

    def __str__(self) -> str:
        q, m = self.value()
        return str(q) if m == 1 else f"{q}*sqrt({m})"


@dataclass(frozen=True)
class Answer:
    """A parsed answer: a scalar, optionally assigned to a one-letter variable (``x = 3``)."""

    scalar: Scalar
    var: str | None = None

    def __str__(self) -> str:
        return f"{self.var} = {self.scalar}" if self.var else str(self.scalar)


def _int(text: str) -> int:
    return int(text.replace("{,}", "").replace(",", ""))


def _decimal(text: str) -> Fraction | None:
    """Exact value of a decimal literal, or None past the sizes a sympy Float holds safely."""
    digits = text.replace("{,}", "").replace(",", "")
    if len(digits.replace(".", "").lstrip("0")) > MAX_DECIMAL_DIGITS:
        return None
    value = Fraction(digits)
    return value if abs(value) < MAX_FLOAT_MAGNITUDE else None


@functools.lru_cache(maxsize=4096)
def square_free(n: int) -> tuple[int, int]:
    """``(k, m)`` with ``n == k**2 * m`` and ``m`` square-free (n >= 1), by trial division.

    >>> square_free(72), square_free(7), square_free(1)
    ((6, 2), (1, 7), (1, 1))
    """
    k, m, d = 1, n, 2
    while d * d <= m:
        while m % (d * d) == 0:
            m //= d * d
            k *= d
        d += 1
    return k, m


def _radical(sign: str, coef: str, radicand: str, den: str | None) -> Scalar | None:
    coefficient, n, denominator = int(coef or 1), int(radicand), int(den or 1)
    if n > MAX_RADICAND or coefficient > MAX_RADICAL_PART or not 0 < denominator <= MAX_RADICAL_PART:
        return None
    if n == 0:
        return None  # 0*sqrt: sympy keeps odd unevaluated zeros; leave them to math-verify
    k, m = square_free(n)
    q = Fraction(coefficient * k, denominator) * (-1 if sign == "-" else 1)
    return Scalar(q, m)


def _parse_scalar(text: str) -> Scalar | None:
    m = _NUMBER_RE.fullmatch(text)
    if m:
        sign = -1 if m["sign"] == "-" else 1
        if "." in m["num"]:
            value = _decimal(m["num"])
            return None if value is None else Scalar(sign * value, floaty=True)
        return Scalar(Fraction(sign * _int(m["num"])), integer_literal=True)
    m = _PERCENT_RE.fullmatch(text)
    if m:
        if "." in m["num"]:
            value = _decimal(m["num"])
            return None if value is None else Scalar(value, floaty=True, percent=True)
        return Scalar(Fraction(int(m["num"])), percent=True, integer_literal=True)
    m = _SLASH_RE.fullmatch(text)
    if m:
        return Scalar(Fraction(int(m["a"]), int(m["b"]))) if int(m["b"]) else None
    m = _FRAC_RE.fullmatch(text)
    if m:
        if m["sign"] == "-" and (m["a"] or "").startswith("-"):
            return None
        a, b = int(m["a"] or m["a1"]), int(m["b"] or m["b1"])
        return Scalar(Fraction(a, b) * (-1 if m["sign"] == "-" else 1)) if b else None
    m = _RADICAL_RE.fullmatch(text)
    if m:
        return _radical(m["sign"], m["coef"], m["rad"] or m["rad1"], m["den"])
    m = _FRAC_RADICAL_RE.fullmatch(text)
    if m:
        if m["sign"] == "-" and m["isign"] == "-":
            return None
        return _radical(m["sign"] or m["isign"], m["coef"], m["rad"] or m["rad1"], m["den"])
    return None


@functools.lru_cache(maxsize=65536)
def parse_fast(text: str) -> Answer | None:
    """Parse ``text`` into an :class:`Answer`, or None when it is outside the fast grammar.

    >>> str(parse_fast(r"\\dfrac{6}{4}")), str(parse_fast("12.5\\\\%")), str(parse_fast(r"x = 2\\sqrt{8}"))
    ('3/2', '1/8', 'x = 4*sqrt(2)')
    >>> parse_fast(r"\\frac{1}{2}\\text{ cm}") is None, parse_fast("1,2") is None
    (True, True)
    """
    text = text.strip().strip("$").strip()
    if len(text) > 80 or not text.isascii():
        return None  # (Python's \\d and int() take "３" and "٣" for 3; to Math-Verify they are no number)
    m = _ASSIGNMENT_RE.fullmatch(text)
    if m:
        if "," in m["rhs"]:
            return None  # math-verify reads "x = 1,000" as x = {1, 0}: a set, not a thousands separator
        scalar = _parse_scalar(m["rhs"].strip())
        if scalar is None or scalar.percent:
            return None
        return Answer(scalar, m["var"])
    scalar = _parse_scalar(text)
    return None if scalar is None else Answer(scalar)


def decide(gold: Answer, answer: Answer, float_rounding: int = 6) -> bool | None:
    """math-verify's verdict on ``verify(gold, answer)`` for two fast-path answers, or None if not certain.

    >>> decide(parse_fast("0.5"), parse_fast(r"\\frac{1}{2}")), decide(parse_fast("5\\\\%"), parse_fast("5"))
    (True, True)
    >>> decide(parse_fast("x=3"), parse_fast("y=3")) is None, decide(parse_fast("1/3"), parse_fast("0.333333"))
    (True, None)
    """
    if gold.var and answer.var and gold.var != answer.var:
        return None  # math-verify solves both equations and compares variables too: rare, let it judge
    if (gold.scalar.floaty or answer.scalar.floaty) and float_rounding != 6:
        return None  # the float rules below were checked against math-verify at its default rounding only
    return _decide_scalar(gold.scalar, answer.scalar)


def _decide_scalar(a: Scalar, b: Scalar) -> bool | None:
    if a.percent or b.percent:
        # Percent rules only for the shapes whose sympy type is certain (see module docstring).
        if not all(s.percent or s.floaty or s.integer_literal or (s.m == 1 and s.q.denominator != 1)
                   for s in (a, b)):
            return None
    if a.value() == b.value():
        if a.integer_literal and b.integer_literal and a.percent != b.percent:
            return True if a.q == b.q else None  # 50 vs 5000%: equal values, unequal stripped ones
        return True
    if a.integer_literal and b.integer_literal and a.percent != b.percent:
        return True if a.q == b.q else False  # math-verify: 5% == 5 (the percent sign is dropped)
    if not (a.floaty or b.floaty) and a.m == b.m == 1:
        return False  # two exact rationals: math-verify compares them exactly
    gap = abs(a.approx() - b.approx())
    if a.floaty or b.floaty:
        return False if gap > 2e-6 else None  # round(a, 6) == round(b, 6) needs |a - b| < 1e-6
    return False if gap > 1e-9 * max(1.0, abs(a.approx()), abs(b.approx())) else None
