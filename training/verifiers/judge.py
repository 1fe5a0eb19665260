"""The ``judge`` verifier: a generative reward model grading with a rubric.

Backends: an OpenAI-compatible ``/chat/completions`` endpoint (a vLLM server or any compatible one) or a
local transformers model folder. The prompt is ``template`` filled with the rubric, the scale, the prompt,
the reference answer and the completion. The judge must answer with exactly one line ``Score: <number>``
inside the scale; anything else is malformed. The reward is the score mapped to [0, 1]:

    reward = (s − scale_min) / (scale_max − scale_min)

Failures are never a silent 0: transport errors, HTTP 429/5xx and malformed replies are retried with
exponential back-off (``backoff_s · 2^attempt``); when the attempts run out the verifier raises
VerifierError. Other HTTP 4xx (a wrong model name, a bad key) fail at once.
"""
from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from training.verifiers.base import VerifierError, VerifierResult, register_verifier

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

    >>> JudgeVerifier(base_url="http://127.0.0.1:9/v1", template="{completion}").render("Hi", {"prompt": "x"})[:2]
    'Hi'
    """

    def __init__(self, *, base_url: str = "", model: str = "judge", local_model_path: str = "",
                 api_key_env: str = "", rubric: str = DEFAULT_RUBRIC, scale: list | tuple = (0, 10),
                 template: str = DEFAULT_TEMPLATE, prompt_key: str = "prompt", reference_key: str = "answer",
                 temperature: float = 0.0, max_tokens: int = 512, timeout_s: float = 60.0, retries: int = 3,
                 backoff_s: float = 1.0, concurrency: int = 8):
        if bool(base_url) == bool(local_model_path):
            raise ValueError("judge: give exactly one of base_url (an OpenAI-compatible server) or local_model_path")
        if len(scale) != 2 or not scale[0] < scale[1]:
            raise ValueError(f"judge: scale must be [min, max] with min < max; got {scale!r}")
        unknown = set(re.findall(r"{(\w+)}", template)) - set(_FIELDS)
        if unknown:
            raise ValueError(f"judge: template uses unknown fields {sorted(unknown)}; known: {list(_FIELDS)}")
        if "{completion}" not in template:
            raise ValueError("judge: template must contain {completion}")
        if retries < 0 or timeout_s <= 0 or backoff_s < 0:
            raise ValueError("judge: retries >= 0, timeout_s > 0 and backoff_s >= 0 are required")
        self.base_url, self.model, self.local_model_path = base_url.rstrip("/"), model, local_model_path
        self.api_key = os.environ.get(api_key_env, "") if api_key_env else ""
        if api_key_env and not self.api_key:
            raise ValueError(f"judge: api_key_env names {api_key_env!r}, which is not set")
        self.rubric, self.scale_min, self.scale_max = rubric, float(scale[0]), float(scale[1])
        self.template, self.prompt_key, self.reference_key = template, prompt_key, reference_key
        self.temperature, self.max_tokens = temperature, max_tokens
        self.timeout_s, self.retries, self.backoff_s, self.concurrency = timeout_s, retries, backoff_s, concurrency
        self._local = None
        self._local_lock = threading.Lock()

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
            raise VerifierError(f"judge: HTTP {exc.code} from {self.base_url}: {exc.read()[:300]!r}") from None
        except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError) as exc:
            raise _Retryable(f"cannot reach the judge server at {self.base_url}: {exc}") from None
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
    def __call__(self, completion: str, example: dict) -> VerifierResult:
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
                problems.append(f"malformed judgement: {exc}; reply {reply[-200:]!r}")
                continue
            reward = (score - self.scale_min) / (self.scale_max - self.scale_min)
            return VerifierResult(reward, {"judge_score": score, "attempts": attempt + 1, "reply": reply[-1000:],
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
