"""A training process whose run is past its disk budget (webapp.runs.disk_budget) is stopped at once by its
worker's supervisor: the run is failed first, naming the budget (``services.run_disk_check``), then its process
group is SIGKILLed, so it writes nothing more (a SIGTERM would let the loop save one more checkpoint on its way
out), and the checkpoint it was writing (``step_N.tmp``) is removed. Its last whole checkpoints stay for a new run
from them; the run is not restarted (its error is its own, not a full disk)."""
from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
from pathlib import Path

from workers import db_full

log = logging.getLogger("seedbed.workers")


class DiskWatch:
    """Measures a run's folder (``folder_bytes``, with each heartbeat) and stores it; ``__call__`` says whether the
    run was failed for its budget (and its training process ``proc`` ended)."""

    def __init__(self, run_id: int, folder: Path, proc):
        from webapp.runs import services

        self.run_id, self.folder, self.proc = run_id, Path(folder), proc
        # (a full database refuses the write: the run goes on, its own full disk would fail it)
        self.check = db_full.tolerant(services.run_disk_check, "disk usage", run_id, "")

    def __call__(self) -> bool:
        from webapp.runs.disk_budget import folder_bytes

        why = self.check(run_id=self.run_id, used=folder_bytes(self.folder))
        if not why:
            return False
        log.warning("run %s: %s; killing its training process", self.run_id, why)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            log.error("run %s: its training process outlived SIGKILL for 30 s", self.run_id)
        for partial in (self.folder / "checkpoints").glob("*.tmp"):
            shutil.rmtree(partial, ignore_errors=True)
        return True
