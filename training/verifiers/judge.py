"""The ``judge`` verifier: a generative reward model grading with a rubric.

A run's config names a judge **endpoint** registered by the operator, never a URL, a path or a secret:
an OpenAI-compatible ``/chat/completions`` server (http or https; a vLLM server or any compatible one), with
the key read from ``$SEEDBED_SECRET_<SECRET>`` when the endpoint names a secret, or a local transformers model
folder. The web app and the workers register the endpoints staff keep in the database (webapp.library); the
CLI has those of the JSON file named by $SEEDBED_JUDGE_ENDPOINTS. The prompt is ``template`` filled with the rubric, the scale, the prompt,
the reference answer and the completion. The judge must answer with exactly one line ``Score: <number>``
inside the scale; anything else is malformed. The reward is the score mapped to [0, 1]:

    reward = (s − scale_min) / (scale_max − scale_min)

Completions a policy could use to sway a judge score 0 without asking it, the reason in ``details["reason"]``
(:meth:`JudgeVerifier.refused`): blank, over :data:`MAX_COMPLETION_CHARS`, holding a verdict to copy, or the
prompt echoed back. Failures are never a silent 0: transport errors, HTTP 429/5xx and malformed replies are retried with
exponential back-off (``backoff_s · 2^attempt``); when the attempts run out the verifier raises
VerifierError. Other HTTP 4xx (a wrong model name, a bad key) fail at once.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Optional

from training.verifiers.base import Param, VerifierError, VerifierResult, register_verifier

DEFAULT_TEMPLATE = """You are grading a response to a task.

Rubric:
{rubric}

Task:
{prompt}

Reference answer (may be empty):
{reference}

Response to grade:
{completion}

Think briefly, then end with exactly one line of the form "Score: <number>", where the number is between \
{scale_min} and {scale_max} ({scale_max} is best)."""

DEFAULT_RUBRIC = "Score correctness first, then clarity. A response that does not answer the task scores lowest."
_SCORE_LINE = re.compile(r"^\s*\**\s*score\s*\**\s*[:=]\s*\**\s*(-?\d+(?:\.\d+)?)\s*\**\s*$", re.I | re.M)
_FIELDS = ("rubric", "prompt", "reference", "completion", "scale_min", "scale_max")


REPLY_EXCERPT_CHARS = 300  # what is kept of a judge's reply next to its parsed score
# Completions scored 0 without asking the judge (details["reason"]), tricks a policy could find to sway it:
MAX_COMPLETION_CHARS = 100_000  # longer: "completion too long" (a megabyte prompt only slows or confuses a judge)
# a verdict written for the judge to copy: a line in the judge's own reply format, or "reward: 1.0" anywhere
_VERDICT_IN_TEXT = re.compile(r"\b(?:reward|verdict|grade)\s*[:=]\s*\**\s*-?\d", re.I)


@dataclass(frozen=True)
class JudgeEndpoint:
    """A judge the operator registered: a chat-completions server or a local model folder, and the name of
    the secret holding its key (its value comes from $SEEDBED_SECRET_<SECRET>, set by the operator)."""

    name: str
    base_url: str = ""
    model: str = "judge"
    local_model_path: str = ""
    secret: str = ""

    def problem(self) -> str:
        """"" when usable, else what is wrong with it."""
        if bool(self.base_url) == bool(self.local_model_path):
            return f"judge endpoint {self.name!r}: give exactly one of a server URL or a local model folder"
        if "\x00" in self.local_model_path:  # no folder's name can hold one (loading it would raise ValueError)
            return f"judge endpoint {self.name!r}: the local model folder must not contain a NUL byte"
        if self.base_url and not re.match(r"^https?://[^/\s]+", self.base_url):
            return f"judge endpoint {self.name!r}: the URL must be http:// or https://; got {self.base_url!r}"
        return ""


def _endpoints_from_file() -> dict[str, JudgeEndpoint]:
    path = os.environ.get("SEEDBED_JUDGE_ENDPOINTS", "")
    if not path:
        return {}
    with open(path, encoding="utf-8") as fh:
        return {item["name"]: JudgeEndpoint(**item) for item in json.load(fh)}


_provider: Callable[[], dict[str, JudgeEndpoint]] = _endpoints_from_file


def set_endpoint_provider(provider: Callable[[], dict[str, JudgeEndpoint]]) -> None:
    """Where judge endpoints come from (the web app and the workers install the database's)."""
    global _provider
    _provider = provider


def judge_endpoint(name: str) -> Optional[JudgeEndpoint]:
    return _provider().get(name)


def export_endpoints(spec, path: str) -> list[str]:
    """Write the judge endpoints a reward spec names to ``path`` (the $SEEDBED_JUDGE_ENDPOINTS format), for a
    process that has no database, e.g. a TRL rank; returns their names ([] and no file when the spec has no
    judge). Keys are not written: the file names each endpoint's secret, whose value the process reads from
    its environment as this one does."""
    names = sorted({(item.get("params") or {}).get("endpoint", "") for item in spec
                    if isinstance(item, dict) and item.get("name") == "judge"})
    found = [judge_endpoint(name) for name in names]
    if not names:
        return []
    with open(path, "w", encoding="utf-8") as fh:
        json.dump([dataclasses.asdict(e) for e in found if e is not None], fh)
    return names


class _Retryable(Exception):
    """A failure worth another attempt (network, 429/5xx, malformed reply)."""


def parse_score(reply: str, scale_min: float, scale_max: float) -> float:
    """The single ``Score: N`` line's number; ValueError when there is none, several, or it is off the scale.

    >>> parse_score("Good work.\\nScore: 7", 0, 10)
    7.0
    >>> parse_score("Score: 7 or 8", 0, 10)
    Traceback (most recent call last):
    ...
    ValueError: no 'Score: <number>' line in the reply
    """
    found = _SCORE_LINE.findall(reply)
    if not found:
        raise ValueError("no 'Score: <number>' line in the reply")
    if len(set(found)) > 1:
        raise ValueError(f"several different scores in the reply: {found}")
    score = float(found[0])
    if not scale_min <= score <= scale_max:
        raise ValueError(f"score {score:g} outside the scale [{scale_min:g}, {scale_max:g}]")
    return score


@register_verifier("judge")
class JudgeVerifier:
    """Ask a judge model to grade the completion; the reward is its score mapped to [0, 1].

    ``endpoint`` names a registered judge (see the module docstring); the other parameters shape the prompt
    and the retries, each bounded.
    """

    # What a reward spec may set (types and bounds at submit time; base.Param); check_params adds the rest.
    PARAMS = {"endpoint": Param(str, max_len=100), "rubric": Param(str, max_len=20_000), "scale": Param(list, max_len=2),
              "template": Param(str, max_len=20_000), "prompt_key": Param(str, max_len=100),
              "reference_key": Param(str, max_len=100), "temperature": Param(float, 0, 2),
              "max_tokens": Param(int, 1, 8192), "timeout_s": Param(float, 1, 600), "retries": Param(int, 0, 10),
              "backoff_s": Param(float, 0, 60), "concurrency": Param(int, 1, 64)}

    def __init__(self, *, endpoint: str = "", rubric: str = DEFAULT_RUBRIC, scale: list | tuple = (0, 10),
                 template: str = DEFAULT_TEMPLATE, prompt_key: str = "prompt", reference_key: str = "answer",
                 temperature: float = 0.0, max_tokens: int = 512, timeout_s: float = 60.0, retries: int = 3,
                 backoff_s: float = 1.0, concurrency: int = 8):
        problem = self.check_params(endpoint=endpoint, scale=scale, template=template, temperature=temperature,
                                    max_tokens=max_tokens, timeout_s=timeout_s, retries=retries, backoff_s=backoff_s,
                                    concurrency=concurrency)
        if problem:
            raise ValueError(problem)
        found = judge_endpoint(endpoint)
        self.endpoint = endpoint
        self.base_url, self.model, self.local_model_path = found.base_url.rstrip("/"), found.model, found.local_model_path
        self.api_key = os.environ.get(f"SEEDBED_SECRET_{found.secret.upper()}", "") if found.secret else ""
        if found.secret and not self.api_key:
            raise ValueError(f"judge endpoint {endpoint!r}: its secret {found.secret!r} is not set on this "
                             f"worker (${'SEEDBED_SECRET_' + found.secret.upper()})")
        self.rubric, self.scale_min, self.scale_max = rubric, float(scale[0]), float(scale[1])
        self.template, self.prompt_key, self.reference_key = template, prompt_key, reference_key
        self.temperature, self.max_tokens = temperature, max_tokens
        self.timeout_s, self.retries, self.backoff_s, self.concurrency = timeout_s, retries, backoff_s, concurrency
        self._local = None
        self._local_lock = threading.Lock()

    @staticmethod
    def check_params(*, endpoint: str = "", scale=(0, 10), template: str = DEFAULT_TEMPLATE,
                     temperature: float = 0.0, max_tokens: int = 512, timeout_s: float = 60.0, retries: int = 3,
                     backoff_s: float = 1.0, concurrency: int = 8, **_) -> str:
        """What is wrong with these parameters ("" when nothing): checked when a config is submitted, before
        any work, and again when the worker builds the verifier."""
        if not isinstance(endpoint, str) or not endpoint:
            return "judge: name a registered judge endpoint (parameter endpoint)"
        found = judge_endpoint(endpoint)
        if found is None:
            return f"judge: no judge endpoint named {endpoint!r} (staff register them)"
        if found.problem():
            return found.problem()
        numbers = {"temperature": (temperature, 0, 2), "max_tokens": (max_tokens, 1, 8192),
                   "timeout_s": (timeout_s, 0.1, 600), "retries": (retries, 0, 10), "backoff_s": (backoff_s, 0, 60),
                   "concurrency": (concurrency, 1, 64)}
        for name, (value, lo, hi) in numbers.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
                return f"judge: {name} must be a number in [{lo}, {hi}]; got {value!r}"
        if not isinstance(scale, (list, tuple)) or len(scale) != 2 or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in scale) or not scale[0] < scale[1]:
            return f"judge: scale must be [min, max] with min < max; got {scale!r}"
        if not isinstance(template, str):
            return "judge: template must be text"
        unknown = set(re.findall(r"{(\w+)}", template)) - set(_FIELDS)
        if unknown:
            return f"judge: template uses unknown fields {sorted(unknown)}; known: {list(_FIELDS)}"
        if "{completion}" not in template:
            return "judge: template must contain {completion}"
        return ""

    def render(self, completion: str, example: dict) -> str:
        values = {"rubric": self.rubric, "prompt": str(example.get(self.prompt_key, "")),
                  "reference": str(example.get(self.reference_key, "")), "completion": completion,
                  "scale_min": f"{self.scale_min:g}", "scale_max": f"{self.scale_max:g}"}
        # str.format would choke on braces in the completion; substitute the known fields only.
        return re.sub(r"{(\w+)}", lambda m: values[m.group(1)], self.template)

    # -- backends --
    def _ask_server(self, prompt: str) -> str:
        body = json.dumps({"model": self.model, "messages": [{"role": "user", "content": prompt}],
                           "temperature": self.temperature, "max_tokens": self.max_tokens}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(f"{self.base_url}/chat/completions", data=body, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:
            if exc.code == 429 or exc.code >= 500:
                raise _Retryable(f"HTTP {exc.code} from the judge server") from None
            raise VerifierError(f"judge {self.endpoint!r}: HTTP {exc.code}: {exc.read()[:300]!r}") from None
        except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError) as exc:
            raise _Retryable(f"cannot reach the judge server of {self.endpoint!r}: {exc}") from None
        try:
            content = json.loads(payload)["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise _Retryable(f"malformed chat-completions response: {payload[:200]!r}") from None
        if not isinstance(content, str):
            raise _Retryable("chat-completions response has no text content")
        return content

    def _ask_local(self, prompt: str) -> str:
        with self._local_lock:  # one generate at a time on a local model
            if self._local is None:
                from transformers import AutoModelForCausalLM, AutoTokenizer
                tokenizer = AutoTokenizer.from_pretrained(self.local_model_path)
                model = AutoModelForCausalLM.from_pretrained(self.local_model_path)
                model.eval()
                self._local = (tokenizer, model)
            tokenizer, model = self._local
            import torch
            if getattr(tokenizer, "chat_template", None):
                text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                                     add_generation_prompt=True)
            else:
                text = prompt
            inputs = tokenizer(text, return_tensors="pt")
            with torch.no_grad():
                out = model.generate(**inputs, max_new_tokens=self.max_tokens, do_sample=False)
            return tokenizer.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)

    # -- the verifier --
    def refused(self, completion: str, example: dict) -> str | None:
        """Why the completion scores 0 without a judgement, or None: blank, over
        :data:`MAX_COMPLETION_CHARS`, holding a verdict for the judge to copy ("Score: 10" on a line, "reward:
        1.0"), or the task's prompt echoed back (whitespace and case aside)."""
        if not completion.strip():
            return "blank response"
        if len(completion) > MAX_COMPLETION_CHARS:
            return "completion too long"
        if _SCORE_LINE.search(completion) or _VERDICT_IN_TEXT.search(completion):
            return "a verdict in the completion"
        prompt = str(example.get(self.prompt_key, ""))
        if prompt.strip() and " ".join(completion.split()).casefold() == " ".join(prompt.split()).casefold():
            return "the prompt echoed back"
        return None

    def __call__(self, completion: str, example: dict) -> VerifierResult:
        refused = self.refused(completion, example)
        if refused:
            return VerifierResult(0.0, {"reason": refused, "endpoint": self.endpoint, "attempts": 0})
        prompt = self.render(completion, example)
        ask = self._ask_server if self.base_url else self._ask_local
        problems = []
        start = time.perf_counter()
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))  # back off before retrying
            try:
                reply = ask(prompt)
                score = parse_score(reply, self.scale_min, self.scale_max)
            except _Retryable as exc:
                problems.append(str(exc))
                continue
            except ValueError as exc:  # a malformed judgement: ask again
                problems.append(f"malformed judgement: {exc}; reply {reply[-REPLY_EXCERPT_CHARS:]!r}")
                continue
            reward = (score - self.scale_min) / (self.scale_max - self.scale_min)
            return VerifierResult(reward, {"judge_score": score, "attempts": attempt + 1,
                                           "reply": reply[-REPLY_EXCERPT_CHARS:], "endpoint": self.endpoint,
                                           "problems": problems, "seconds": round(time.perf_counter() - start, 3)})
        raise VerifierError(f"judge: no valid judgement after {self.retries + 1} attempts: {problems[-1]}")

    def batch(self, completions: list[str], examples: list[dict]) -> list:
        def one(pair):
            try:
                return self(*pair)
            except VerifierError as exc:
                return exc
        workers = 1 if self.local_model_path else max(1, min(self.concurrency, len(completions)))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(one, zip(completions, examples)))
