"""Field-by-field input checking, shared by every schema: the training config (``training.config``), the sweep
policies (``webapp.sweeps.policies``) and the evaluation requests (``webapp.evals``).

* :class:`FieldErrors` is the one exception for invalid input: ``errors`` maps each bad field to a message;
  forms attach them to their fields, the CLI prints them, the worker never sees invalid input.
* :func:`coerce` turns one value (from JSON, YAML or a form's text) into the field's annotated type.
* :func:`control_character_error` refuses control characters in a name or a reason a person types: printed
  raw, ESC, C1 and newline characters would act on the reader's terminal (set its title, write its clipboard)
  or forge a table row.
* A field's single-value range lives in its metadata (``min``/``max`` inclusive, ``gt``/``lt`` exclusive):
  :func:`range_error` checks it and :func:`range_text` says it, so the form's help text, the API and
  ``validate`` read the same numbers. Rules that tie two fields together stay in the schema's ``validate``.
"""
from __future__ import annotations

import json
import math
import types
from typing import Any, Optional, Union, get_args, get_origin

__all__ = ["FieldErrors", "coerce", "coerce_keys", "range_error", "range_text", "RANGE_KEYS",
           "control_character_error", "require_no_control_characters"]

RANGE_KEYS = ("min", "max", "gt", "lt")


class FieldErrors(ValueError):
    """Invalid input. ``errors`` maps each bad field name to a precise message.

    >>> str(FieldErrors({"lr": "must be > 0; got -1.0"}))
    'lr: must be > 0; got -1.0'
    """

    def __init__(self, errors: dict[str, str]):
        self.errors = dict(errors)
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.errors.items()))


# Bidirectional overrides and isolates reorder what a terminal or a page shows (a name that reads backwards)
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def is_control_character(ch: str) -> bool:
    r"""C0 (newline, ESC ...), DEL and C1 (U+0080-U+009F: CSI, OSC ...), line and paragraph separators and the
    bidirectional controls.

    >>> [is_control_character(c) for c in ("a", "\x1b", "\n", "\x9b", "\u2028", "\u202e", "é")]
    [False, True, True, True, True, True, False]
    """
    import unicodedata

    return unicodedata.category(ch) in ("Cc", "Zl", "Zp") or ch in BIDI_CONTROLS


def control_character_error(text: str) -> Optional[str]:
    r"""The message for a name or reason that holds a control character (the first one named), None when clean.

    >>> control_character_error("run \x1b]0;owned\x07"), control_character_error("a run · 2")
    ('must not hold control characters; U+001B at character 5', None)
    """
    for i, ch in enumerate(text):
        if is_control_character(ch):
            return f"must not hold control characters; U+{ord(ch):04X} at character {i + 1}"
    return None


def require_no_control_characters(**fields: Optional[str]) -> None:
    """Raise FieldErrors naming every given field (``name=..., reason=...``; None is skipped) that holds a
    control character."""
    errors = {field: problem for field, text in fields.items()
              if isinstance(text, str) and (problem := control_character_error(text))}
    if errors:
        raise FieldErrors(errors)


_NAMES = {"str": str, "int": int, "float": float, "bool": bool, "list": list, "dict": dict}


def _resolve(annotation: Any) -> tuple[Any, bool]:
    """(base type, optional) of an annotation given as a type or, under ``from __future__ import annotations``,
    as its text ("Optional[float]", "int | None")."""
    if isinstance(annotation, str):
        text = annotation.replace(" ", "")
        if text.startswith("Optional[") and text.endswith("]"):
            return _NAMES[text[len("Optional["):-1]], True
        if text.endswith("|None"):
            return _NAMES[text[:-len("|None")]], True
        return _NAMES[text], False
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return args[0], len(args) < len(get_args(annotation))
    return annotation, False


def coerce(value: Any, annotation: Any) -> Any:
    """``value`` as the annotated type, or ValueError saying what was expected. Text from forms is accepted
    ("3", "1e-4", "true", "" for an optional field); numbers must be finite (NaN and inf are refused).

    >>> coerce("1e-4", float), coerce("7", int), coerce("", Optional[float]), coerce("on", bool)
    (0.0001, 7, None, True)
    >>> coerce(float("nan"), float)
    Traceback (most recent call last):
    ...
    ValueError: expected a finite number; got nan
    """
    base, optional = _resolve(annotation)
    if optional and (value is None or value == ""):
        return None
    if value is None:
        raise ValueError("is required (got null)")
    if base is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on", "false", "0", "no", "off"):
            return value.lower() in ("true", "1", "yes", "on")
        raise ValueError(f"expected true or false; got {value!r}")
    if base is int:
        if isinstance(value, bool):
            raise ValueError(f"expected an integer; got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise ValueError(f"expected an integer; got {value!r}")
    if base is float:
        number = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                pass
        if number is None or not math.isfinite(number):
            raise ValueError(f"expected a finite number; got {value!r}")
        return number
    if base is str:
        if not isinstance(value, str):
            raise ValueError(f"expected a string; got {value!r}")
        return value
    if base in (list, dict):
        if isinstance(value, str):
            try:
                value = json.loads(value) if value.strip() else base()
            except json.JSONDecodeError as exc:
                raise ValueError(f"expected a JSON {base.__name__}: {exc.msg}") from None
        if not isinstance(value, base):
            raise ValueError(f"expected a {base.__name__}; got {value!r}")
        return value
    raise TypeError(f"unsupported annotation {annotation!r}")


def coerce_keys(fields: dict, mapping: dict, unknown: str) -> tuple[dict, dict[str, str]]:
    """Each key of ``mapping`` coerced to its dataclass field's type (``fields``: name -> dataclasses.Field):
    (values, errors), an unknown key's error being ``unknown`` with ``{key}`` and ``{allowed}`` filled in.

    >>> import dataclasses
    >>> @dataclasses.dataclass
    ... class P:
    ...     n: int = 1
    >>> coerce_keys({f.name: f for f in dataclasses.fields(P)}, {"n": "3", "m": 1}, "unknown key {key!r}; allowed: {allowed}")
    ({'n': 3}, {'m': "unknown key 'm'; allowed: n"})
    """
    values: dict = {}
    errors: dict[str, str] = {}
    for key, raw in mapping.items():
        if key not in fields:
            errors[key] = unknown.format(key=key, allowed=", ".join(sorted(fields)))
            continue
        try:
            values[key] = coerce(raw, fields[key].type)
        except ValueError as exc:
            errors[key] = str(exc)
    return values, errors


def _fmt(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def range_text(meta: dict) -> str:
    """The range in the metadata as text, e.g. "in [1, 4096]", "> 0 and <= 1", or "" when unbounded.

    >>> range_text({"min": 1, "max": 4096}), range_text({"gt": 0, "max": 1.0}), range_text({})
    ('in [1, 4096]', 'in (0, 1]', '')
    """
    lo = ("[", meta["min"]) if "min" in meta else ("(", meta["gt"]) if "gt" in meta else None
    hi = ("]", meta["max"]) if "max" in meta else (")", meta["lt"]) if "lt" in meta else None
    if lo and hi:
        return f"in {lo[0]}{_fmt(lo[1])}, {_fmt(hi[1])}{hi[0]}"
    if lo:
        return f"{'>=' if lo[0] == '[' else '>'} {_fmt(lo[1])}"
    if hi:
        return f"{'<=' if hi[0] == ']' else '<'} {_fmt(hi[1])}"
    return ""


def range_error(value: Any, meta: dict) -> Optional[str]:
    """The message when a number (or each number of a list) lies outside the metadata's range, else None.

    >>> range_error(0, {"min": 1, "max": 10}), range_error(5, {"min": 1, "max": 10})
    ('must be in [1, 10]; got 0', None)
    """
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    ok = (("min" not in meta or value >= meta["min"]) and ("max" not in meta or value <= meta["max"])
          and ("gt" not in meta or value > meta["gt"]) and ("lt" not in meta or value < meta["lt"]))
    return None if ok else f"must be {range_text(meta)}; got {value}"
