"""The ``math`` verifier: final-answer extraction plus math-verify, run in worker processes
(docs/architecture.md#verifiers).

Two modes (``mode``). **strict** (the default, for training: format is part of the reward) reads the answer
in the form the run's prompt asks for; **lenient** hands the whole completion to Math-Verify's own extraction
(the last mathematical expression, after its "final answer is" / box / "Answer:" priorities), as TRL's and
open-r1's rewards read it: what pass@k of a base model needs.

Extraction, strict (in the trusted parent, cheap): :mod:`training.verifiers.math_extract` (the answer forms,
hedges, too many boxes, too long an answer, checker tampering). An answer whose parsing or comparison times out
scores 0 (reason "answer timed out"); a gold that times out is a :class:`VerifierError`.

Checking, fast: when gold and answer both fall in the small grammar of :mod:`math_fastpath` (integers,
decimals, fractions, percentages, simple radicals, ``x = v``), the parent decides exactly in microseconds,
and only where that module's rules give math-verify's own verdict; anything else, or too close to call, goes
to math-verify.

Checking, general: :mod:`training.verifiers.math_equivalence` (``math_verify.verify(parse(gold),
parse(answer))``, on a worker process's main thread, where its SIGALRM timeout works), in a :class:`WorkerPool`
under an outer deadline that kills a stuck worker. Pairs travel in chunks (one message per chunk, not per pair);
a worker stops starting new pairs once a chunk has used its time budget, and a chunk that times out is retried
one pair per task so only the stuck pair fails. Math-verify's own timeout on the answer is a 0 (the answer's
fault); on the gold, the outer deadline, or a dead worker it raises :class:`VerifierError`: the verifier could
not judge.

Agreement with Math-Verify 0.9.0 (``tests/verifiers/test_math_peer.py``): never a 1 where it gives 0; a 0 where
it gives 1 only for the :data:`INTENTIONAL_DIFFERENCES` (listed in :class:`MathVerifier`'s docstring and the
README).
"""
from __future__ import annotations

import hashlib
import math
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass

from training.verifiers.answers import find_boxed
from training.verifiers.base import Param, VerifierError, VerifierResult, register_verifier
from training.verifiers.math_equivalence import (READ_AS, check_chunk_in_worker, check_in_worker, gold_input,
                                                 parse_input, verify_any)
from training.verifiers.math_extract import (UNCERTAIN, EXTRACT, MAX_ANSWER_CHARS, MAX_BOXES, TEX_PROGRAMMING,
                                             text_hedge, extract_answer)
from training.verifiers.math_fastpath import decide, parse_fast
from training.verifiers.workers import TaskFailed, TaskTimeout, WorkerPool

# (re-exported: the verifier's public names, as callers and tests import them from here)
__all__ = ["EXTRACT", "INTENTIONAL_DIFFERENCES", "MAX_ANSWER_CHARS", "MAX_BOXES", "MODES", "READ_AS",
           "TEX_PROGRAMMING", "IntentionalDifference", "MathVerifier", "text_hedge", "check_chunk_in_worker",
           "check_in_worker", "extract_answer", "find_boxed", "gold_input", "intentional_difference",
           "parse_input", "verify_any"]

MAX_CHUNK = 16  # pairs per pool message: one round trip per chunk instead of per pair
# Plain-text answers that Math-Verify reads after "Answer:" exactly as the fast path reads them (an integer,
# comma-grouped or not, a decimal, a percentage, a/b), closing punctuation allowed ("12."), but not after a/b:
# Math-Verify reads "19/7." as 19/7.0, a float.
_FAST_TEXT = re.compile(r"-?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?%?|\.\d+%?)[.;!]?|-?\d+/\d+[;!]?")

# How the answer is found. strict: in the form the prompt asked for (a box or an answer marker by default), so
# format is part of the reward; lenient: the last mathematical expression anywhere, as Math-Verify finds it.
MODES = ("strict", "lenient")
MODE_HELP = ("strict (default, for training): the answer must be boxed or follow an 'Answer:' marker, prose "
             "scores 0; lenient: the last mathematical expression in the text, as Math-Verify reads it "
             "(pass@k of a base model)")
# The parameters that choose the answer form: mode strict only (a config setting them with mode lenient is told)
STRICT_ONLY_DEFAULTS = {"extract": "boxed", "fallback": "answer_line", "multiple_boxed": "last"}


@dataclass(frozen=True)
class IntentionalDifference:
    """A verdict where this verifier knowingly differs from Math-Verify's ``verify(parse(gold), parse(text))``:
    always a 0 where Math-Verify gives 1 (never the other way), recognised by the ``details["reason"]`` the
    verifier gives, in the modes listed."""

    reason: str
    modes: tuple[str, ...]
    why: str


# The reason a hedge of each kind (math_extract.text_hedge) scores 0 with
HEDGE_REASONS = {"uncertain": "hedged answer", "alternative": "hedged answer", "set": "hedged answer",
                 "several": "answer is a list, range or bound"}
KEPT_CANDIDATE_WRONG = "kept candidate not equivalent to the gold answer"

# The one list of intentional differences from Math-Verify 0.9.0; the differential tests fail on any other.
INTENTIONAL_DIFFERENCES = (
    IntentionalDifference(
        "no final answer found", ("strict",),
        "Mode strict makes the format part of the reward: an answer given only in prose (no box, no answer "
        "marker, or not in the form extract asks for) scores 0, where Math-Verify reads the last number or "
        "expression anywhere in the text. Mode lenient reads it as Math-Verify does."),
    IntentionalDifference(
        "hedged answer", ("strict",),
        "An answer that hedges scores 0 wherever it is written: different candidates joined by \"or\" in any "
        "language (\"3 or 4\", \"$3$ or $4$\", \"\\boxed{3} or 4\", \"5 o 6\"), a \"/\" between two separate "
        "math spans (\"$3$/$4$\"), an uncertain word (\"maybe\", \"probably\", \"3?\"), or a second value "
        "offered after the answer in its sentence (\"$5$ (though $6$ is also plausible)\", \"3 (i.e. $4$)\", "
        "\"$\\boxed{32}$, or maybe $\\boxed{64}$\"), unless the candidates are one set Math-Verify reads whole and "
        "the gold is that set (\"$x = -3$ or $x = 2$\" for the gold -3, 2): Math-Verify takes the first value "
        "of a prose list, of a \"/\" or of \"or\" in some LaTeX forms and ignores what follows the answer, "
        "so listing candidates would be rewarded."),
    IntentionalDifference(
        "answer is a list, range or bound", ("strict",),
        "An answer that gives several values scores 0 unless the gold is several values too (a set, tuple, "
        "interval or inequality) and Math-Verify finds them equal: a list of candidates (\"3, 4, 5, 6\"), a "
        "range (\"between 3 and 5\", \"3 to 5\") or a bound (\"at least 3\", \"\\geq 3\", \"3 or more\"). "
        "Math-Verify reads the first value of a prose list, range or bound, so listing candidates, or bounding "
        "the answer instead of giving it, would be rewarded."),
    IntentionalDifference(
        KEPT_CANDIDATE_WRONG, ("strict",),
        "An answer that names candidates and keeps one of them in the same sentence (\"$x = 3$ or $x = -3$, but "
        "since $x$ is a side length, $x = 3$\") is the one it keeps, not a hedge (a rejected root): it scores 1 "
        "only where Math-Verify's reading of that sentence finds the gold too, and 0 where the kept value is not "
        "the gold, even where Math-Verify reads the candidates as a set equal to it."),
    IntentionalDifference(
        "several different boxed answers", ("strict",),
        "Only with multiple_boxed=reject: a completion that boxes different answers apart from its final one "
        "scores 0, where Math-Verify reads the last."),
    IntentionalDifference(
        "too many different boxed answers", ("strict",),
        f"A completion holding more than {MAX_BOXES} different boxed answers scores 0 (a spray of candidates), "
        f"where Math-Verify reads the last box or group of boxes."),
    IntentionalDifference(
        "checker tampering", ("strict",),
        "An answer holding TeX programming (\\def, \\newcommand, \\let, \\iffalse, a macro parameter # or a % "
        "comment before a line break) scores 0: no answer needs it, and it makes the checker read something other "
        "than what is written (\\boxed{4 # 3} is 3 to Math-Verify)."),
    IntentionalDifference(
        "answer too long", ("strict",),
        f"An answer over {MAX_ANSWER_CHARS} characters scores 0 unread (no final answer is that long; reading "
        f"one costs the parser seconds), where Math-Verify reads it, or times out."),
)


def intentional_differences_doc() -> str:
    """The list above as reStructuredText bullets (the verifier's docstring and the README carry it)."""
    return "\n".join(f"* ``{d.reason}`` (mode {', '.join(d.modes)}): {d.why}" for d in INTENTIONAL_DIFFERENCES)


def intentional_difference(details: dict, mode: str) -> IntentionalDifference | None:
    """The listed difference a verdict's ``details`` show in ``mode``, or None."""
    return next((d for d in INTENTIONAL_DIFFERENCES if d.reason == details.get("reason") and mode in d.modes), None)


def _keys(info: dict) -> list[tuple[str, str, str]]:
    """The (gold, answer, read_as) checks an answer needs: its own, and for a kept candidate its sentence as
    Math-Verify reads it (``guard``)."""
    keys = [(info["gold"], info["checked"], info["read_as"])]
    if info.get("guard"):
        keys.append((info["gold"], info["guard"], "completion"))
    return keys


def _cache_key(key: tuple[str, str, str]) -> tuple:
    """The result cache's key for a (gold, answer, read_as) check: a long answer (mode lenient checks whole
    completions) by its digest, so a full cache holds bounded memory."""
    gold, answer, read_as = key
    return key if len(answer) <= 256 else (gold, hashlib.sha256(answer.encode()).digest(), read_as)


_POOLS: dict[tuple, WorkerPool] = {}
_POOLS_LOCK = threading.Lock()


def shared_pool(processes: int, deadline_s: float) -> WorkerPool:
    """One pool per (processes, deadline) in this process, shared by every math verifier built."""
    key = (processes, float(deadline_s))
    with _POOLS_LOCK:
        if key not in _POOLS:
            _POOLS[key] = WorkerPool("training.verifiers.math_equivalence:check_chunk_in_worker",
                                     processes=processes, deadline_s=deadline_s)
        return _POOLS[key]


@register_verifier("math")
class MathVerifier:
    """Score 1.0 when the completion's final answer is mathematically equal to ``example[answer_key]``.

    >>> v = MathVerifier(processes=1)
    >>> v(r"Half of it: \\boxed{\\dfrac{1}{2}}", {"answer": "0.5"}).score
    1.0
    >>> v(r"\\boxed{3 \\text{ or } 4}", {"answer": "3"}).details["reason"]
    'hedged answer'
    >>> MathVerifier(processes=1, extract="hash")("2 + 3 = 5\\n#### 5", {"answer": "5"}).details["method"]
    'hash'
    >>> prose = "Adding them gives 12 apples."
    >>> v(prose, {"answer": "12"}).score, MathVerifier(processes=1, mode="lenient")(prose, {"answer": "12"}).score
    (0.0, 1.0)

    Intentional differences from Math-Verify 0.9.0 (:data:`INTENTIONAL_DIFFERENCES`; each a 0 where it gives 1):

    """

    # What a reward spec may set, with bounds (checked at submit time; base.Param).
    PARAMS = {"mode": Param(str, choices=MODES, help=MODE_HELP),
              "answer_key": Param(str, max_len=100), "extract": Param(str, choices=tuple(EXTRACT)),
              "fallback": Param(str, choices=("answer_line", "none")),
              "multiple_boxed": Param(str, choices=("last", "reject")), "processes": Param(int, 1, 32),
              "deadline_s": Param(float, 1, 600), "timeout_s": Param(int, 1, 300), "float_rounding": Param(int, 0, 15),
              "cache_size": Param(int, 0, 1_000_000)}

    @staticmethod
    def check_params(*, timeout_s: int = 3, deadline_s: float = 10.0, mode: str = "strict", **params) -> str:
        """What is wrong with these parameters together ("" when nothing), at submit time."""
        if deadline_s <= timeout_s:
            return f"math: deadline_s must exceed timeout_s; got timeout_s={timeout_s}, deadline_s={deadline_s}"
        strict_only = sorted(set(params) & set(STRICT_ONLY_DEFAULTS))
        strict_only = [k for k in strict_only if params[k] != STRICT_ONLY_DEFAULTS[k]]
        if mode == "lenient" and strict_only:
            return (f"math: {', '.join(strict_only)} apply to mode 'strict' only (mode 'lenient' reads the answer "
                    f"as Math-Verify does); drop them or use mode 'strict'")
        return ""

    def __init__(self, *, mode: str = "strict", answer_key: str = "answer", extract: str = "boxed",
                 fallback: str = "answer_line", multiple_boxed: str = "last", processes: int = 2,
                 deadline_s: float = 10.0, timeout_s: int = 3, float_rounding: int = 6, cache_size: int = 100_000):
        if mode not in MODES:
            raise ValueError(f"math: mode must be one of {', '.join(MODES)}; got {mode!r}")
        if extract not in EXTRACT:
            raise ValueError(f"math: extract must be one of {', '.join(EXTRACT)}; got {extract!r}")
        if fallback not in ("answer_line", "none"):
            raise ValueError(f"math: fallback must be 'answer_line' or 'none'; got {fallback!r}")
        if multiple_boxed not in ("last", "reject"):
            raise ValueError(f"math: multiple_boxed must be 'last' or 'reject'; got {multiple_boxed!r}")
        if timeout_s < 1 or deadline_s <= timeout_s:
            raise ValueError(f"math: need 1 <= timeout_s < deadline_s; got timeout_s={timeout_s}, "
                             f"deadline_s={deadline_s}")
        self.mode, self.answer_key, self.extract = mode, answer_key, extract
        self.fallback, self.multiple_boxed = fallback, multiple_boxed
        self.timeout_s, self.float_rounding = int(timeout_s), float_rounding
        self.pool = shared_pool(processes, deadline_s)
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple, dict] = OrderedDict()

    def __call__(self, completion: str, example: dict) -> VerifierResult:
        result = self.batch([completion], [example])[0]
        if isinstance(result, VerifierError):
            raise result
        return result

    def _gold(self, example: dict) -> str:
        if self.answer_key not in example or example[self.answer_key] is None:
            raise VerifierError(f"math: example has no field {self.answer_key!r}")
        return str(example[self.answer_key])

    def batch(self, completions: list[str], examples: list[dict]) -> list:
        out: list = [None] * len(completions)
        todo: dict[tuple, list[int]] = {}
        infos = []
        for i, (completion, example) in enumerate(zip(completions, examples)):
            info = self._extract(completion)
            infos.append(info)
            try:
                gold = self._gold(example)
            except VerifierError as exc:
                out[i] = exc
                continue
            info["gold"] = gold
            out[i] = self._decide_here(gold, info)
            if out[i] is None:
                for key in _keys(info):
                    todo.setdefault(key, []).append(i)
        replies = self._replies(list(todo))
        for i, info in enumerate(infos):
            if out[i] is None:
                main, *guard = _keys(info)
                out[i] = self._result(info, *replies[main])
                if guard:
                    out[i] = self._guarded(info, out[i], replies[guard[0]][0])
        return out

    def _decide_here(self, gold: str, info: dict) -> VerifierResult | None:
        """The verdict without math-verify, or None: no answer, a hedge, or the fast path's exact verdict."""
        hedge = info.get("hedge")
        if hedge == "uncertain" and UNCERTAIN.search(gold):
            hedge = info["hedge"] = None  # the gold itself is phrased that way
        if info["answer"] is None:
            return VerifierResult(0.0, info)
        if hedge in ("uncertain", "alternative") or (hedge in ("set", "several") and parse_fast(gold) is not None):
            # (a gold the fast grammar reads is one value: candidates, a list, a range or a bound are no set of it)
            info["reason"] = HEDGE_REASONS[hedge]
            return VerifierResult(0.0, info)
        if info.get("guard"):
            return None  # a kept candidate: math-verify reads the sentence too
        return self._fast(gold, info)

    def _replies(self, keys: list[tuple[str, str, str]]) -> dict[tuple, tuple]:
        """``key -> (reply, cached)`` for each (gold, answer, read_as) key: from the cache, else math-verify."""
        replies, missing = {}, []
        for key in keys:
            if _cache_key(key) in self._cache:
                self._cache.move_to_end(_cache_key(key))
                replies[key] = (self._cache[_cache_key(key)], True)
            else:
                missing.append(key)
        for key, reply in (self._check_in_pool(missing) if missing else {}).items():
            if isinstance(reply, dict) and reply.get("status") == "ok" and self.cache_size:
                self._cache[_cache_key(key)] = reply
                if len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
            replies[key] = (reply, False)
        return replies

    def _guarded(self, info: dict, result, guard_reply):
        """A kept candidate's verdict (``result``: the kept value against the gold) with Math-Verify's reading of
        its whole sentence (``guard_reply``): 1 only where both find the gold; a 0 from the kept value where the
        sentence's reading finds it (Math-Verify read the candidates as a set, or another of them) carries the
        listed reason."""
        if isinstance(result, VerifierError):
            return result
        if not isinstance(guard_reply, dict) or guard_reply.get("status") != "ok":
            return self._result(info, guard_reply, cached=False)  # the errors it stands for
        if result.score == 1.0 and not guard_reply["correct"]:
            return VerifierResult(0.0, dict(result.details, reason="not equivalent to the gold answer",
                                            guard_parsed=guard_reply.get("answer_parsed")))
        if result.score == 0.0 and guard_reply["correct"]:
            return VerifierResult(0.0, dict(result.details, reason=KEPT_CANDIDATE_WRONG,
                                            guard_parsed=guard_reply.get("answer_parsed")))
        return result

    def _extract(self, completion: str) -> dict:
        """The answer to check: in mode strict the one :func:`extract_answer` finds (None when the completion
        gives none in the asked form); in mode lenient the whole completion, for Math-Verify to find its last
        mathematical expression."""
        if self.mode == "lenient":
            return {"answer": completion if completion.strip() else None, "checked": completion,
                    "method": "lenient", "n_boxed": len(find_boxed(completion)), "read_as": "completion",
                    "parts": 1, "hedge": None,
                    "reason": None if completion.strip() else "no final answer found"}
        return extract_answer(completion, self.fallback, self.multiple_boxed, self.extract)

    def _fast(self, gold: str, info: dict) -> VerifierResult | None:
        """The in-process verdict when both sides are in the fast grammar and it is certain, else None (always
        for a whole completion, mode lenient, and for an answer of several boxes: math-verify reads those)."""
        if (info["read_as"] == "completion" or info["parts"] > 1
                or (info["method"] == "boxed" and ", " in info["answer"])):
            return None
        if info["read_as"] == "text" and not (_FAST_TEXT.fullmatch(info["checked"]) and info["checked"].isascii()):
            return None  # e.g. "3{,}000" or "\\sqrt{2}" outside $…$: Math-Verify reads those its own way
        gold_parsed = parse_fast(gold)  # lru-cached: a group's G completions share one gold
        if gold_parsed is None:
            return None
        answer_parsed = parse_fast(info["answer"])
        if answer_parsed is None:
            return None
        correct = decide(gold_parsed, answer_parsed, self.float_rounding)
        if correct is None:
            return None
        return VerifierResult(1.0 if correct else 0.0, dict(
            info, gold_parsed=str(gold_parsed), answer_parsed=str(answer_parsed),
            reason=None if correct else "not equivalent to the gold answer", cached=False, fast_path=True))

    def _check_in_pool(self, keys: list[tuple[str, str, str]]) -> dict[tuple, object]:
        """math-verify on every (gold, answer, read_as) key, in chunks; a reply dict or TaskTimeout/TaskFailed per key.

        Chunks of up to ``MAX_CHUNK`` keys, about 4 per worker so the workers stay evenly loaded. Keys a
        worker did not reach within its budget go round again; the keys of a chunk that timed out or whose
        worker died are retried one per task, so only the item that is really stuck gets the error.
        """
        budget_s = max(0.05, self.pool.deadline_s - 3 * self.timeout_s - 0.5)
        replies: dict[tuple, object] = {}
        # Keys sharing a gold travel together, so a worker parses that gold once (check_in_worker caches it).
        first_seen = {key[0]: i for i, key in reversed(list(enumerate(keys)))}
        keys = sorted(keys, key=lambda key: first_seen[key[0]])
        size = max(1, min(MAX_CHUNK, math.ceil(len(keys) / (4 * self.pool.processes))))
        pending = [keys[i:i + size] for i in range(0, len(keys), size)]
        while pending:
            chunk_replies = self.pool.map([(chunk, self.float_rounding, self.timeout_s, budget_s)
                                           for chunk in pending])
            retry: list[list[tuple]] = []
            for chunk, chunk_reply in zip(pending, chunk_replies):
                if isinstance(chunk_reply, (TaskTimeout, TaskFailed)):
                    # One stuck or crashing pair took the chunk down: isolate it. A pool whose workers cannot
                    # start at all fails every key now rather than waiting for start-up once per key.
                    isolate = isinstance(chunk_reply, TaskTimeout) or str(chunk_reply).startswith("worker died")
                    if len(chunk) > 1 and isolate:
                        retry.extend([key] for key in chunk)
                    else:
                        replies.update((key, chunk_reply) for key in chunk)
                    continue
                not_reached = [key for key, reply in zip(chunk, chunk_reply) if reply is None]
                replies.update((key, reply) for key, reply in zip(chunk, chunk_reply) if reply is not None)
                if not_reached:
                    retry.append(not_reached)
            pending = retry
        return replies

    @staticmethod
    def _result(info: dict, reply, cached: bool):
        if isinstance(reply, TaskTimeout):
            return VerifierError(f"math: check timed out ({reply}) for answer {info['answer'][-200:]!r}")
        if isinstance(reply, TaskFailed):
            return VerifierError(f"math: worker failed: {reply}")
        if reply["status"] == "timeout":
            return VerifierError(f"math: math-verify timed out while {reply['where']} "
                                 f"(answer {info['answer'][-200:]!r})")
        if reply["status"] == "bad_gold":
            return VerifierError(f"math: cannot parse gold answer {info['gold'][:200]!r}: {reply['error']}")
        details = dict(info, gold_parsed=reply["gold_parsed"], answer_parsed=reply["answer_parsed"],
                       reason=reply["why"], cached=cached, fast_path=False)
        if info["read_as"] == "completion":  # mode lenient: the answer is what math-verify found, not the text
            details["answer"] = reply.get("answer_text", reply["answer_parsed"])
        if reply.get("timed_out"):
            details["timed_out"] = reply["timed_out"]
        correct = reply["correct"]
        if info.get("hedge") in ("set", "several") and not (correct and reply.get("gold_multi")):
            # candidates joined by "or", a list, a range or a bound count only as the several values the gold is
            correct, details["reason"] = False, HEDGE_REASONS[info["hedge"]]
        return VerifierResult(1.0 if correct else 0.0, details)


# the docstring carries the list itself, rendered from the one structure above
MathVerifier.__doc__ = (MathVerifier.__doc__.rstrip() + "\n\n"
                        + "\n".join("    " + line for line in intentional_differences_doc().splitlines()) + "\n")
