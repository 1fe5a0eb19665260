"""The ``math`` verifier: final-answer extraction plus math-verify, run in worker processes.

Extraction (in the trusted parent, cheap), in the form the run's prompt asks for (``extract``; the forms are
:mod:`training.verifiers.answers`, shared with ``reasoning_gym``): ``boxed`` (the default) takes the content of
the completion's last ``\\boxed{...}`` (or ``\\fbox{...}``), with braces matched, and when there is none the
configurable fallback (default: the last "Answer: ..." / "Final answer: ..." line); ``answer_tag`` the last
``<answer>...</answer>``; ``hash`` the text after the last ``####`` (GSM8K); ``last_number`` the last number;
``auto`` tries boxed, then an answer tag, then ``####``, then the fallback. ``details["method"]`` names the form
that matched. A hedged answer ("3 or 4", "maybe 3") scores 0 unless the gold answer itself is phrased that way;
no answer scores 0.

Checking, fast: when gold and answer both fall in the small grammar of :mod:`math_fastpath` (integers,
decimals, fractions, percentages, simple radicals, ``x = v``), the parent decides exactly in microseconds,
and only where that module's rules give math-verify's own verdict; anything else, or too close to call, goes
to math-verify.

Checking, general: ``math_verify.verify(parse(gold), parse(answer))``, gold first (math-verify's relation
is not symmetric: a gold set accepts an unordered list, a gold interval fixes its bounds). math-verify times
out with SIGALRM, which only works on a process's main thread, so checks run in a :class:`WorkerPool` whose
workers do exactly that, under an outer deadline that kills a stuck worker. Pairs travel in chunks (one
message per chunk, not per pair); a worker stops starting new pairs once a chunk has used its time budget,
and a chunk that times out is retried one pair per task so only the stuck pair fails. A timeout
(math-verify's own or the outer one) or a dead worker raises :class:`VerifierError`: the verifier could not
judge.
"""
from __future__ import annotations

import functools
import math
import re
import threading
import time
from collections import OrderedDict

from training.verifiers.answers import extract as extract_form
from training.verifiers.answers import find_boxed
from training.verifiers.base import Param, VerifierError, VerifierResult, register_verifier
from training.verifiers.math_fastpath import decide, parse_fast
from training.verifiers.workers import TaskFailed, TaskTimeout, WorkerPool

MAX_CHUNK = 16  # pairs per pool message: one round trip per chunk instead of per pair

_HEDGE = re.compile(r"\bor\b|\\lor\b|\beither\b|\bmaybe\b|\bpossibly\b|\bprobably\b|\bperhaps\b|\?")
# extract -> the answer forms tried in order (the first that gives an answer wins); "boxed" and "auto" end with
# the fallback (the "Answer:" line unless fallback is "none"), the others are exactly the form the prompt asked for
EXTRACT = {"boxed": ("boxed",), "answer_tag": ("answer_tag",), "hash": ("hash",), "last_number": ("last_number",),
           "auto": ("boxed", "answer_tag", "hash")}


def _tidy(answer: str) -> str:
    """A line's answer without its trailing full stop and dollar signs: "$12$." -> "12"."""
    return answer.strip().rstrip(".").strip("$ ").strip()


def extract_answer(completion: str, fallback: str = "answer_line", multiple_boxed: str = "last",
                   extract: str = "boxed") -> dict:
    """Pick the final answer. Returns {"answer": str|None, "method": ..., "n_boxed": int, "reason": ...};
    ``method`` is the form that gave it (boxed, answer_tag, hash, last_number, answer_line).

    >>> extract_answer(r"I think \\boxed{3}. Wait, \\boxed{4}.")["answer"]
    '4'
    >>> extract_answer("Work...\\nAnswer: $12$.")["answer"], extract_answer("no idea")["answer"]
    ('12', None)
    >>> text = "<answer>3</answer> so #### 1,234"
    >>> [extract_answer(text, extract=e)["answer"] for e in ("hash", "auto", "last_number")]
    ['1,234', '3', '1234']
    """
    boxed = find_boxed(completion)
    info = {"answer": None, "method": None, "n_boxed": len(boxed), "reason": None}
    forms = EXTRACT[extract] + (("answer_line",) if extract in ("boxed", "auto") and fallback == "answer_line" else ())
    for form in forms:
        if form == "boxed":
            if not boxed:
                continue
            if multiple_boxed == "reject" and len(set(boxed)) > 1:
                info["reason"] = "several different boxed answers"
                return info
            info["answer"], info["method"] = boxed[-1], "boxed"  # an empty box ends the search: no answer
            break
        answer = extract_form(completion, form)
        if answer is not None:
            info["answer"], info["method"] = _tidy(answer), form
            break
    if not info["answer"]:
        info["answer"] = None
        info["reason"] = info["reason"] or "no final answer found"
    return info


# ---- runs in the worker processes -------------------------------------------------------------------

def _as_latex(text: str) -> str:
    return text if ("$" in text or "\\boxed" in text) else f"${text}$"


@functools.lru_cache(maxsize=4096)
def _parse_gold(gold: str, timeout_s: int):
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse
    return parse(_as_latex(gold), [LatexExtractionConfig(), ExprExtractionConfig()],
                 parsing_timeout=timeout_s, raise_on_error=True)


def _is_nan_or_zoo(obj) -> bool:
    from sympy import Basic, nan, zoo
    return isinstance(obj, Basic) and (obj == nan or obj == zoo)


def check_in_worker(gold: str, answer: str, float_rounding: int, timeout_s: int,
                    same_text_shortcut: bool = True) -> dict:
    """math-verify on this process's main thread. Returns {"status": ok|timeout|bad_gold, ...}."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
    from math_verify.errors import TimeoutException

    start = time.perf_counter()
    try:
        gold_parsed = _parse_gold(gold, timeout_s)
    except TimeoutException:
        return {"status": "timeout", "where": "parsing the gold answer"}
    except Exception as exc:  # the gold is data we were given: not parseable means we cannot judge
        return {"status": "bad_gold", "error": f"{type(exc).__name__}: {exc}"}
    if not gold_parsed:
        return {"status": "bad_gold", "error": "math-verify extracted nothing from the gold answer"}
    if same_text_shortcut and answer.strip() == gold.strip() and not _is_nan_or_zoo(gold_parsed[0]):
        # The same text parses to the same objects, which math-verify's first test (a == b) accepts: skip
        # the second parse and the comparison. (For nan / zoo that test raises instead: no shortcut.)
        return {"status": "ok", "correct": True, "gold_parsed": str(gold_parsed[0]),
                "answer_parsed": str(gold_parsed[0]), "why": None, "check_s": round(time.perf_counter() - start, 6)}
    try:
        answer_parsed = parse(_as_latex(answer), [LatexExtractionConfig(), ExprExtractionConfig()],
                              parsing_timeout=timeout_s, raise_on_error=True)
    except TimeoutException:
        return {"status": "timeout", "where": "parsing the answer"}
    except Exception as exc:  # malformed model output: a wrong answer, not an infrastructure failure
        return {"status": "ok", "correct": False, "gold_parsed": str(gold_parsed[-1]),
                "answer_parsed": None, "why": f"answer not parseable: {type(exc).__name__}"}
    if not answer_parsed:
        return {"status": "ok", "correct": False, "gold_parsed": str(gold_parsed[-1]), "answer_parsed": None,
                "why": "answer not parseable"}
    try:
        correct = verify(gold_parsed, answer_parsed, float_rounding=float_rounding, timeout_seconds=timeout_s,
                         raise_on_error=True)
    except TimeoutException:
        return {"status": "timeout", "where": "comparing"}
    except Exception as exc:  # sympy could not compare these objects: they are not the same answer
        correct = False
        why = f"comparison failed: {type(exc).__name__}"
    else:
        why = None if correct else "not equivalent to the gold answer"
    return {"status": "ok", "correct": bool(correct), "gold_parsed": str(gold_parsed[0]),
            "answer_parsed": str(answer_parsed[0]), "why": why,
            "check_s": round(time.perf_counter() - start, 6)}


def check_chunk_in_worker(pairs: list[tuple[str, str]], float_rounding: int, timeout_s: int,
                          budget_s: float) -> list[dict | None]:
    """:func:`check_in_worker` on each (gold, answer) pair; None for the pairs not started within ``budget_s``.

    The first pair always runs, so every chunk makes progress; the budget keeps a chunk (at most ``budget_s``
    plus one item's worst case, 3 x timeout_s) inside the pool's outer deadline.
    """
    start = time.perf_counter()
    replies: list[dict | None] = []
    for i, (gold, answer) in enumerate(pairs):
        if i and time.perf_counter() - start > budget_s:
            replies.extend([None] * (len(pairs) - i))
            break
        replies.append(check_in_worker(gold, answer, float_rounding, timeout_s))
    return replies


# ---- the verifier (parent side) -------------------------------------------------------------------

_POOLS: dict[tuple, WorkerPool] = {}
_POOLS_LOCK = threading.Lock()


def shared_pool(processes: int, deadline_s: float) -> WorkerPool:
    """One pool per (processes, deadline) in this process, shared by every math verifier built."""
    key = (processes, float(deadline_s))
    with _POOLS_LOCK:
        if key not in _POOLS:
            _POOLS[key] = WorkerPool("training.verifiers.math_answer:check_chunk_in_worker", processes=processes,
                                     deadline_s=deadline_s)
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
    """

    # What a reward spec may set, with bounds (checked at submit time; base.Param).
    PARAMS = {"answer_key": Param(str, max_len=100), "extract": Param(str, choices=tuple(EXTRACT)),
              "fallback": Param(str, choices=("answer_line", "none")),
              "multiple_boxed": Param(str, choices=("last", "reject")), "processes": Param(int, 1, 32),
              "deadline_s": Param(float, 1, 600), "timeout_s": Param(int, 1, 300), "float_rounding": Param(int, 0, 15),
              "cache_size": Param(int, 0, 1_000_000)}

    @staticmethod
    def check_params(*, timeout_s: int = 3, deadline_s: float = 10.0, **_) -> str:
        """What is wrong with these parameters together ("" when nothing), at submit time."""
        return "" if deadline_s > timeout_s else (
            f"math: deadline_s must exceed timeout_s; got timeout_s={timeout_s}, deadline_s={deadline_s}")

    def __init__(self, *, answer_key: str = "answer", extract: str = "boxed", fallback: str = "answer_line",
                 multiple_boxed: str = "last", processes: int = 2, deadline_s: float = 10.0, timeout_s: int = 3,
                 float_rounding: int = 6, cache_size: int = 100_000):
        if extract not in EXTRACT:
            raise ValueError(f"math: extract must be one of {', '.join(EXTRACT)}; got {extract!r}")
        if fallback not in ("answer_line", "none"):
            raise ValueError(f"math: fallback must be 'answer_line' or 'none'; got {fallback!r}")
        if multiple_boxed not in ("last", "reject"):
            raise ValueError(f"math: multiple_boxed must be 'last' or 'reject'; got {multiple_boxed!r}")
        if timeout_s < 1 or deadline_s <= timeout_s:
            raise ValueError(f"math: need 1 <= timeout_s < deadline_s; got timeout_s={timeout_s}, "
                             f"deadline_s={deadline_s}")
        self.answer_key, self.extract = answer_key, extract
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
            info = extract_answer(completion, self.fallback, self.multiple_boxed, self.extract)
            infos.append(info)
            try:
                gold = self._gold(example)
            except VerifierError as exc:
                out[i] = exc
                continue
            info["gold"] = gold
            if info["answer"] is None:
                out[i] = VerifierResult(0.0, info)
            elif _HEDGE.search(info["answer"]) and not _HEDGE.search(gold):
                info["reason"] = "hedged answer"
                out[i] = VerifierResult(0.0, info)
            elif (fast := self._fast(gold, info)) is not None:
                out[i] = fast
            else:
                key = (gold, info["answer"])
                if key in self._cache:
                    self._cache.move_to_end(key)
                    out[i] = self._result(info, self._cache[key], cached=True)
                else:
                    todo.setdefault(key, []).append(i)
        if todo:
            for key, reply in self._check_in_pool(list(todo)).items():
                if isinstance(reply, dict) and reply.get("status") == "ok" and self.cache_size:
                    self._cache[key] = reply
                    if len(self._cache) > self.cache_size:
                        self._cache.popitem(last=False)
                for i in todo[key]:
                    out[i] = self._result(infos[i], reply, cached=False)
        return out

    def _fast(self, gold: str, info: dict) -> VerifierResult | None:
        """The in-process verdict when both sides are in the fast grammar and it is certain, else None."""
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

    def _check_in_pool(self, keys: list[tuple[str, str]]) -> dict[tuple, object]:
        """math-verify on every (gold, answer) key, in chunks; a reply dict or TaskTimeout/TaskFailed per key.

        Chunks of up to ``MAX_CHUNK`` keys, about 4 per worker so the workers stay evenly loaded. Keys a
        worker did not reach within its budget go round again; the keys of a chunk that timed out or whose
        worker died are retried one per task, so only the item that is really stuck gets the error.
        """
        budget_s = max(0.05, self.pool.deadline_s - 3 * self.timeout_s - 0.5)
        replies: dict[tuple, object] = {}
        # Keys sharing a gold travel together, so a worker parses that gold once (check_in_worker caches it).
        first_seen = {gold: i for i, (gold, _) in reversed(list(enumerate(keys)))}
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
            return VerifierError(f"math: check timed out ({reply}) for answer {info['answer'][:200]!r}")
        if isinstance(reply, TaskFailed):
            return VerifierError(f"math: worker failed: {reply}")
        if reply["status"] == "timeout":
            return VerifierError(f"math: math-verify timed out while {reply['where']} "
                                 f"(answer {info['answer'][:200]!r})")
        if reply["status"] == "bad_gold":
            return VerifierError(f"math: cannot parse gold answer {info['gold'][:200]!r}: {reply['error']}")
        details = dict(info, gold_parsed=reply["gold_parsed"], answer_parsed=reply["answer_parsed"],
                       reason=reply["why"], cached=cached, fast_path=False)
        return VerifierResult(1.0 if reply["correct"] else 0.0, details)
