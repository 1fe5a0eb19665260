"""Verifiers: ``(completion, example) -> VerifierResult(score, details)``, registered by name (docs/architecture.md#verifiers).

Built in: ``exact``, ``regex``, ``math`` (math-verify in worker processes), ``code`` (a sandbox), ``ifeval``
(instruction constraints), ``judge`` (a generative reward model). Users add their own with
:func:`register_verifier` or by dotted path ``"pkg.mod:fn"``. A verifier that cannot judge raises
:class:`VerifierError` — never a silent 0. :func:`combine_rewards` scores a batch with a weighted reward spec.
"""
from training.verifiers.base import Verifier, VerifierError, VerifierResult, register_verifier
from training.verifiers.hybrid import RewardBatch, RewardFunction, score_batch
from training.verifiers.registry import build_reward, check_reward_spec, combine_rewards, get_verifier, registered_names

__all__ = [
    "Verifier", "VerifierError", "VerifierResult", "check_reward_spec", "get_verifier", "register_verifier", "registered_names",
    "RewardBatch", "RewardFunction", "build_reward", "combine_rewards", "score_batch",
]
