"""The verifier contract (docs/architecture.md#verifiers): what a verifier returns (:class:`VerifierResult`), what
it raises when it cannot judge (:class:`VerifierError`), the parameters a config may set (:class:`Param`), and
:func:`register_verifier`, which files a verifier under its name. The built-in verifiers import this module
only; looking a verifier up, binding its parameters and loading the built-ins is ``training.verifiers.registry``
(so the built-ins never import back what loads them).

A verifier is a callable ``v(completion: str, example: dict) -> VerifierResult``. Two kinds of thing can be
registered:

* a plain function ``fn(completion, example, *, param=default, ...)``; ``get_verifier`` binds the keyword
  parameters;
* a class whose constructor takes the parameters and whose instances are callables with the shape above.
  Stateful verifiers (a sandbox pool, an HTTP client) use this form. An instance may also define
  ``batch(completions, examples) -> list[VerifierResult | VerifierError]`` to judge many at once.

A verifier that cannot judge (server down, sandbox broken, its own deadline passed) raises
:class:`VerifierError`; a wrong or missing answer is a normal result with score 0 and the reason in details.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol


@dataclass
class VerifierResult:
    """One verdict. ``score`` is the reward (usually in [0, 1]); ``details`` says what was extracted and why."""

    score: float
    details: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.score = float(self.score)


class VerifierError(RuntimeError):
    """The verifier could not judge this completion (an infrastructure failure, not a wrong answer)."""


class Verifier(Protocol):
    def __call__(self, completion: str, example: dict) -> VerifierResult: ...


VERIFIER_REGISTRY: dict[str, Any] = {}


def register_verifier(name: str) -> Callable[[Any], Any]:
    """Decorator registering a verifier function or class under ``name``.

    >>> from training.verifiers.registry import get_verifier
    >>> @register_verifier("_doc_always_one")
    ... def always_one(completion, example):
    ...     return VerifierResult(1.0, {})
    >>> get_verifier("_doc_always_one")("anything", {}).score
    1.0
    """
    if not name or ":" in name:
        raise ValueError(f"verifier name must be non-empty and contain no ':'; got {name!r}")

    def deco(obj: Any) -> Any:
        if name in VERIFIER_REGISTRY and VERIFIER_REGISTRY[name] is not obj:
            raise ValueError(f"verifier {name!r} is already registered")
        VERIFIER_REGISTRY[name] = obj
        return obj

    return deco


@dataclass(frozen=True)
class Param:
    """A parameter a reward spec may set for a verifier: its type and bounds (checked at submit time, before
    any work). A verifier lists them in ``PARAMS = {name: Param(...)}``; a parameter it takes but does not list
    there (e.g. which user the code sandbox runs as) is the operator's, never a config's."""

    kind: type
    lo: float | None = None
    hi: float | None = None
    choices: tuple = ()
    max_len: int = 200
    optional: bool = False  # None is allowed (the verifier's own default)
    help: str = ""  # what it chooses, shown where a reward spec is written (the run and evaluation forms)

    def problem(self, value: Any) -> str:
        if value is None and self.optional:
            return ""
        if self.kind is bool:
            return "" if isinstance(value, bool) else f"must be true or false; got {value!r}"
        if self.kind in (int, float):
            numeric = (int,) if self.kind is int else (int, float)
            if isinstance(value, bool) or not isinstance(value, numeric):
                return f"must be {'an integer' if self.kind is int else 'a number'}; got {value!r}"
            if value != value or value in (float("inf"), float("-inf")):
                return f"must be a finite number; got {value!r}"
            if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
                return f"must lie in [{self.lo:g}, {self.hi:g}]; got {value!r}"
            return ""
        if self.kind is str:
            if not isinstance(value, str):
                return f"must be a string; got {type(value).__name__}"
            if self.choices and value not in self.choices:
                return f"must be one of {', '.join(self.choices)}; got {value!r}"
            return f"at most {self.max_len} characters; got {len(value)}" if len(value) > self.max_len else ""
        if self.kind is list:
            if not isinstance(value, (list, tuple)):
                return f"must be a list; got {type(value).__name__}"
            return f"at most {self.max_len} items; got {len(value)}" if len(value) > self.max_len else ""
        return "" if isinstance(value, self.kind) else f"must be a {self.kind.__name__}; got {value!r}"
