"""The JSONL event contract between an external trainer and Seedbed (docs/architecture.md#engines-and-distribution).

An engine process (TRL through Seedbed's callback, verl's ``file`` logger, or a user's own script run as
``engine: command``) appends one JSON object per line to an events file; Seedbed tails it and forwards each
event to the run's sink. Every line is one of:

    {"step": N, "metrics": {"name": number, ...}}          a step's metrics (the contract's core)
    {"step": N, "data": {"name": number, ...}}              the same, as verl's file logger writes it
    {"step": N, "samples": [{"prompt": str, "completion": str, "reward": number, "answer": str, "details": {}}]}
    {"step": N, "checkpoint": "path"}                       a saved, loadable model folder (inside the run's folder)
    {"log": "text"}                                         a line for the run's log
    {"engine_config": {...}}                                the engine's own resolved config (shown on the run page)
    {"step": N, "ranks": [{"rank": 0, "host": str, "pid": int, "time": unix seconds, "rss_mb": peak MB}, ...]}
                                                            a multi-rank run's ranks as of step N (their heartbeat)

Steps are integers from 0 to 2**31 - 1; a metric is a finite number (int, float or bool); names are at most
200 characters and a line at most 1 MB. A line that breaks the contract is reported in the run's log and
skipped (a trainer's bad line never fails a run nor loses the lines around it); a line still being written
(no newline yet) is read once it is complete.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field

MAX_STEP = 2**31 - 1
MAX_LINE_BYTES = 1_000_000
MAX_NAME = 200
MAX_METRICS = 1000
MAX_SAMPLES = 256
MAX_TEXT = 20_000


@dataclass
class Event:
    step: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    samples: list[dict] = field(default_factory=list)
    checkpoint: str = ""
    log: str = ""
    engine_config: dict | None = None
    ranks: list[dict] = field(default_factory=list)


def parse_event(line: str) -> Event:
    """One line of the events file as an Event; raises ValueError saying what breaks the contract.

    >>> parse_event('{"step": 3, "metrics": {"reward/mean": 0.5, "ok": true}}').metrics
    {'reward/mean': 0.5, 'ok': 1.0}
    >>> parse_event('{"step": 2, "data": {"critic/score/mean": 1}}').metrics
    {'critic/score/mean': 1.0}
    >>> parse_event('{"step": -1, "metrics": {}}')
    Traceback (most recent call last):
    ...
    ValueError: step: must be an integer from 0 to 2147483647; got -1
    """
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg}") from None
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object; got {type(obj).__name__}")
    event = Event()
    if "log" in obj:
        if not isinstance(obj["log"], str):
            raise ValueError("log: must be a string")
        event.log = obj["log"][:MAX_TEXT]
    if "engine_config" in obj:
        if not isinstance(obj["engine_config"], dict):
            raise ValueError("engine_config: must be an object")
        event.engine_config = obj["engine_config"]
    has_step_payload = any(k in obj for k in ("metrics", "data", "samples", "checkpoint", "ranks"))
    if not has_step_payload:
        if not (event.log or event.engine_config is not None):
            raise ValueError("expected one of metrics, data, samples, checkpoint, ranks, log or engine_config")
        return event
    step = obj.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_STEP:
        raise ValueError(f"step: must be an integer from 0 to {MAX_STEP}; got {step!r}"[:200])
    event.step = step
    values = obj.get("metrics", obj.get("data"))
    if values is not None:
        event.metrics = _metrics(values)
    if "samples" in obj:
        event.samples = _samples(obj["samples"])
    if "checkpoint" in obj:
        if not isinstance(obj["checkpoint"], str) or not obj["checkpoint"]:
            raise ValueError("checkpoint: must be a non-empty path")
        event.checkpoint = obj["checkpoint"]
    if "ranks" in obj:
        event.ranks = _ranks(obj["ranks"])
    return event


MAX_RANKS = 4096


def _ranks(rows) -> list[dict]:
    """A multi-rank run's ranks: rank, local rank, host, pid, step and time of each, bounded."""
    if not isinstance(rows, list) or len(rows) > MAX_RANKS:
        raise ValueError(f"ranks: must be a list of at most {MAX_RANKS} objects")
    out = []
    for row in rows:
        if not isinstance(row, dict):
            raise ValueError("ranks: each rank must be an object")
        clean = {"host": str(row.get("host", ""))[:255]}
        for key in ("rank", "local_rank", "pid", "step"):
            value = row.get(key)
            clean[key] = value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_STEP else None
        for key in ("time", "rss_mb"):
            t = row.get(key)
            clean[key] = float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) else None
        out.append(clean)
    return out


def _metrics(values) -> dict[str, float]:
    if not isinstance(values, dict):
        raise ValueError(f"metrics: must be an object of name -> number; got {type(values).__name__}")
    if len(values) > MAX_METRICS:
        raise ValueError(f"metrics: at most {MAX_METRICS} per line; got {len(values)}")
    out = {}
    for name, value in values.items():
        if not name or len(name) > MAX_NAME:
            raise ValueError(f"metrics: a name must be 1 to {MAX_NAME} characters; got {name[:40]!r}…")
        if not isinstance(value, (int, float)) or (isinstance(value, float) and not math.isfinite(value)):
            continue  # text, lists, NaN and inf are not curve points (verl logs a few strings): left out
        out[name] = float(value)
    return out


def _samples(rows) -> list[dict]:
    if not isinstance(rows, list) or len(rows) > MAX_SAMPLES:
        raise ValueError(f"samples: must be a list of at most {MAX_SAMPLES} objects")
    out = []
    for row in rows:
        if not isinstance(row, dict):
            raise ValueError("samples: each sample must be an object")
        reward = row.get("reward", 0.0)
        if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
            raise ValueError(f"samples: reward must be a finite number; got {reward!r}"[:200])
        answer = row.get("answer")
        out.append({"prompt": str(row.get("prompt", ""))[:MAX_TEXT],
                    "completion": str(row.get("completion", ""))[:MAX_TEXT], "reward": float(reward),
                    "answer": "" if answer is None else str(answer)[:MAX_TEXT],
                    "details": row.get("details") if isinstance(row.get("details"), dict) else {}})
    return out


class EventReader:
    """Tails an events file: ``read()`` returns the events of the lines completed since the last call, and
    the contract breaches among them as (line number, message) pairs. The file may not exist yet."""

    def __init__(self, path: str):
        self.path = path
        self.offset = 0
        self.line_no = 0
        self._partial = b""
        self._skip_rest = False  # the next completed line is the end of a runaway line already reported

    def read(self, max_bytes: int = 8 * MAX_LINE_BYTES) -> tuple[list[Event], list[tuple[int, str]]]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read(max_bytes)
        except FileNotFoundError:
            return [], []
        self.offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        events, problems = [], []
        if len(self._partial) > MAX_LINE_BYTES:  # a runaway line: drop it, keep reading after its end
            self.line_no += 1
            problems.append((self.line_no, f"line longer than {MAX_LINE_BYTES} bytes; skipped"))
            self._partial = b""
            self._skip_rest = True
        for raw in lines:
            self.line_no += 1
            if self._skip_rest:
                self._skip_rest = False
                continue
            if not raw.strip():
                continue
            if len(raw) > MAX_LINE_BYTES:
                problems.append((self.line_no, f"line longer than {MAX_LINE_BYTES} bytes; skipped"))
                continue
            try:
                events.append(parse_event(raw.decode("utf-8", errors="replace")))
            except ValueError as exc:
                problems.append((self.line_no, str(exc)))
        return events, problems


class EventWriter:
    """Appends events to the file (one flushed line each): what Seedbed's own TRL callback uses, and what a
    user's script can copy (it needs nothing but ``json``)."""

    def __init__(self, path: str):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._fh = open(path, "a", encoding="utf-8")

    def write(self, obj: dict) -> None:
        self._fh.write(json.dumps(obj, separators=(",", ":"), allow_nan=False, default=str) + "\n")
        self._fh.flush()

    def metrics(self, step: int, metrics: dict) -> None:
        self.write({"step": step, "metrics": {k: v for k, v in metrics.items()
                                              if isinstance(v, (int, float)) and math.isfinite(v)}})

    def close(self) -> None:
        self._fh.close()
