"""What a run's Slurm batch job runs on its first node: ``python -m workers.slurm.job RUN_ID``.

It does what a worker's slot does for a single-node run (``workers.tasks.train_here``): claims the run (``run_start``:
its worker is ``slurm:<job id>@<node>``), forks the training child (``workers.runner``: it writes metrics, samples
and checkpoints to the database the web app reads), heartbeats and watches the kill flag, and records how the run
ended. Its environment is the one the job was submitted with (``sbatch --export=ALL``): the maintenance worker's,
so ``SEEDBED_HOME``, ``DATABASE_URL`` and the settings are those of the web app it reports to.
"""
from __future__ import annotations

import os
import socket
import sys


def job_worker() -> str:
    """This job's name as the run's worker: ``slurm:<job id>@<node>``."""
    return f"slurm:{os.environ.get('SLURM_JOB_ID', '?')}@{os.environ.get('SLURMD_NODENAME') or socket.gethostname()}"


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: python -m workers.slurm.job RUN_ID", file=sys.stderr)
        return 2
    from workers.celery_app import ensure_django

    ensure_django()
    from workers.tasks import train_here

    status = train_here(int(argv[0]), job_worker(), dispatch=f"slurm job {os.environ.get('SLURM_JOB_ID', '?')}")
    print(f"run {argv[0]}: {status}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
