"""The verifier contract and registry (docs/architecture.md#verifiers).

A verifier is a callable ``v(completion: str, example: dict) -> VerifierResult``. It is registered under a name
with :func:`register_verifier` and built with :func:`get_verifier`, which binds its parameters once and
rejects unknown ones, naming them. A verifier of the operator's own is reached by a dotted path
``"pkg.mod:fn"``, from the modules listed in $SEEDBED_VERIFIER_MODULES only.

Two kinds of thing can be registered:

* a plain function ``fn(completion, example, *, param=default, ...)``; ``get_verifier`` binds the keyword
  parameters;
* a class whose constructor takes the parameters and whose instances are callables with the shape above.
  Stateful verifiers (a sandbox pool, an HTTP client) use this form. An instance may also define
  ``batch(completions, examples) -> list[VerifierResult | VerifierError]`` to judge many at once.

A verifier that cannot judge (server down, sandbox broken, its own deadline passed) raises
:class:`VerifierError`; a wrong or missing answer is a normal result with score 0 and the reason in details.
"""
from __future__ import annotations

import importlib
import inspect
import os
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


_REGISTRY: dict[str, Any] = {}


def register_verifier(name: str) -> Callable[[Any], Any]:
    """Decorator registering a verifier function or class under ``name``.

    >>> @register_verifier("_doc_always_one")
    ... def always_one(completion, example):
    ...     return VerifierResult(1.0, {})
    >>> get_verifier("_doc_always_one")("anything", {}).score
    1.0
    """
    if not name or ":" in name:
        raise ValueError(f"verifier name must be non-empty and contain no ':'; got {name!r}")

    def deco(obj: Any) -> Any:
        if name in _REGISTRY and _REGISTRY[name] is not obj:
            raise ValueError(f"verifier {name!r} is already registered")
        _REGISTRY[name] = obj
        return obj

    return deco


def registered_names() -> list[str]:
    """Names of all built-in and registered verifiers."""
    _load_builtins()
    return sorted(n for n in _REGISTRY if not n.startswith("_"))


def check_reward_spec(rewards: Any) -> str:
    """"" when ``rewards`` is a valid reward spec (a list of {"name", "weight", "params"}), else what is wrong,
    naming the item: an unknown verifier or a parameter it does not take is caught here, before any work.

    >>> check_reward_spec([{"name": "exact", "params": {"case_sensitive": False}}])
    ''
    >>> check_reward_spec([{"name": "maths"}])[:36]
    "item 0: unknown verifier 'maths'; re"
    """
    if not isinstance(rewards, list):
        return f"must be a list of {{\"name\": verifier, \"weight\": w, \"params\": {{...}}}}; got {type(rewards).__name__}"
    for i, item in enumerate(rewards):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return f"item {i} must be a mapping with a string 'name'"
        extra = set(item) - {"name", "weight", "params"}
        if extra:
            return f"item {i} has unknown keys {sorted(extra)}"
        weight = item.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight != weight or abs(weight) == float("inf"):
            return f"item {i}: weight must be a finite number; got {weight!r}"
        params = item.get("params", {})
        if not isinstance(params, dict):
            return f"item {i}: params must be a mapping; got {type(params).__name__}"
        name = item["name"]
        if ":" in name:
            refused = dotted_path_error(name)
            if refused:
                return f"item {i}: {refused}"
            continue  # an allowed dotted path is imported (and checked) only where the reward is built
        if name not in _REGISTRY:
            _load_builtins()
        if name not in _REGISTRY or name.startswith("_"):
            return f"item {i}: unknown verifier {name!r}; registered: {', '.join(registered_names())}"
        obj = _REGISTRY[name]
        declared = getattr(obj, "PARAMS", None)
        try:
            if inspect.isclass(obj):
                _check_params(obj.__init__, params, name, skip=1, declared=declared)
            else:
                _check_params(obj, params, name, skip=2, declared=declared)
        except ValueError as exc:
            return f"item {i}: {exc}"
        # a verifier that checks its parameters' values (``check_params(**params) -> problem``) does so here
        problem = obj.check_params(**params) if hasattr(obj, "check_params") else ""
        if problem:
            return f"item {i}: {problem}"
    return ""


def verifier_params_help() -> str:
    """One line per verifier parameter that says what it chooses (``Param.help``), for the forms' help text.

    >>> "math: mode" in verifier_params_help()
    True
    """
    _load_builtins()
    return "; ".join(f"{name}: {key} — {param.help}" for name in registered_names()
                     for key, param in (getattr(_REGISTRY[name], "PARAMS", None) or {}).items() if param.help)


def _load_builtins() -> None:
    # Imported lazily so that `import training.verifiers` stays cheap and has no import cycle.
    from training.verifiers import simple, math_answer, ifeval, judge, code, reasoning_gym  # noqa: F401


VERIFIER_MODULES_ENV = "SEEDBED_VERIFIER_MODULES"


def allowed_verifier_modules() -> tuple[str, ...]:
    """The modules whose callables a reward spec may name by dotted path ``"pkg.mod:fn"``: those the operator
    lists in $SEEDBED_VERIFIER_MODULES (comma-separated; a package allows its submodules). None by default:
    a config names code only where the operator said so (docs/architecture.md#projects-and-trust)."""
    return tuple(m.strip() for m in os.environ.get(VERIFIER_MODULES_ENV, "").split(",") if m.strip())


def dotted_path_error(name: str) -> str:
    """"" when the dotted path ``name`` lies in an allowed module, else why it is refused (nothing imported)."""
    module_name = name.partition(":")[0]
    allowed = allowed_verifier_modules()
    if any(module_name == m or module_name.startswith(m + ".") for m in allowed):
        return ""
    return (f"verifier {name!r}: a dotted path may only name a module the operator allows in "
            f"${VERIFIER_MODULES_ENV} ({', '.join(allowed) or 'none are'}); use a registered verifier: "
            f"{', '.join(registered_names())}")


def _resolve(name: str) -> Any:
    if ":" in name:
        refused = dotted_path_error(name)
        if refused:
            raise ValueError(refused)
        module_name, _, attr = name.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ValueError(f"verifier {name!r}: cannot import module {module_name!r}: {exc}") from exc
        try:
            return getattr(module, attr)
        except AttributeError:
            raise ValueError(f"verifier {name!r}: module {module_name!r} has no attribute {attr!r}") from None
    if name not in _REGISTRY:
        _load_builtins()
    if name not in _REGISTRY:
        raise ValueError(f"unknown verifier {name!r}; known: {', '.join(registered_names())} "
                         f"(or a dotted path 'pkg.module:function')")
    return _REGISTRY[name]


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


def _check_params(target: Callable, params: dict, name: str, skip: int, declared: dict | None = None) -> None:
    """Reject parameters the verifier does not accept, naming them (no silently ignored typos), and, where the
    verifier declares its parameters (``PARAMS``), any other parameter and any value of the wrong type or out
    of bounds."""
    if declared is not None:
        unknown = sorted(set(params) - set(declared))
        if unknown:
            raise ValueError(f"verifier {name!r}: unknown parameter(s) {unknown}; accepted: {sorted(declared)}")
        for key, value in params.items():
            problem = declared[key].problem(value)
            if problem:
                raise ValueError(f"verifier {name!r}: {key} {problem}")
        return
    sig = inspect.signature(target)
    accepted = list(sig.parameters.values())[skip:]
    if any(p.kind is p.VAR_KEYWORD for p in accepted):
        return
    names = {p.name for p in accepted if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    unknown = sorted(set(params) - names)
    if unknown:
        raise ValueError(f"verifier {name!r}: unknown parameter(s) {unknown}; accepted: {sorted(names)}")


class _BoundFunction:
    """A verifier function with its parameters bound (picklable when the function is)."""

    def __init__(self, fn: Callable, params: dict, name: str):
        self.fn, self.params, self.name = fn, dict(params), name

    def __call__(self, completion: str, example: dict) -> VerifierResult:
        result = self.fn(completion, example, **self.params)
        if not isinstance(result, VerifierResult):
            if isinstance(result, (int, float)) and not isinstance(result, bool):
                return VerifierResult(float(result), {})
            raise VerifierError(f"verifier {self.name!r} returned {type(result).__name__}, not VerifierResult")
        return result

    def __repr__(self) -> str:
        return f"<verifier {self.name} {self.params}>"


def get_verifier(name: str, **params: Any) -> Verifier:
    """Build the verifier registered as ``name`` (or at dotted path ``"pkg.mod:fn"``) with ``params``.

    >>> v = get_verifier("exact", case_sensitive=False)
    >>> v("  Paris ", {"answer": "paris"}).score
    1.0
    >>> get_verifier("exact", case_sensitve=False)
    Traceback (most recent call last):
    ...
    ValueError: verifier 'exact': unknown parameter(s) ['case_sensitve']; accepted: ['answer_key', 'case_sensitive']
    """
    obj = _resolve(name)
    if inspect.isclass(obj):
        _check_params(obj.__init__, params, name, skip=1)
        return obj(**params)
    if not callable(obj):
        raise ValueError(f"verifier {name!r} is not callable")
    _check_params(obj, params, name, skip=2)
    return _BoundFunction(obj, params, name)
