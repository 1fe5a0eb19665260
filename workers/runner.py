"""The training child process: forked by the ``train_run`` task (or ``python -m workers.runner RUN_ID``).

It runs in its own session (process group), so the worker can terminate the whole group if a kill is not
honoured within the grace period. It runs the run's engine, ``training.engines.run_engine`` (Seedbed's loop,
``training.loop.train``, or an external engine the run names: TRL, verl, a registered command), with a
DatabaseSink (a node other than node 0 of a multi-node run only logs: ``NodeSink``) and a should_stop() that
reads the run's kill flag. Exit codes (``EXIT_SUCCEEDED``, ``EXIT_STOPPED``, ``EXIT_FAILED``, ``EXIT_RANK_LOST``,
``EXIT_DISK_FULL``) tell the parent task how it ended (the run's ``failure_kind`` comes of them), and a failure's one-line cause goes to it through a pipe; the parent, not this
process, records the run's final status (docs/architecture.md#a-runs-life).
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
import traceback

from training.sink import NullSink
from workers.machine import disk_free, human_bytes

EXIT_SUCCEEDED = 0
EXIT_STOPPED = 10
EXIT_FAILED = 1
EXIT_RANK_LOST = 11  # one of its ranks was killed by a signal it did not ask for (training.engines.process.RankLost)
EXIT_DISK_FULL = 12  # its error was a write that found the disk full (``disk_full_message``): it restarts once there is room

_PR_SET_PDEATHSIG = 1


OWNER_FILE = "run.json"


def claim_folder(out_dir: str, run) -> str:
    """Write who the folder belongs to (the run's UUID and id) on its first start; "" when it is this run's,
    else why not (its checkpoints are another run's: refused, nothing is read or removed)."""
    import json

    path = os.path.join(out_dir, OWNER_FILE)
    try:
        with open(path, encoding="utf-8") as fh:
            owner = json.load(fh).get("run_uid")
    except FileNotFoundError:
        owner = None
    except (OSError, ValueError, AttributeError):
        return f"{path} is unreadable; refusing to train in a folder whose owner is unknown"
    if owner is None:
        with open(path + ".tmp", "w", encoding="utf-8") as fh:
            json.dump({"run_uid": str(run.uid), "run_id": run.pk}, fh)
        os.replace(path + ".tmp", path)
        return ""
    if owner != str(run.uid):
        return f"the folder {out_dir} belongs to run {owner}, not to this run ({run.uid}); refusing to use it"
    return ""


def die_with_parent() -> None:
    """Ask Linux to send SIGTERM if the worker slot that started us dies (no orphaned training)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


class StopFlag:
    """should_stop() for the loop: true once a kill is requested, the run stops being ``running``
    (declared lost), another worker took it over (its claim, the worker and attempt that started this process,
    is no longer the run's), the run is gone, or this process got SIGTERM. The database is read at most every
    ``every_s`` seconds."""

    def __init__(self, run_id: int, every_s: float = 0.3, clock=time.monotonic, claim: tuple | None = None):
        self.run_id = run_id
        self.claim = claim
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

        row = Run.objects.filter(pk=self.run_id).values_list("status", "kill_requested_at", "worker", "attempts").first()
        if row is None:
            self._stop, self.reason = True, "run no longer exists"
            return True
        status, kill_requested_at, worker, attempts = row
        if self.claim is not None and (worker, attempts) != tuple(self.claim):
            self._stop, self.reason = True, f"run taken over by {worker or 'no one'} (attempt {attempts})"
        elif kill_requested_at is not None:
            self._stop, self.reason = True, "kill requested"
        elif status != RunStatus.RUNNING:
            self._stop, self.reason = True, f"run is {status}"
        return self._stop


def preload_training() -> None:
    """Import the training stack (torch, transformers and the tiny model's classes) in the worker's main
    process before it forks its slots: each run's child, forked from a slot, then starts training in about
    a second instead of re-importing for ten."""
    import torch  # noqa: F401
    import transformers
    from training import loop  # noqa: F401
    from training.config import default_tiny_model_dir

    tiny = default_tiny_model_dir()
    if os.path.isfile(os.path.join(tiny, "config.json")):
        # transformers imports a model family's modules lazily, on first use: use them once, on no weights.
        config = transformers.AutoConfig.from_pretrained(tiny)
        transformers.AutoModelForCausalLM.from_config(config)
        transformers.AutoTokenizer.from_pretrained(tiny)


def disk_full_message(exc: BaseException, folder: str) -> str:
    """"no space left on device under FOLDER: N free" when ``exc`` (or one it came from) is a write that found
    the disk full, else "". torch reports a full disk while saving as a bare "file write failed", so a write
    error with next to no space left counts as one too. A database that refused a write for its full disk
    (SQLite's "database or disk is full": workers.db_full) names the database's folder instead, when it is a
    file here."""
    import errno

    from workers import db_full

    if db_full.refused_by_database(exc):
        database = db_full.database_folder()
        folder = database or folder
        free = disk_free(folder)
        return f"no space left on device under {folder}: {human_bytes(free)} free"

    texts, todo = [], [exc]
    while todo and len(texts) < 20:  # the exception, those it came from, and a torch checkpoint's ranks' failures
        seen = todo.pop()
        if isinstance(seen, tuple):  # (exception, traceback)
            seen = seen[0]
        if not isinstance(seen, BaseException):
            continue
        if isinstance(seen, OSError) and seen.errno == errno.ENOSPC:
            texts.append("No space left on device")
        texts.append(str(seen))
        todo += [e for e in (seen.__cause__ or seen.__context__,) if e is not None]
        failures = getattr(seen, "failures", None)
        if isinstance(failures, dict):
            todo += list(failures.values())
    text = " ".join(texts)
    free = disk_free(folder)
    if "No space left on device" not in text and not ("write" in text.lower() and free is not None
                                                      and free < 1024 * 1024):
        return ""
    return f"no space left on device under {folder}: {human_bytes(free)} free"




# why the run failed, in one line, for the parent task (run_in_forked_child writes it to the pipe it inherited)
failure = {"message": ""}


def run_in_forked_child(run_id: int, log_path: str, node: list[str] = (), report_fd: int | None = None) -> None:
    """Body of the child forked by the train_run task: own session, output to the run's log, never returns.
    ``report_fd``: the write end of a pipe to the parent; a failure's one-line cause goes there (not only to the
    log, which may be on the very disk that filled up)."""
    code = EXIT_FAILED
    try:
        os.setsid()  # its own process group, so the worker can terminate the whole group
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        # The slot had Celery's stdout proxy and signal handlers: plain ones for the training process.
        sys.stdout = sys.stderr = open(1, "w", buffering=1, closefd=False)
        for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(sig, signal.SIG_DFL)
        code = main(["workers.runner", str(run_id), *node])
    except BaseException as exc:  # (torch's CheckpointException, raised by a checkpoint's write, is one)
        full = disk_full_message(exc, os.path.dirname(log_path))
        code = EXIT_DISK_FULL if full and not failure["message"] else code
        failure["message"] = failure["message"] or full or \
            (f"{type(exc).__name__}: {exc}".splitlines() or [""])[0][:500]
        try:
            traceback.print_exc()
        except BaseException:
            pass
    finally:
        try:
            if report_fd is not None and code in (EXIT_FAILED, EXIT_RANK_LOST, EXIT_DISK_FULL) and failure["message"]:
                os.write(report_fd, failure["message"].encode("utf-8", "replace")[:4000])
        except BaseException:
            pass
        try:
            sys.stdout.flush()
        except BaseException:
            pass
        finally:
            os._exit(code)


class NodeSink(NullSink):
    """The sink of a node other than node 0 of a multi-node run: the run's events come from node 0's rank 0;
    this node only logs."""

    def on_log(self, line): print(line, flush=True)


def silence_progress_bars() -> None:
    """No progress bars in the run's log: a log is a file read on the run page, where tqdm's redraws
    (``Loading weights: 0%| | 0/272``, once per model loaded) are noise. The child is forked from a slot that
    imported transformers already, so the switches are flipped here, not only read from the environment at import;
    the environment variables carry it to any process the run starts (ranks, an engine's own children)."""
    os.environ["TQDM_DISABLE"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] = "1"
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # (and huggingface_hub's)
    if "datasets" in sys.modules:
        sys.modules["datasets"].disable_progress_bars()


def limit_judges_to(run) -> None:
    """The run's training process sees only the judge endpoints open to its project (staff may have limited one
    since the launch): one it names that is not fails the run here, before any work, naming the endpoint and the
    project; the verifiers it builds (and a TRL rank's exported list) find no other."""
    from training.verifiers.judge import set_endpoint_provider
    from webapp.library.selectors import judge_endpoints, judge_problem

    problem = judge_problem((run.config or {}).get("rewards"), project=run.project)
    if problem:
        raise ValueError(problem)
    set_endpoint_provider(lambda: judge_endpoints(project_id=run.project_id))


def prepare_folder(run, node_rank=None) -> str:
    """The run's folder made ready to train in: created, claimed (``claim_folder``: "" when it is this run's, else
    why not), its checkpoints the run never recorded removed (node 0 alone tidies a multi-node run's folder)."""
    from training.checkpoint import discard_checkpoints_except
    from webapp.runs.models import Checkpoint

    out_dir = str(run.folder)
    os.makedirs(out_dir, exist_ok=True)
    problem = claim_folder(out_dir, run)
    if problem:
        return problem
    # resume only from checkpoints this run recorded: a folder's others are someone else's (a run that had
    # this id before the database was reset, or a save whose record never landed)
    if not node_rank:
        recorded = list(Checkpoint.objects.filter(run_id=run.pk).values_list("step", "path"))
        stale = discard_checkpoints_except(out_dir, [s for s, _ in recorded], [p for _, p in recorded])
        if stale:
            print(f"run {run.pk}: removed checkpoints it never recorded (steps {stale})", flush=True)
    return ""


def main(argv: list[str]) -> int:
    """``workers.runner RUN_ID [NODE_RANK MASTER_HOST MASTER_PORT]``."""
    run_id = int(argv[1])
    node_rank, master = (int(argv[2]), (argv[3], int(argv[4]))) if len(argv) > 4 else (None, None)
    die_with_parent()
    silence_progress_bars()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    import django

    django.setup()
    import torch

    from training.config import TrainConfig
    from training.engines import run_engine
    from training.engines.process import RankLost
    from webapp.runs.models import Run
    from workers.sink import DatabaseSink

    # Each worker slot trains one run (or one packed group); one thread a slot keeps slots from fighting over cores.
    torch.set_num_threads(int(os.environ.get("SEEDBED_TORCH_THREADS", "1")))
    run = Run.objects.select_related("sweep").get(pk=run_id)
    limit_judges_to(run)
    if run.pack_leader_id == run.pk and not node_rank:  # packed seeds: this run's group (workers.packed)
        from workers.packed import train_packed

        trained = train_packed(run, run.worker, lambda member: prepare_folder(member, node_rank), StopFlag)
        return EXIT_SUCCEEDED if trained else EXIT_FAILED
    # this process trains the run as claimed by its task (services.run_start); if that claim changes (the run
    # declared lost and taken over elsewhere, or gone), it stops and writes nothing more into the run
    claim = (run.worker, run.attempts) if not node_rank else None  # another node holds no claim on the run itself
    stop = StopFlag(run_id, claim=claim)
    signal.signal(signal.SIGTERM, stop.on_signal)
    cfg = TrainConfig.from_dict(run.config)
    out_dir = str(run.folder)
    problem = prepare_folder(run, node_rank)
    if problem:  # never train into (or resume from) another run's folder
        print(f"run {run_id}: {problem}", flush=True)
        return 1
    print(f"run {run_id}: training in {out_dir}" + ("" if node_rank is None else f" as node {node_rank}"), flush=True)
    try:
        # one node of a run over several machines: node 0 keeps the run's sink, another only its log
        sink = DatabaseSink(run_id, claim=claim, reward_hacking_guard=cfg.reward_hacking_guard,
                             eval_problems=cfg.eval_problems) if not node_rank else NodeSink()
        result = run_engine(cfg, out_dir, sink, should_stop=stop, node_rank=node_rank, master=master)
    except RankLost as exc:  # a lost attempt, not the run's error: "rank R killed by SIGNAL" and where, to the parent
        failure["message"] = str(exc)[:4000]
        try:
            print(f"run {run_id}: {exc}", flush=True)
        except OSError:  # the log's disk is full: the pipe carries it
            pass
        return EXIT_RANK_LOST
    except Exception as exc:
        # the cause first to the parent (a pipe: it reaches the run's error even when the disk under the log is
        # full), then to the log; a full disk is named as such, with the space left
        full = disk_full_message(exc, out_dir)
        cause = full or (str(exc).splitlines() or [type(exc).__name__])[0][:500]
        failure["message"] = cause
        try:
            traceback.print_exc()
            # the cause last, so the end of the log the run's error keeps says why (an engine's message may carry
            # a long tail of its own log before the traceback ends)
            print(f"run {run_id} failed: {cause}", flush=True)
            sys.stdout.flush()
        except OSError:  # the log's disk is full: the pipe carries the cause
            pass
        return EXIT_DISK_FULL if full else EXIT_FAILED
    why = f" ({stop.reason})" if stop.reason else ""
    print(f"run {run_id}: {result.status} at step {result.step}{why}", flush=True)
    return EXIT_SUCCEEDED if result.status == "succeeded" else EXIT_STOPPED


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # Everything is stored by now (autocommitted rows, closed checkpoint files). Skip the interpreter's
    # teardown, which takes seconds with torch/transformers loaded, so a killed run ends promptly.
    os._exit(code)
