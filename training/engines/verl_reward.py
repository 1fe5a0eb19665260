"""verl's custom reward function for Seedbed runs (``reward.custom_reward_function`` in ``training.engines.verl``):
a completion scored by the run's Seedbed reward spec with Seedbed's own verifiers (``training.verifiers``), from
the example and the spec Seedbed wrote into the row's ``extra_info`` (``training.engines.verl.verl_rows``).

This is operator code Seedbed ships, named by the verl engine, never by a run's config. verl's reward workers load
the file by path, so it puts Seedbed's folder on ``sys.path`` itself; the python that runs verl needs Seedbed's
verifier dependencies. A verifier that cannot judge raises: verl cannot leave an unjudged completion out of the
batch, and a 0 would be a wrong reward.
"""
from __future__ import annotations

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **_verl_kwargs) -> dict:
    """verl's reward signature; returns {"score": weighted sum, "reward/<verifier>": its score, ...} (verl logs
    the other keys as reward extra info).

    >>> info = {"example": json.dumps({"prompt": "1+1=", "answer": "2"}),
    ...         "rewards": json.dumps([{"name": "exact", "weight": 0.5}])}
    >>> compute_score("seedbed", "2", "2", info), compute_score("seedbed", "3", "2", info)
    ({'score': 0.5, 'reward/exact': 1.0}, {'score': 0.0, 'reward/exact': 0.0})
    """
    from training.verifiers import VerifierError, build_reward

    example, spec = json.loads(extra_info["example"]), json.loads(extra_info["rewards"])
    batch = build_reward(spec)([solution_str], [example])
    if batch.failed[0]:
        raise VerifierError(f"a verifier could not judge the completion: {json.dumps(batch.details[0])[:2000]}")
    return {"score": batch.totals[0], **{f"reward/{key}": column[0] for key, column in batch.scores.items()}}
