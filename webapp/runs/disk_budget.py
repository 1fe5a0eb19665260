"""Disk budgets (docs/architecture.md#where-state-lives): what one run's folder may take on disk, and what all of a
project's runs may take together, so that one run writing checkpoints fails by itself instead of filling the disk
its neighbours (other projects' runs, the database) write to.

A budget is the project's own (``Project.run_disk_budget_mb`` / ``disk_budget_mb``, set by staff) or, where that is
empty, a fraction of the size of the disk holding the runs folder (``SEEDBED_RUN_DISK_FRACTION``, 0.25 by default;
``SEEDBED_PROJECT_DISK_FRACTION``, 0.5). The run's worker measures its folder with each heartbeat
(``folder_bytes``: the blocks its files take, as ``du`` counts them) and stores it as ``Run.disk_bytes``; the
project's usage is the sum of its runs' stored sizes, this run's fresh one included
(``webapp.runs.services.run_disk_check``).
"""
from __future__ import annotations

import os

MB = 1_000_000


def human_size(n: float) -> str:
    """Bytes in decimal units, as budgets are set (MB, GB).

    >>> human_size(0), human_size(3_400_000), human_size(2_000_000_000), human_size(1.5e13)
    ('0 B', '3.4 MB', '2.0 GB', '15.0 TB')
    """
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def folder_bytes(path) -> int:
    """What the files under ``path`` take on disk: their allocated blocks (``st_blocks`` x 512, so a sparse file
    counts what it uses), each inode once (hard links), symbolic links not followed; 0 when it is gone. A file
    removed while it is walked is skipped."""
    total, seen = 0, set()
    stack = [os.fspath(path)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def disk_size(folder) -> int:
    """The size of the disk holding ``folder`` (or its nearest existing parent), in bytes."""
    import shutil

    folder = os.fspath(folder)
    while folder and not os.path.exists(folder):
        folder = os.path.dirname(folder.rstrip("/")) or "/"
    return shutil.disk_usage(folder).total


def budgets(project) -> tuple[int, int]:
    """(one run's budget, the project's budget) in bytes: the project's own in MB where staff set one, else the
    settings' fraction of the runs folder's disk."""
    from django.conf import settings

    size = None

    def default(fraction: float) -> int:
        nonlocal size
        size = disk_size(settings.SEEDBED_RUNS_DIR) if size is None else size
        return int(fraction * size)
    run = project.run_disk_budget_mb * MB if project.run_disk_budget_mb else \
        default(settings.SEEDBED_RUN_DISK_FRACTION)
    whole = project.disk_budget_mb * MB if project.disk_budget_mb else \
        default(settings.SEEDBED_PROJECT_DISK_FRACTION)
    return run, whole


def over_budget(*, run_bytes: int, project_bytes: int, run_budget: int, project_budget: int) -> str:
    """Why a run must stop writing ("" while it is within both budgets): its own folder reached the run's
    budget, or its project's runs together (``project_bytes``, this run's included) reached the project's.

    >>> over_budget(run_bytes=2_100_000_000, project_bytes=3e9, run_budget=2e9, project_budget=10e9).split(" (")[0]
    "run's disk budget of 2.0 GB reached: its folder takes 2.1 GB"
    >>> over_budget(run_bytes=10, project_bytes=5e6, run_budget=100, project_budget=4e6).split(" (")[0]
    "project's disk budget of 4.0 MB reached: its runs take 5.0 MB, this one 10 B"
    >>> over_budget(run_bytes=10, project_bytes=10, run_budget=100, project_budget=100)
    ''
    """
    if run_bytes >= run_budget:
        return (f"run's disk budget of {human_size(run_budget)} reached: its folder takes {human_size(run_bytes)} "
                "(keep_checkpoints keeps fewer checkpoints; staff set the budget in the project's admin)")
    if project_bytes >= project_budget:
        return (f"project's disk budget of {human_size(project_budget)} reached: its runs take "
                f"{human_size(project_bytes)}, this one {human_size(run_bytes)} (an operator removing old runs' "
                "checkpoints frees it; staff set the budget in the project's admin)")
    return ""
