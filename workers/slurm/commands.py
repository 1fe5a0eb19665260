"""The Slurm client commands Seedbed calls, their arguments built from a registered queue (``QueueSpec``) and their
answers parsed. Nothing here reads or writes the database; every command runs with the queue's ``SLURM_CONF``
and a timeout, and a command that cannot reach the controller raises ``SlurmUnreachable`` (try again later) while
one the controller refuses raises ``SlurmRefused`` with Slurm's own words (a field error on the run).

Slurm's job states (``squeue -o %T``, ``scontrol show job``: JobState) and what each means for a run: PENDING,
CONFIGURING, RUNNING, COMPLETING, SUSPENDED and REQUEUED are under way; COMPLETED, CANCELLED, FAILED, TIMEOUT,
NODE_FAIL, OUT_OF_MEMORY, PREEMPTED, BOOT_FAIL and DEADLINE are ended (``ENDED_STATES``).
"""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from typing import Optional

__all__ = ["QueueSpec", "JobState", "SlurmRefused", "SlurmUnreachable", "EXTRA_OPTION", "UNDER_WAY_STATES",
           "ENDED_STATES", "sbatch_args", "submit", "job_states", "parse_sacct", "cancel", "requeue"]

COMMAND_TIMEOUT_S = 20.0
UNDER_WAY_STATES = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED",
                              "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED"})
ENDED_STATES = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
                          "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED"})
EXTRA_OPTION = re.compile(r"^--(constraint|reservation|exclusive|gres|comment|nice|hint|licenses|begin|mail-type|"
                          r"mail-user|network|switches)(=[A-Za-z0-9_,:.@+=*|&/-]{1,200})?$")
"""The few extra ``sbatch`` options a queue may carry (staff register them): none that runs code, names a file
or changes the job's user, environment or output paths."""


class SlurmRefused(Exception):
    """The controller refused the command (an unknown partition, a QoS limit): its message says why."""


class SlurmUnreachable(Exception):
    """The command could not reach the controller (it is down or restarting): nothing was done; try again."""


@dataclass(frozen=True)
class QueueSpec:
    """What a registered Slurm queue gives a job (``webapp.runs.models.Queue``)."""

    conf: str = ""
    """The cluster's ``slurm.conf`` (SLURM_CONF for the commands; empty: the client's default)."""
    partition: str = ""
    account: str = ""
    qos: str = ""
    time_limit_min: int = 0
    """The job's time limit in minutes (0: the partition's)."""
    gpus_per_node: int = 0
    cpus_per_task: int = 0
    mem_per_node_mb: int = 0
    extra: tuple[str, ...] = field(default_factory=tuple)
    """Extra ``sbatch`` options, each matching ``EXTRA_OPTION``."""
    signal_before_s: int = 60
    """Slurm sends the batch shell SIGUSR1 this many seconds before a time limit or a preemption
    (``--signal=B:USR1@N``): the job checkpoints and exits asking to be requeued."""


@dataclass(frozen=True)
class JobState:
    """One job as ``squeue`` or ``scontrol`` reports it."""

    job_id: str
    state: str
    """Slurm's state, e.g. PENDING, RUNNING, TIMEOUT (``squeue``'s ``%T``)."""
    reason: str = ""
    """Why it pends ("Priority", "Resources", "QOSMaxJobsPerUserLimit"), or "None"."""
    nodes: str = ""
    """Its node list once it runs ("n[1-2]")."""
    exit_code: str = ""
    """``scontrol``'s ExitCode ("0:0", "1:0", "0:9": code:signal) once it ended; "" from ``squeue``."""

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES


def _env(spec: QueueSpec) -> dict:
    env = dict(os.environ)
    if spec.conf:
        env["SLURM_CONF"] = spec.conf
    return env


def _run(spec: QueueSpec, argv: list[str], *, stdin: str | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, input=stdin, env=_env(spec), capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S)
    except FileNotFoundError:
        raise SlurmUnreachable(f"{argv[0]} is not installed on this host") from None
    except subprocess.TimeoutExpired:
        raise SlurmUnreachable(f"{argv[0]} did not answer within {COMMAND_TIMEOUT_S:.0f} s") from None


_UNREACHABLE = re.compile(r"Unable to contact slurm controller|Connection refused|Socket timed out|"
                          r"Communication connection failure|Zero Bytes were transmitted", re.I)


def _raise_for(done: subprocess.CompletedProcess, what: str) -> None:
    if done.returncode == 0:
        return
    words = (done.stderr or done.stdout).strip().replace("\n", "; ")[:500] or f"exit code {done.returncode}"
    if _UNREACHABLE.search(words):
        raise SlurmUnreachable(f"{what}: {words}")
    raise SlurmRefused(f"{what}: {words}")


def sbatch_args(spec: QueueSpec, *, job_name: str, nodes: int, output: str, workdir: str) -> list[str]:
    """The ``sbatch`` command line for one run's batch job (its script comes on stdin)."""
    bad = [option for option in spec.extra if not EXTRA_OPTION.match(option)]
    if bad:
        raise SlurmRefused(f"the queue's extra sbatch options are not allowed: {', '.join(bad)}")
    args = ["sbatch", "--parsable", f"--job-name={job_name}", f"--nodes={nodes}", "--ntasks-per-node=1",
            f"--output={output}", "--open-mode=append", f"--chdir={workdir}", "--requeue", "--export=ALL",
            f"--signal=B:USR1@{spec.signal_before_s}"]
    for flag, value in (("--partition", spec.partition), ("--account", spec.account), ("--qos", spec.qos)):
        if value:
            args.append(f"{flag}={value}")
    if spec.time_limit_min:
        args.append(f"--time={spec.time_limit_min}")
    if spec.gpus_per_node:
        args.append(f"--gpus-per-node={spec.gpus_per_node}")
    if spec.cpus_per_task:
        args.append(f"--cpus-per-task={spec.cpus_per_task}")
    if spec.mem_per_node_mb:
        args.append(f"--mem={spec.mem_per_node_mb}M")
    return args + list(spec.extra)


def submit(spec: QueueSpec, script: str, *, job_name: str, nodes: int, output: str, workdir: str) -> str:
    """Submit ``script`` (a batch script's text); returns the job id. Raises ``SlurmRefused`` with sbatch's words
    ("invalid partition specified: nope") or ``SlurmUnreachable``."""
    done = _run(spec, sbatch_args(spec, job_name=job_name, nodes=nodes, output=output, workdir=workdir),
                stdin=script)
    _raise_for(done, "sbatch")
    job_id = done.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise SlurmRefused(f"sbatch: no job id in its answer {done.stdout.strip()[:200]!r}")
    return job_id


def job_states(spec: QueueSpec, job_ids: list[str]) -> dict[str, JobState]:
    """job id -> its state, for the ``job_ids`` the cluster still knows (``squeue``, then ``scontrol show job``
    for the ones squeue no longer lists: ended ones it keeps for ``MinJobAge``; then ``sacct`` where the cluster
    keeps accounting). A job it knows nothing of is absent from the answer: it vanished (purged, or the controller
    lost its state)."""
    if not job_ids:
        return {}
    done = _run(spec, ["squeue", "-h", "-a", "-j", ",".join(job_ids), "-o", "%i|%T|%r|%N"])
    if done.returncode != 0 and "Invalid job id" not in done.stderr:
        _raise_for(done, "squeue")
    found: dict[str, JobState] = {}
    for line in done.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 4 and parts[0] in job_ids:
            found[parts[0]] = JobState(parts[0], parts[1], parts[2], parts[3])
    for job_id in job_ids:
        if job_id not in found and (state := _scontrol_state(spec, job_id)) is not None:
            found[job_id] = state
    missing = [job_id for job_id in job_ids if job_id not in found]
    if missing:  # ended longer ago than the controller remembers: the accounting database, where there is one
        done = _run(spec, ["sacct", "-n", "-P", "-X", "-j", ",".join(missing), "-o",
                           "JobIDRaw,State,ExitCode,NodeList,Reason"])
        if done.returncode == 0:
            found.update({job.job_id: job for job in parse_sacct(done.stdout) if job.job_id in missing})
    return found


def parse_sacct(text: str) -> list[JobState]:
    """The jobs of ``sacct -n -P -X -o JobIDRaw,State,ExitCode,NodeList,Reason`` (its state's first word: "CANCELLED
    by 0" is CANCELLED).

    >>> parse_sacct("12|CANCELLED by 0|0:15|n1|None\\n13|TIMEOUT|0:0|n[1-2]|TimeLimit\\n")[0]
    JobState(job_id='12', state='CANCELLED', reason='None', nodes='n1', exit_code='0:15')
    """
    jobs = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 5 and parts[0].isdigit() and parts[1]:
            jobs.append(JobState(parts[0], parts[1].split()[0], parts[4], parts[3], parts[2]))
    return jobs


def _scontrol_state(spec: QueueSpec, job_id: str) -> Optional[JobState]:
    done = _run(spec, ["scontrol", "-o", "show", "job", job_id])
    if done.returncode != 0:
        if "Invalid job id" in (done.stderr + done.stdout):
            return None
        _raise_for(done, "scontrol")
    fields = dict(item.split("=", 1) for item in done.stdout.split() if "=" in item)
    if "JobState" not in fields:
        return None
    return JobState(job_id, fields["JobState"], fields.get("Reason", ""), fields.get("NodeList", ""),
                    fields.get("ExitCode", ""))


def cancel(spec: QueueSpec, job_id: str, *, signal: str = "") -> None:
    """``scancel`` the job, or with ``signal`` only signal it: every process of it, its batch shell included
    (``--full``)."""
    argv = ["scancel"] + ([f"--signal={signal}", "--full"] if signal else []) + [job_id]
    done = _run(spec, argv)
    if done.returncode != 0 and "Invalid job id" not in done.stderr and "already completing" not in done.stderr:
        _raise_for(done, "scancel")


def requeue(spec: QueueSpec, job_id: str) -> None:
    """``scontrol requeue`` the job (it goes back to pending; its batch script starts again)."""
    _raise_for(_run(spec, ["scontrol", "requeue", job_id]), "scontrol requeue")
