"""DatabaseSink: the training loop's events (training.sink.Sink) written to the database in batches.

Metrics and samples are buffered and bulk-inserted at most every ``flush_every_s`` seconds (a step slower
than that is written as soon as it is emitted), or when ``max_points`` are waiting; ``flush()`` (called
by the loop before it returns, also on a clean stop) writes whatever is left, so nothing is lost.
"""
from __future__ import annotations

import time

from training.reward_hacking import RewardHackingGuard
from training.silent_run import SilentRunGuard
from training.sink import NullSink
from webapp.runs import services
from webapp.runs.services import TransitionError


class DatabaseSink(NullSink):
    # max_points: a flush's size when points come faster than every flush_every_s; a flush costs about the same
    # few statements whatever its size (one upsert of the points, one per level of the chart tier), so bigger
    # flushes write more points per second (PostgreSQL: ~32 k points/s in flushes of 500, ~57 k in 5,000)
    def __init__(self, run_id: int, *, flush_every_s: float = 0.5, max_points: int = 5000,
                 clock=time.monotonic, echo=print, claim: tuple | None = None,
                 reward_hacking_guard: dict | None = None, eval_problems: int = 0):
        self.run_id = run_id
        self.claim = claim  # (worker, attempt) that started this process: writes only while it holds the run
        self.flush_every_s = flush_every_s
        self.max_points = max_points
        self.clock = clock
        self.echo = echo
        self._points: list[tuple[int, str, float]] = []
        self._samples: dict[int, list[dict]] = {}
        self._last_flush = float("-inf")
        self.guard = SilentRunGuard()
        self.hacking = RewardHackingGuard.from_config(reward_hacking_guard, eval_problems)  # the run's, if asked
        self.ranks_every_s = 2.0
        self._ranks_at = float("-inf")
        self._pending_ranks = None

    def truncate_after(self, step: int) -> None:
        """Called by the loop when it (re)starts at ``step``: forget whatever an interrupted attempt stored
        after its checkpoint, so a resumed run's history has each step exactly once."""
        self._points, self._samples = [], {}
        self.guard.forget_after(step)
        if self.hacking:
            self.hacking.forget_after(step)
        if self._holds_run():
            services.run_discard_after(run_id=self.run_id, step=step)

    def on_metrics(self, step: int, metrics: dict[str, float]) -> None:
        self._points.extend((step, key, value) for key, value in metrics.items())
        self.guard.on_metrics(step, metrics)
        if step > self.guard.steps:
            self._raise_warnings()
        if self.hacking:
            self.hacking.on_metrics(step, metrics)
            self._raise_warnings(self.hacking)
        self._maybe_flush()

    def on_completion_signals(self, step: int, signals: dict) -> None:
        if self.hacking:
            self.hacking.on_signals(step, signals)
            self._raise_warnings(self.hacking)

    def on_samples(self, step: int, rows: list[dict]) -> None:
        self._samples.setdefault(step, []).extend(rows)
        self.guard.on_samples(step, rows)
        if step >= self.guard.steps:
            self._raise_warnings()
        self._maybe_flush()

    def _raise_warnings(self, guard=None) -> None:
        for warning in (guard or self.guard).warnings():
            if self._holds_run():
                services.run_warning_add(run_id=self.run_id, warning=warning)
                if warning.get("stop"):
                    self._kill(warning)

    def _kill(self, warning: dict) -> None:
        """A guard that stops the run kills it as a person or a policy does (``run_kill``, ``killed_by``
        guard:<kind>): the loop's should_stop() reads the flag and stops after the step, with a checkpoint."""
        try:
            services.run_kill(run_id=self.run_id, killed_by=f"guard:{warning['kind']}",
                              reason=(warning.get("reason") or warning.get("message") or "")[:1000])
        except TransitionError:
            pass  # already being killed or ended: that kill stands

    def on_checkpoint(self, step: int, path: str) -> None:
        self.flush()
        if self._holds_run():
            services.run_checkpoint_add(run_id=self.run_id, step=step, path=path)

    def on_engine_config(self, config: dict) -> None:
        """An external engine's own resolved config (TRL: its GRPOConfig), shown on the run page."""
        if self._holds_run():
            services.run_engine_config_set(run_id=self.run_id, config=config)

    def on_ranks(self, step: int, ranks: list[dict]) -> None:
        """A multi-rank run's ranks (training.distributed reports them every step): stored at most every
        ``ranks_every_s`` seconds, and always the first report (the run page shows who runs it at once)."""
        now = self.clock()
        if now - self._ranks_at < self.ranks_every_s:
            self._pending_ranks = ranks  # stored by the next report that passes, or by flush_ranks() at the end
            return
        self._ranks_at, self._pending_ranks = now, None
        if self._holds_run():
            services.run_ranks_set(run_id=self.run_id, ranks=ranks)

    def _holds_run(self) -> bool:
        """Whether this process's claim is still the run's: a process whose run was taken over by another worker
        (or deleted) must not write into it."""
        return self.claim is None or services.run_held_by(run_id=self.run_id, claim=self.claim)

    def on_log(self, line: str) -> None:
        if self.echo:
            self.echo(line, flush=True)

    def _maybe_flush(self) -> None:
        if len(self._points) >= self.max_points or self.clock() - self._last_flush >= self.flush_every_s:
            self.flush()

    def flush_ranks(self) -> None:
        """The ranks' last report, held back by the throttle: stored once the run's ranks have exited (their page
        then shows where they ended)."""
        if self._pending_ranks is not None and self._holds_run():
            services.run_ranks_set(run_id=self.run_id, ranks=self._pending_ranks)
        self._pending_ranks = None

    def flush(self) -> None:
        # Samples first: the page polls metrics by step, so when a step's metrics appear its samples exist.
        samples, self._samples = self._samples, {}
        if (samples or self._points) and not self._holds_run():
            self._points = []
            return
        for step, rows in sorted(samples.items()):
            services.run_samples_append(run_id=self.run_id, step=step, rows=rows)
        points, self._points = self._points, []
        services.run_metrics_append(run_id=self.run_id, points=points)
        self._last_flush = self.clock()
        if points:
            # New curves: ask for the run's sweep to be checked now (a task for the maintenance worker,
            # throttled to one per second per sweep; the beat checks too), so a poor seed is stopped within
            # about a second without this run's step waiting for it.
            from webapp.sweeps.services import sweep_request_check

            sweep_request_check(run_id=self.run_id)
