"""The training child process: ``python -m workers.runner RUN_ID``.

Started by the ``train_run`` task in its own session (process group), so the worker can terminate the whole
group if a kill is not honoured within the grace period. It runs ``training.loop.train`` with a
DatabaseSink and a should_stop() that reads the run's kill flag. Exit codes tell the parent task how it
ended; the parent, not this process, records the run's final status.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
import traceback

EXIT_SUCCEEDED = 0
EXIT_STOPPED = 10
EXIT_FAILED = 1

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask Linux to send SIGTERM if the worker slot that started us dies (no orphaned training)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


class StopFlag:
    """should_stop() for the loop: true once a kill is requested, the run stops being ``running``
    (declared lost), or this process got SIGTERM. The database is read at most every ``every_s`` seconds."""

    def __init__(self, run_id: int, every_s: float = 0.3, clock=time.monotonic):
        self.run_id = run_id
        self.every_s = every_s
        self.clock = clock
        self._checked_at = float("-inf")
        self._stop = False
        self.reason = ""

    def on_signal(self, signum, _frame) -> None:
        self._stop = True
        self.reason = f"signal {signal.Signals(signum).name}"

    def __call__(self) -> bool:
        if self._stop:
            return True
        now = self.clock()
        if now - self._checked_at < self.every_s:
            return False
        self._checked_at = now
        from webapp.runs.models import Run, RunStatus

        status, kill_requested_at = Run.objects.values_list("status", "kill_requested_at").get(pk=self.run_id)
        if kill_requested_at is not None:
            self._stop, self.reason = True, "kill requested"
        elif status != RunStatus.RUNNING:
            self._stop, self.reason = True, f"run is {status}"
        return self._stop


def main(argv: list[str]) -> int:
    run_id = int(argv[1])
    die_with_parent()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    import django

    django.setup()
    import torch
    from django.conf import settings

    from training.config import TrainConfig
    from training.loop import train
    from webapp.runs.models import Run
    from workers.sink import DatabaseSink

    # Each worker slot trains one run; one thread per run keeps slots from fighting over cores.
    torch.set_num_threads(int(os.environ.get("SEEDBED_TORCH_THREADS", "1")))
    stop = StopFlag(run_id)
    signal.signal(signal.SIGTERM, stop.on_signal)
    run = Run.objects.get(pk=run_id)
    cfg = TrainConfig.from_dict(run.config)
    out_dir = os.path.join(settings.SEEDBED_RUNS_DIR, str(run_id))
    os.makedirs(out_dir, exist_ok=True)
    print(f"run {run_id}: training in {out_dir}", flush=True)
    try:
        result = train(cfg, out_dir, sink=DatabaseSink(run_id), should_stop=stop)
    except Exception:
        traceback.print_exc()
        sys.stdout.flush()
        return EXIT_FAILED
    print(f"run {run_id}: {result.status} at step {result.step} {stop.reason}", flush=True)
    return EXIT_SUCCEEDED if result.status == "succeeded" else EXIT_STOPPED


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # Everything is stored by now (autocommitted rows, closed checkpoint files). Skip the interpreter's
    # teardown, which takes seconds with torch/transformers loaded, so a killed run ends promptly.
    os._exit(code)
