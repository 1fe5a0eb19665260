"""Batch scoring and hybrid rewards (a weighted sum of verifiers).

The training loop calls a :class:`RewardFunction` (``training.verifiers.registry.build_reward``) once per rollout batch with the run's reward spec
``[{"name": "math", "weight": 1.0}, {"name": "ifeval", "weight": 0.2, "params": {...}}]``:

    R_i = Σ_v w_v · s_v(completion_i, example_i)

and logs ``reward/<name>/mean`` per verifier from :meth:`RewardBatch.metrics`. A verifier that raises
:class:`VerifierError` on an item contributes nothing to that item's total; the item is flagged in
``RewardBatch.failed`` and counted in ``RewardBatch.errors`` so the loop can mask it and fail the run past
``max_verifier_error_rate``.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from training.verifiers.base import Verifier, VerifierError, VerifierResult


def score_batch(verifier: Verifier, completions: Sequence[str], examples: Sequence[dict]) -> list:
    """Judge each (completion, example) pair; each item is a VerifierResult or the VerifierError it raised.

    Verifiers that can work in parallel (math: a process pool; code: one fork server per core; judge:
    concurrent requests) expose ``batch`` and are called through it; others run one item after the other.

    >>> from training.verifiers import get_verifier
    >>> [r.score for r in score_batch(get_verifier("exact"), ["1", "2"], [{"answer": "1"}, {"answer": "1"}])]
    [1.0, 0.0]
    """
    if len(completions) != len(examples):
        raise ValueError(f"score_batch: {len(completions)} completions but {len(examples)} examples")
    batch = getattr(verifier, "batch", None)
    if batch is not None:
        results = list(batch(list(completions), list(examples)))
        if len(results) != len(completions):
            raise VerifierError(f"{verifier!r}.batch returned {len(results)} results for {len(completions)} items")
        return results
    out: list = []
    for completion, example in zip(completions, examples):
        try:
            out.append(verifier(completion, example))
        except VerifierError as exc:
            out.append(exc)
    return out


@dataclass
class RewardTerm:
    """One line of a reward spec, built."""

    key: str  # metric key: reward/<key>/mean
    name: str
    weight: float
    params: dict
    verifier: Verifier


@dataclass
class RewardBatch:
    """Rewards of one batch. ``totals[i]`` is completion i's weighted sum; ``scores[key][i]`` a verifier's score
    (None where it raised); ``details[i][key]`` its details (or {"error": message})."""

    totals: list[float]
    scores: dict[str, list[float | None]]
    details: list[dict]
    failed: list[bool]
    errors: int
    errors_by_verifier: dict[str, int] = field(default_factory=dict)
    seconds_by_verifier: dict[str, float] = field(default_factory=dict)

    def metrics(self) -> dict[str, float]:
        """``reward/<name>/mean`` over the items the verifier judged, plus error counts and timings."""
        out: dict[str, float] = {}
        for key, values in self.scores.items():
            judged = [v for v in values if v is not None]
            out[f"reward/{key}/mean"] = sum(judged) / len(judged) if judged else math.nan
            out[f"verifier/{key}/errors"] = float(self.errors_by_verifier.get(key, 0))
            out[f"verifier/{key}/seconds"] = self.seconds_by_verifier.get(key, 0.0)
        out["verifier/errors"] = float(self.errors)
        return out


class RewardFunction:
    """A reward spec, built once (its verifiers keep their pools and clients between steps) with ``verifier_of``
    (``training.verifiers.registry.get_verifier``: this module sits below the registry, whose walk imports it)."""

    def __init__(self, spec: Sequence[dict], verifier_of: Callable[..., Verifier]):
        if not spec:
            raise ValueError("rewards: the reward spec is empty; give at least one {'name': ..., 'weight': ...}")
        self.terms: list[RewardTerm] = []
        seen: dict[str, int] = {}
        for i, item in enumerate(spec):
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise ValueError(f"rewards[{i}]: must be a mapping with a string 'name'")
            unknown = set(item) - {"name", "weight", "params"}
            if unknown:
                raise ValueError(f"rewards[{i}]: unknown keys {sorted(unknown)}")
            weight = item.get("weight", 1.0)
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
                raise ValueError(f"rewards[{i}].weight: must be a finite number; got {weight!r}")
            params = item.get("params") or {}
            if not isinstance(params, dict):
                raise ValueError(f"rewards[{i}].params: must be a mapping; got {type(params).__name__}")
            try:
                verifier = verifier_of(item["name"], **params)
            except (ValueError, TypeError) as exc:
                raise ValueError(f"rewards[{i}]: {exc}") from exc
            name = item["name"]
            seen[name] = seen.get(name, 0) + 1
            key = name if seen[name] == 1 else f"{name}_{seen[name]}"
            self.terms.append(RewardTerm(key, name, float(weight), dict(params), verifier))

    def __call__(self, completions: Sequence[str], examples: Sequence[dict]) -> RewardBatch:
        n = len(completions)
        totals = [0.0] * n
        failed = [False] * n
        details: list[dict] = [{} for _ in range(n)]
        scores: dict[str, list[float | None]] = {}
        errors_by: dict[str, int] = {}
        seconds_by: dict[str, float] = {}
        for term in self.terms:
            start = time.perf_counter()
            results = score_batch(term.verifier, completions, examples)
            seconds_by[term.key] = time.perf_counter() - start
            column: list[float | None] = []
            for i, res in enumerate(results):
                if isinstance(res, VerifierResult):
                    column.append(res.score)
                    totals[i] += term.weight * res.score
                    details[i][term.key] = res.details
                else:
                    column.append(None)
                    failed[i] = True
                    errors_by[term.key] = errors_by.get(term.key, 0) + 1
                    details[i][term.key] = {"error": str(res)}
            scores[term.key] = column
        return RewardBatch(totals, scores, details, failed, sum(failed), errors_by, seconds_by)
