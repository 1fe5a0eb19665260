"""The reward-hacking guard (a run's ``reward_hacking_guard``, off by default; docs/architecture.md#early-stopping):
it watches the whole run for a reward earned some other way than by solving the task; its warning may also stop
the run (``guard:reward_hacking``). Pure Python, fed by a sink, as :mod:`training.silent_run` is.

In RLVR the policy searches for whatever the verifier pays for; when that is not the task (a length bonus,
partial credit for a hedge, one answer that fits many prompts), the training reward rises and the model gets
worse. ``RewardHackingGuard`` watches for three signatures, each a small pure rule below:

- **reward up, held-out flat**: over the last ``evals`` periodic evaluations the training reward rose by at
  least ``min_rise`` while the held-out pass@k with the same verifiers gained at most ``eval_tolerance``
  (``eval_trend``); it needs ``eval_every`` > 0;
- **one completion for many prompts**: one completion text (stripped) is at least ``same_completion`` of a
  step's completions (all of them, every generation batch, not only the logged samples), answers at least
  ``min_prompts`` different prompts and is rewarded (``top_completion``);
- **one paid reason**: one verifier's reason is carried by at least ``reason_share`` of a step's completions
  across ``min_prompts`` prompts, counting a completion only when that verifier paid it partial credit
  (0 < score < 1) and said why in ``details["reason"]`` (``top_paid_reason``). A full score's reason
  ("correct") and an unpaid one ("wrong", "no final answer found") say nothing about a loophole, so a healthy
  run's verdicts never count; a verifier paying most of a step for one explanation ("length bonus", a hedged
  answer's credit) is the loophole's signature.

The per-step rules must hold ``for_steps`` steps in a row. One warning per run (kind ``reward_hacking``);
with ``action: stop`` the run's sink also stops the run (``guard:reward_hacking``).
"""
from __future__ import annotations

import dataclasses
import math
from collections import Counter

from training.fields import coerce_keys, range_error

REWARD_HACKING = "reward_hacking"
HACKING_ACTIONS = ("off", "warn", "stop")
HACKING_RULES = ("eval_trend", "same_completion", "paid_reason")


def _knob(default, help: str, **bounds):
    return dataclasses.field(default=default, metadata={"help": help, **bounds})


@dataclasses.dataclass(frozen=True)
class RewardHackingParams:
    """The ``reward_hacking_guard`` config: every key has a default and bounds."""

    action: str = _knob("warn", "off, warn (a warning on the run and its sweep) or stop (also stop the run)")
    rules: list = dataclasses.field(default_factory=lambda: list(HACKING_RULES),
                                    metadata={"help": "which rules watch: eval_trend, same_completion, paid_reason"})
    evals: int = _knob(3, "periodic evaluations the trend rule compares, first to last", min=2, max=100)
    min_rise: float = _knob(0.1, "training reward rise over those evaluations that counts as rising",
                            gt=0.0, max=1000.0)
    eval_tolerance: float = _knob(0.02, "held-out pass@k gain over them still counted as flat", min=0.0, max=1.0)
    same_completion: float = _knob(0.5, "share of a step's completions one completion text must reach to fire",
                                   gt=0.0, max=1.0)
    reason_share: float = _knob(0.8, "share of a step's completions one paid verifier reason must reach to fire",
                                gt=0.0, max=1.0)
    min_prompts: int = _knob(3, "different prompts the repeated text or reason must span", min=1, max=100_000)
    for_steps: int = _knob(2, "steps in a row the per-step rules must hold", min=1, max=10_000)

    @classmethod
    def parse(cls, value) -> "RewardHackingParams | None":
        """The guard's params from the config value (``{}``: off, None returned), or ValueError naming the key.

        >>> RewardHackingParams.parse({}), RewardHackingParams.parse({"action": "stop"}).action
        (None, 'stop')
        >>> RewardHackingParams.parse({"evals": 1})
        Traceback (most recent call last):
        ...
        ValueError: evals: must be in [2, 100]; got 1
        """
        if not isinstance(value, dict):
            raise ValueError(f"must be a mapping such as {{\"action\": \"warn\"}}; got {type(value).__name__}")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values, errors = coerce_keys(fields, value, "unknown key {key!r}; allowed: {allowed}")
        for key, v in values.items():
            problem = range_error(v, fields[key].metadata)
            if problem:
                errors[key] = problem
        if "action" in values and values["action"] not in HACKING_ACTIONS:
            errors["action"] = f"must be one of {', '.join(HACKING_ACTIONS)}; got {values['action']!r}"
        rules = values.get("rules", HACKING_RULES)
        if "rules" not in errors and (not rules or any(r not in HACKING_RULES for r in rules) or
                                      len(set(rules)) != len(rules)):
            errors["rules"] = f"must be a non-empty list of distinct rules among {', '.join(HACKING_RULES)}; got {rules!r}"[:300]
        if errors:
            raise ValueError("; ".join(f"{k}: {m}" for k, m in errors.items()))
        params = cls(**values)
        return None if not value or params.action == "off" else params


def reward_hacking_error(value, eval_every: int) -> str:
    """"" when ``value`` is a valid ``reward_hacking_guard`` for a run evaluating every ``eval_every`` steps,
    else the field message (the trend rule compares with the periodic evaluation, so asking for the guard
    without one is an error, not a guard that silently never fires).

    >>> reward_hacking_error({"action": "warn"}, 10), reward_hacking_error({}, 0)
    ('', '')
    >>> reward_hacking_error({"action": "warn"}, 0)[:40]
    'needs eval_every > 0 (the held-out evalu'
    """
    try:
        params = RewardHackingParams.parse(value)
    except ValueError as exc:
        return str(exc)
    if params is not None and "eval_trend" in params.rules and not eval_every:
        return ("needs eval_every > 0 (the held-out evaluation it compares the training reward with); got "
                "eval_every=0")
    return ""


def window_means(train: dict[int, float], eval_steps: list[int]) -> list[float | None]:
    """The mean training reward over each evaluation's window: the steps after the previous evaluation up to
    and including its own (from step 1 for the first); None for a window with no logged step.

    >>> window_means({1: 0.0, 2: 0.2, 3: 0.4, 4: 0.6}, [2, 4])
    [0.1, 0.5]
    """
    out, before = [], 0
    for step in eval_steps:
        values = [v for s, v in train.items() if before < s <= step]
        out.append(sum(values) / len(values) if values else None)
        before = step
    return out


def eval_trend(train: dict[int, float], evals: list[tuple[int, float]], n: int, min_rise: float,
               tolerance: float, problems: int = 0) -> dict | None:
    """The trend rule on the last ``n`` evaluations (``evals``: (step, held-out value), in step order): fires
    (a dict of the numbers) when the training reward's window mean rose by at least ``min_rise`` from the first
    of them to the last while the held-out value gained at most ``tolerance``; None otherwise or too early.

    With ``problems`` (the held-out set's size) the held-out values are read as the estimates they are: the gap
    between the training rise and the held-out gain must also exceed two standard errors of that gain,
    ``2 * sqrt(p1 (1 - p1) / P + p2 (1 - p2) / P)`` (each pass@1 a mean over P problems of per-problem accuracies,
    whose variance is at most p (1 - p) / P; the two evaluations taken as independent, which overstates the
    error of the same problems asked twice, so the rule errs towards quiet). A healthy run whose small held-out
    set happened to come out flat then stays quiet; a held-out value stuck at 0 or 1 has no noise to hide behind.

    >>> t = {s: 0.2 + 0.03 * s for s in range(1, 16)}
    >>> r = eval_trend(t, [(5, 0.42), (10, 0.41), (15, 0.40)], 3, 0.1, 0.02)
    >>> round(r["rise"], 2), r["eval_from"], r["eval_to"], r["from_step"], r["to_step"]
    (0.3, 0.42, 0.4, 5, 15)
    >>> eval_trend(t, [(5, 0.42), (10, 0.5), (15, 0.6)], 3, 0.1, 0.02) is None  # held-out rose too
    True
    >>> eval_trend(t, [(5, 0.42), (10, 0.41), (15, 0.40)], 3, 0.1, 0.02, problems=16) is None  # within the noise
    True
    >>> eval_trend(t, [(5, 0.42), (10, 0.41), (15, 0.40)], 3, 0.1, 0.02, problems=400)["se"]
    0.035
    """
    if len(evals) < n:
        return None
    all_steps = [s for s, _ in evals]
    means = window_means(train, all_steps)[-n:]
    last = evals[-n:]
    if means[0] is None or means[-1] is None:
        return None
    rise, gain = means[-1] - means[0], last[-1][1] - last[0][1]
    se = math.sqrt(sum(min(max(v, 0.0), 1.0) * (1 - min(max(v, 0.0), 1.0)) for v in (last[0][1], last[-1][1]))
                   / problems) if problems > 0 else 0.0
    if rise >= min_rise and gain <= tolerance and rise - gain > 2 * se:
        return {"rise": rise, "eval_from": last[0][1], "eval_to": last[-1][1], "from_step": last[0][0],
                "to_step": last[-1][0], "n": n, "se": round(se, 3)}
    return None


def top_completion(texts: list[str], prompts: list[str], rewards: list[float]) -> dict | None:
    """The most common completion text (stripped) of a step: its share of the step's completions, the
    different prompts it answers and its mean reward; None for no completions.

    >>> r = top_completion(["x", "x ", "7", "x"], ["1+1=", "2+2=", "2+2=", "3+3="], [0.5, 0.5, 1.0, 0.5])
    >>> r["text"], r["share"], r["prompts"], r["reward"]
    ('x', 0.75, 3, 0.5)
    """
    if not texts:
        return None
    counts = Counter(t.strip() for t in texts)
    text, n = counts.most_common(1)[0]
    mine = [i for i, t in enumerate(texts) if t.strip() == text]
    return {"text": text, "share": n / len(texts), "prompts": len({prompts[i] for i in mine}),
            "reward": sum(rewards[i] for i in mine) / n, "n": len(texts)}


def top_paid_reason(prompts: list[str], scores: dict[str, list], details: list[dict]) -> dict | None:
    """The verifier reason paid most often in a step: per completion, each verifier that paid it partial credit
    (0 < score < 1) with a non-empty ``details[verifier]["reason"]`` counts that reason once; its share is of
    all the step's completions. None when no completion was paid with a reason.

    >>> r = top_paid_reason(["a", "b", "c", "d"], {"len": [0.5, 0.5, 0.0, 1.0]},
    ...                     [{"len": {"reason": "length bonus"}}, {"len": {"reason": "length bonus"}},
    ...                      {"len": {"reason": "length bonus"}}, {"len": {"reason": "correct"}}])
    >>> r["reason"], r["share"], r["prompts"]
    ('len: "length bonus"', 0.5, 2)
    """
    paid: dict[str, list[int]] = {}
    for name, column in scores.items():
        for i, score in enumerate(column):
            info = details[i].get(name) if i < len(details) else None
            reason = info.get("reason") if isinstance(info, dict) else None
            if score is not None and 0 < score < 1 and isinstance(reason, str) and reason.strip():
                paid.setdefault(f'{name}: "{reason.strip()}"', []).append(i)
    if not paid:
        return None
    reason, rows = max(paid.items(), key=lambda kv: (len(set(kv[1])), kv[0]))
    rows = sorted(set(rows))
    return {"reason": reason, "share": len(rows) / len(prompts), "prompts": len({prompts[i] for i in rows}),
            "n": len(prompts)}


def completion_signals(batches: list[tuple]) -> dict:
    """What the per-step rules read of a step's completions, all of them (every generation batch, each a tuple
    (texts, prompts, rewards, scores by verifier, details)): the top completion and the top paid reason
    (``top_completion``, ``top_paid_reason``).

    >>> s = completion_signals([(["x"], ["1+1="], [0.5], {"v": [0.5]}, [{"v": {"reason": "long"}}]),
    ...                         (["x"], ["2+2="], [0.5], {"v": [0.5]}, [{"v": {"reason": "long"}}])])
    >>> s["completion"]["share"], s["completion"]["prompts"], s["reason"]["reason"]
    (1.0, 2, 'v: "long"')
    """
    texts = [t for b in batches for t in b[0]]
    prompts = [p for b in batches for p in b[1]]
    rewards = [r for b in batches for r in b[2]]
    scores = {name: [s for b in batches for s in b[3][name]] for name in (batches[0][3] if batches else {})}
    details = [d for b in batches for d in b[4]]
    return {"completion": top_completion(texts, prompts, rewards), "reason": top_paid_reason(prompts, scores, details)}


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


class RewardHackingGuard:
    """Feed it a run's metrics (training reward, periodic evaluation) and each step's completion signals
    (``completion_signals``); ``warnings()`` returns the warning once, when one of the rules fires."""

    def __init__(self, params: RewardHackingParams, eval_problems: int = 0):
        self.params = params
        self.eval_problems = eval_problems  # the held-out set's size, for the trend rule's noise (0: unknown)
        self.train: dict[int, float] = {}
        self.evals: dict[int, float] = {}
        self.eval_key = ""
        self.breaches: dict[str, list[int]] = {"completion": [], "reason": []}  # steps each rule held
        self.found: list[tuple[int, str]] = []  # (step, what) of rules that fired, until warnings() reads them
        self.raised = False

    @classmethod
    def from_config(cls, value, eval_problems: int = 0) -> "RewardHackingGuard | None":
        """The guard a run's ``reward_hacking_guard`` asks for, None when off (a config is validated before);
        ``eval_problems``: the run's held-out set size (its ``eval_problems``)."""
        params = RewardHackingParams.parse(value or {})
        return cls(params, eval_problems) if params else None

    @property
    def stops(self) -> bool:
        return self.params.action == "stop"

    def on_metrics(self, step: int, metrics: dict) -> None:
        if "reward/mean" in metrics:
            self.train[step] = metrics["reward/mean"]
        keys = sorted((k for k in metrics if k.startswith("eval/pass@") and k[10:].isdigit()),
                      key=lambda k: int(k[10:]))
        if keys:  # the smallest k: pass@1 is the held-out mean accuracy, the training reward's counterpart
            self.eval_key = self.eval_key or keys[0]
            if self.eval_key in metrics:
                self.evals[step] = metrics[self.eval_key]
                self._check_trend()

    def on_signals(self, step: int, signals: dict) -> None:
        p = self.params
        top = signals.get("completion") if "same_completion" in p.rules else None
        if top and top["share"] >= p.same_completion and top["prompts"] >= p.min_prompts and top["reward"] > 0:
            self._held("completion", step, f'one completion, "{_short(top["text"])}", is {100 * top["share"]:.0f} % '
                                            f'of step {step}\'s {top["n"]} completions, answering {top["prompts"]} '
                                            f'different prompts (rewarded {top["reward"]:.2f} on average)')
        else:
            self.breaches["completion"] = []
        top = signals.get("reason") if "paid_reason" in p.rules else None
        if top and top["share"] >= p.reason_share and top["prompts"] >= p.min_prompts:
            self._held("reason", step, f'the verifier paid partial credit for {_short(top["reason"], 80)} to '
                                       f'{100 * top["share"]:.0f} % of step {step}\'s {top["n"]} completions, '
                                       f'across {top["prompts"]} prompts')
        else:
            self.breaches["reason"] = []

    def _held(self, rule: str, step: int, what: str) -> None:
        run = self.breaches[rule]
        run[:] = [*run, step] if run and run[-1] == step - 1 else [step]
        if len(run) >= self.params.for_steps:
            suffix = f" ({len(run)} steps in a row)" if self.params.for_steps > 1 else ""
            self.found.append((step, what + suffix))

    def _check_trend(self) -> None:
        p = self.params
        if "eval_trend" not in p.rules:
            return
        hit = eval_trend(self.train, sorted(self.evals.items()), p.evals, p.min_rise, p.eval_tolerance,
                         self.eval_problems)
        if hit:
            numbers = f"{hit['eval_from']:.2f} → {hit['eval_to']:.2f}"
            went = f"fell {numbers}" if hit["eval_to"] < hit["eval_from"] else f"stayed flat ({numbers})"
            if hit["se"]:
                went += f", a change of {hit['eval_to'] - hit['eval_from']:+.2f} ± {2 * hit['se']:.2f} (2 SE)"
            self.found.append((hit["to_step"], f"train reward {hit['rise']:+.2f} over the last {hit['n']} evals "
                                               f"(steps {hit['from_step']}–{hit['to_step']}) while held-out "
                                               f"{self.eval_key} {went}"))

    def forget_after(self, step: int) -> None:
        """A resumed run's steps after its checkpoint are logged again."""
        self.train = {s: v for s, v in self.train.items() if s <= step}
        self.evals = {s: v for s, v in self.evals.items() if s <= step}
        self.breaches = {k: [s for s in v if s <= step] for k, v in self.breaches.items()}
        self.found = [(s, w) for s, w in self.found if s <= step]

    def warnings(self) -> list[dict]:
        """The warning, once, when a rule fired: kind, step, message (the numbers), reason (the rules' words)
        and whether it stops the run."""
        if self.raised or not self.found:
            self.found = [] if self.raised else self.found
            return []
        self.raised = True
        step = max(s for s, _ in self.found)
        seen = list(dict.fromkeys(w for _, w in self.found))
        self.found = []
        reason = "; ".join(seen)
        action = (" — the run is stopped (guard:reward_hacking)" if self.stops else "")
        return [{"kind": REWARD_HACKING, "step": step, "reason": reason, "stop": self.stops,
                 "message": f"reward hacking? {reason}: the policy may be exploiting the verifier rather than "
                            f"solving the task (see the sample completions){action}"}]
