"""The silent-run guard: a run that cannot learn says so within its first steps instead of "succeeding" with
nothing learnt (docs/architecture.md#early-stopping). Pure Python, fed by a sink (the worker's database sink, the
CLI's files), so every engine's runs are watched the same way.

``SilentRunGuard`` watches the first ``steps`` steps of a run:

- **zero reward**: ``reward/mean`` exactly 0 at every one of them (no sample was ever rewarded): it names the
  verifier's most common reason among the logged samples, e.g. ``math: "no final answer found" in 100 % of the
  logged samples`` — the classic cause is an answer format the verifier does not read;
- **no learning signal**: ``frac_zero_std_groups`` exactly 1 at every one of them (every group's rewards equal,
  so every GRPO advantage is 0): the task is too easy or too hard for the model as prompted.

Each warning is raised once per run, as a dict: ``kind``, ``step`` (where it was raised), ``message`` and, for
zero reward, ``reason`` (the most common verifier reason, with its share). The run's other guard is
:mod:`training.reward_hacking`; the sweep's health rules (entropy collapse, reward drop) are another thing,
``webapp/sweeps/policies/``.
"""
from __future__ import annotations

from collections import Counter

ZERO_REWARD = "zero_reward"
NO_SIGNAL = "no_learning_signal"
GUARD_STEPS = 5


def sample_reasons(rows: list[dict]) -> list[str]:
    """Why each logged sample scored what it did, as "<verifier>: <reason>" (a verifier that gives no reason
    is named alone).

    >>> sample_reasons([{"details": {"math": {"reason": "no final answer found"}}}, {"details": {"exact": {}}}])
    ['math: "no final answer found"', 'exact']
    """
    out = []
    for row in rows:
        details = row.get("details") if isinstance(row, dict) else None
        for name, info in (details or {}).items():
            reason = info.get("reason") if isinstance(info, dict) else None
            out.append(f'{name}: "{reason}"' if reason else str(name))
    return out


class SilentRunGuard:
    """Feed it a run's metrics and samples as they are logged; ``warnings()`` returns the new warnings once."""

    def __init__(self, steps: int = GUARD_STEPS):
        self.steps = steps
        self.rewards: dict[int, float] = {}
        self.zero_std: dict[int, float] = {}
        self.reasons: list[str] = []
        self.raised: set[str] = set()

    def on_metrics(self, step: int, metrics: dict) -> None:
        if step <= self.steps:
            if "reward/mean" in metrics:
                self.rewards[step] = metrics["reward/mean"]
            if "frac_zero_std_groups" in metrics:
                self.zero_std[step] = metrics["frac_zero_std_groups"]

    def on_samples(self, step: int, rows: list[dict]) -> None:
        if step <= self.steps:
            self.reasons += sample_reasons(rows)

    def forget_after(self, step: int) -> None:
        """A resumed run's steps after its checkpoint are logged again."""
        self.rewards = {s: v for s, v in self.rewards.items() if s <= step}
        self.zero_std = {s: v for s, v in self.zero_std.items() if s <= step}

    def warnings(self) -> list[dict]:
        """The warnings the first ``steps`` steps justify, each once.

        >>> g = SilentRunGuard(steps=2)
        >>> for s in (1, 2):
        ...     g.on_metrics(s, {"reward/mean": 0.0, "frac_zero_std_groups": 1.0})
        ...     g.on_samples(s, [{"details": {"math": {"reason": "no final answer found"}}}])
        >>> [(w["kind"], w["reason"]) for w in g.warnings()]
        [('zero_reward', 'math: "no final answer found" in 100 % of the logged samples')]
        >>> g.warnings()
        []
        """
        out = []
        full = set(range(1, self.steps + 1))
        if ZERO_REWARD not in self.raised and set(self.rewards) >= full and \
                all(self.rewards[s] == 0 for s in full):
            self.raised.add(ZERO_REWARD)
            reason = ""
            if self.reasons:
                top, n = Counter(self.reasons).most_common(1)[0]
                reason = f"{top} in {100 * n / len(self.reasons):.0f} % of the logged samples"
            out.append({"kind": ZERO_REWARD, "step": self.steps, "reason": reason,
                        "message": f"reward 0 for every sample in the first {self.steps} steps"
                                   + (f"; the verifier says {reason}" if reason else "")
                                   + ": check the answer format the prompt asks for against what the verifier "
                                     "reads (answer_instruction, the verifier's params), and the sample completions"})
        elif NO_SIGNAL not in self.raised and ZERO_REWARD not in self.raised and set(self.zero_std) >= full and \
                all(self.zero_std[s] == 1 for s in full):
            self.raised.add(NO_SIGNAL)
            out.append({"kind": NO_SIGNAL, "step": self.steps, "reason": "",
                        "message": f"every group's rewards were equal in the first {self.steps} steps, so every "
                                   "advantage was 0 and nothing was learnt: the task is too easy or too hard for "
                                   "the model as prompted (see the sample completions)"})
        return out
