"""torchrun that says how its ranks ended (docs/architecture.md#engines-and-distribution):
``python -m training.engines.torchrun <torchrun's arguments>`` is torch's own ``torch.distributed.run``, which,
when a rank fails, first writes every failed rank's end to ``rank_exits.json`` in its folder (``$SEEDBED_RUN_DIR``,
set by ``training.engines.process.start_engine``), then fails as torchrun does (its "Root Cause" report in the log).

Why: a rank killed by a signal it did not ask for (the out-of-memory killer's SIGKILL, a SIGSEGV in native code)
is a lost attempt, restarted from the run's checkpoint, while a rank that raised an error failed the run. torchrun
exits 1 for both; its elastic agent alone knows each rank's exit status (``ChildFailedError.failures``: global
rank -> ``ProcessFailure`` with the local rank, pid, exit code, negative for a signal). A rank's own error file
cannot say it (a SIGKILLed process writes nothing), and the report in the log is text meant for people.

Which rank's end counts: the first torchrun observed. Its agent polls the ranks every 0.1 s; once one has failed,
it terminates the others (SIGTERM, SIGKILL 30 s later) and records their ends after the first ones, in that order
(its failures are a dict filled as it observed them; its own "Root Cause" is the earliest of them). So a rank that
raised an error, whose peer the agent then had to SIGKILL, failed the run; a rank the out-of-memory killer
SIGKILLed, whose peer then failed on the broken connection, was lost: its peer is observed later.
``lost_rank`` reads the file back for the supervisor (``training.engines.process.engine_outcome``).

    >>> lost_rank_of([{"rank": 1, "local_rank": 1, "pid": 8, "exitcode": -9, "signal": "SIGKILL"},
    ...               {"rank": 0, "local_rank": 0, "pid": 7, "exitcode": -15, "signal": "SIGTERM"}])
    {'rank': 1, 'local_rank': 1, 'pid': 8, 'exitcode': -9, 'signal': 'SIGKILL'}
    >>> lost_rank_of([{"rank": 1, "local_rank": 1, "pid": 8, "exitcode": 1, "signal": ""},
    ...               {"rank": 0, "local_rank": 0, "pid": 7, "exitcode": -9, "signal": "SIGKILL"}])
    >>> lost_rank_of([{"rank": 1, "local_rank": 1, "pid": 8, "exitcode": -6, "signal": "SIGABRT"}])
"""
from __future__ import annotations

import json
import os
import sys

RANK_EXITS_FILE = "rank_exits.json"

# Signals a rank does not send itself: the kernel's out-of-memory killer (SIGKILL) and faults in native code.
# SIGABRT is not among them: a rank aborts itself (an uncaught C++ exception, an assertion, NCCL's watchdog after
# a collective timed out), an error of the run's own; SIGTERM and SIGINT are a stop a rank was asked for.
LOST_SIGNALS = frozenset({"SIGKILL", "SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE"})


def failures_record(failures: dict) -> list[dict]:
    """torchrun's failures (global rank -> ProcessFailure) as plain rows, in the order it observed them."""
    rows = []
    for rank, failure in failures.items():
        signal_name = failure.signal_name() if failure.exitcode < 0 else ""
        rows.append({"rank": int(rank), "local_rank": int(failure.local_rank), "pid": int(failure.pid),
                     "exitcode": int(failure.exitcode), "signal": signal_name, "timestamp": int(failure.timestamp)})
    return rows


def lost_rank_of(rows: list[dict]) -> dict | None:
    """The first rank torchrun saw end, when a signal of ``LOST_SIGNALS`` killed it, else None (the module's
    docstring says why the first: the others' ends follow from it)."""
    return rows[0] if rows and rows[0].get("signal") in LOST_SIGNALS else None


def lost_rank(proc_dir: str) -> dict | None:
    """``lost_rank_of`` the ``rank_exits.json`` torchrun wrote in ``proc_dir``; None when there is none (torchrun
    did not fail on a rank, or its disk could not take the file) or it cannot be read."""
    try:
        with open(os.path.join(proc_dir, RANK_EXITS_FILE), encoding="utf-8") as fh:
            rows = json.load(fh)
    except (OSError, ValueError):
        return None
    return lost_rank_of(rows) if isinstance(rows, list) else None


def main(argv: list[str]) -> None:
    """torchrun with ``argv`` (its arguments, without the program name)."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun

    try:
        torchrun(argv)
    except ChildFailedError as exc:
        folder = os.environ.get("SEEDBED_RUN_DIR", ".")
        try:
            with open(os.path.join(folder, RANK_EXITS_FILE + ".tmp"), "w", encoding="utf-8") as fh:
                json.dump(failures_record(exc.failures), fh)
            os.replace(os.path.join(folder, RANK_EXITS_FILE + ".tmp"), os.path.join(folder, RANK_EXITS_FILE))
        except OSError:  # (a full disk: the supervisor then reads the failure as an error)
            pass
        raise


if __name__ == "__main__":
    main(sys.argv[1:])
