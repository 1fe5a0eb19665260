"""How events leave the training loop (docs/architecture.md#layers): a small sink interface.

The worker implements it to write to the database; the CLI implements it with JSONL files. Every method
must be cheap or buffer internally: the loop calls them synchronously. ``flush()`` is called before the loop
returns, so a sink that batches must write everything out there (nothing emitted before a clean stop is lost).

Every caller calls every method of ``Sink`` it needs, without probing: a sink subclasses ``NullSink`` and
overrides the events it keeps (the others are ignored). The events some runs only send:
``on_completion_signals`` (what the reward-hacking guard reads of each step's completions,
``training.reward_hacking.completion_signals``, sent only for a run that asks for that guard), ``on_engine_config`` (an
external engine's resolved config, once), ``on_ranks`` / ``flush_ranks`` (each rank's progress in a distributed
run; ``flush_ranks`` writes the last report out at the end).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Protocol


@dataclass
class TrainResult:
    """How a run's training ended (``training.loop.train``, ``training.engines.run_engine``)."""

    status: str  # "succeeded" or "stopped"
    step: int    # last completed step
    out_dir: str


class Sink(Protocol):
    def truncate_after(self, step: int) -> None: ...  # (re)starting at ``step``: forget what came after it
    def on_metrics(self, step: int, metrics: dict[str, float]) -> None: ...
    def on_samples(self, step: int, rows: list[dict]) -> None: ...
    def on_checkpoint(self, step: int, path: str) -> None: ...
    def on_log(self, line: str) -> None: ...
    def on_completion_signals(self, step: int, signals: dict) -> None: ...
    def on_engine_config(self, config: dict) -> None: ...
    def on_ranks(self, step: int, ranks: list[dict]) -> None: ...
    def flush_ranks(self) -> None: ...
    def flush(self) -> None: ...


class NullSink:
    """Every event ignored: the base of every sink, which overrides what it keeps."""

    def truncate_after(self, step): pass
    def on_metrics(self, step, metrics): pass
    def on_samples(self, step, rows): pass
    def on_checkpoint(self, step, path): pass
    def on_log(self, line): pass
    def on_completion_signals(self, step, signals): pass
    def on_engine_config(self, config): pass
    def on_ranks(self, step, ranks): pass
    def flush_ranks(self): pass
    def flush(self): pass


class JsonlSink(NullSink):
    """Writes metrics.jsonl and samples.jsonl under ``out_dir`` (the CLI's sink).

    On resume the files are truncated back to the checkpoint's step so an interrupted-then-resumed run
    has exactly the lines of an uninterrupted one.
    """

    def __init__(self, out_dir: str, echo=None, reward_hacking_guard: dict | None = None, eval_problems: int = 0):
        from training.reward_hacking import RewardHackingGuard
        from training.silent_run import SilentRunGuard

        self.guard = SilentRunGuard()  # its warnings go to echo (the CLI prints them) and warnings.jsonl
        self.hacking = RewardHackingGuard.from_config(reward_hacking_guard, eval_problems)  # the run's, if asked
        self.stopped_by = ""  # "guard:reward_hacking" once that guard stops the run (the CLI's should_stop reads it)
        self.out_dir = out_dir
        os.makedirs(out_dir, exist_ok=True)
        self.echo = echo
        self._metrics = open(os.path.join(out_dir, "metrics.jsonl"), "a", encoding="utf-8")
        self._samples = open(os.path.join(out_dir, "samples.jsonl"), "a", encoding="utf-8")

    def truncate_after(self, step: int) -> None:
        self.guard.forget_after(step)
        if self.hacking:
            self.hacking.forget_after(step)
        for fh in (self._metrics, self._samples):
            fh.flush()
            with open(fh.name, encoding="utf-8") as r:
                keep = [ln for ln in r if ln.strip() and json.loads(ln)["step"] <= step]
            with open(fh.name, "w", encoding="utf-8") as w:
                w.writelines(keep)

    def on_metrics(self, step, metrics):
        self._metrics.write(json.dumps({"step": step, **metrics}, sort_keys=True) + "\n")
        self._metrics.flush()
        self.guard.on_metrics(step, metrics)
        if step > self.guard.steps:
            self._warn()
        if self.hacking:
            self.hacking.on_metrics(step, metrics)
            self._warn(self.hacking)

    def on_completion_signals(self, step, signals):
        if self.hacking:
            self.hacking.on_signals(step, signals)
            self._warn(self.hacking)

    def on_samples(self, step, rows):
        for row in rows:
            self._samples.write(json.dumps({"step": step, **row}, sort_keys=True) + "\n")
        self._samples.flush()
        self.guard.on_samples(step, rows)
        if step >= self.guard.steps:
            self._warn()

    def _warn(self, guard=None) -> None:
        for warning in (guard or self.guard).warnings():
            if warning.get("stop"):
                self.stopped_by = f"guard:{warning['kind']}"
            with open(os.path.join(self.out_dir, "warnings.jsonl"), "a", encoding="utf-8") as fh:
                fh.write(json.dumps(warning, sort_keys=True) + "\n")
            if self.echo:
                self.echo(f"WARNING: {warning['message']}")

    def on_checkpoint(self, step, path):
        if self.echo:
            self.echo(f"checkpoint step {step}: {path}")

    def on_log(self, line):
        if self.echo:
            self.echo(line)

    def flush(self):
        self._metrics.flush()
        self._samples.flush()
