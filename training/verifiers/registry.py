"""The verifier registry (docs/architecture.md#verifiers): :func:`get_verifier` builds the verifier registered
under a name, binding its parameters once and rejecting unknown ones, naming them; :func:`check_reward_spec`
checks a reward spec before any work. The built-in verifiers are every module of the package, imported on first
use (``training.extensions.modules``); each registers itself with ``training.verifiers.base.register_verifier``
where it is defined and imports nothing of this module, so the import graph has no circle. A verifier of the
operator's own is reached by a dotted path ``"pkg.mod:fn"``, from the modules listed in $SEEDBED_VERIFIER_MODULES
only.
"""
from __future__ import annotations

import importlib
import inspect
import json
import os
import threading
from typing import Any, Callable, Sequence

from training.extensions import import_all
from training.verifiers.base import VERIFIER_REGISTRY, Verifier, VerifierError, VerifierResult
from training.verifiers.hybrid import RewardBatch, RewardFunction


def registered_names() -> list[str]:
    """Names of all built-in and registered verifiers."""
    _load_builtins()
    return sorted(n for n in VERIFIER_REGISTRY if not n.startswith("_"))


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
        if name not in VERIFIER_REGISTRY:
            _load_builtins()
        if name not in VERIFIER_REGISTRY or name.startswith("_"):
            return f"item {i}: unknown verifier {name!r}; registered: {', '.join(registered_names())}"
        obj = VERIFIER_REGISTRY[name]
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
                     for key, param in (getattr(VERIFIER_REGISTRY[name], "PARAMS", None) or {}).items() if param.help)


def _load_builtins() -> None:
    # Every module of the package, imported on first use so that `import training.verifiers` stays cheap (each
    # verifier registers itself where it is defined; they import base, never this module)
    import_all("training.verifiers")


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
    if name not in VERIFIER_REGISTRY:
        _load_builtins()
    if name not in VERIFIER_REGISTRY:
        raise ValueError(f"unknown verifier {name!r}; known: {', '.join(registered_names())} "
                         f"(or a dotted path 'pkg.module:function')")
    return VERIFIER_REGISTRY[name]




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


def _spec_key(item: dict) -> str:
    return json.dumps(item, sort_keys=True, default=str)


_BUILT: dict[str, RewardFunction] = {}
_BUILT_LOCK = threading.Lock()


def build_reward(spec: Sequence[dict]) -> RewardFunction:
    """The RewardFunction for ``spec``, built on first use and then reused (same spec, same verifiers)."""
    key = _spec_key(list(spec))
    with _BUILT_LOCK:
        if key not in _BUILT:
            _BUILT[key] = RewardFunction(spec, get_verifier)
        return _BUILT[key]


def combine_rewards(spec: Sequence[dict], completions: Sequence[str], examples: Sequence[dict]) -> RewardBatch:
    """Score a batch with a hybrid reward spec: R_i = Σ_v w_v · s_v(completion_i, example_i).

    >>> rb = combine_rewards([{"name": "exact", "weight": 1.0}, {"name": "regex", "weight": 0.5,
    ...                       "params": {"pattern": "^4"}}], ["4", "5"], [{"answer": "4"}, {"answer": "4"}])
    >>> rb.totals, rb.metrics()["reward/exact/mean"], rb.errors
    ([1.5, 0.0], 0.5, 0)
    """
    if len(completions) != len(examples):
        raise ValueError(f"combine_rewards: {len(completions)} completions but {len(examples)} examples")
    return build_reward(spec)(completions, examples)
