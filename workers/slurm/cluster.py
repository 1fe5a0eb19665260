"""A whole Slurm cluster on this machine: munge, one controller and two nodes (``n1``, ``n2``), its files under
``$SEEDBED_HOME/slurm`` (``./seedbed slurm start`` / ``stop``; the tests' Slurm cluster).

Debian's ``slurm-wlm`` and ``munge`` run it without cgroups or systemd: a munge key owned by ``munge`` (mode 0400,
``mungekey -c``) and ``munged`` started as that user; one ``slurm.conf`` with ``SlurmctldHost`` = this host,
``AuthType=auth/munge``, ``ProctrackType=proctrack/linuxproc``, ``TaskPlugin=task/none``,
``SelectType=select/cons_tres``; two ``NodeName`` lines with ``NodeHostname`` = this host, ``NodeAddr=127.0.0.1``,
a port each and ``NODE_CPUS`` CPU each; ``slurmd -N n1`` and ``slurmd -N n2`` (``%n`` in their pid, log and spool
paths). The ports are free ones chosen at the first start and kept in ``ports.json``, so the controller restarts on
the same ones and its state (``state/``) survives a restart: jobs queued while it was down are still there.

    python -m workers.slurm.cluster start|stop|status|conf   (prints the slurm.conf path on start and conf)
"""
from __future__ import annotations

import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from workers.broker import seedbed_home

__all__ = ["NODES", "NODE_CPUS", "PARTITION", "folder", "conf_path", "start", "stop", "status", "start_controller",
           "stop_controller"]

NODES = ("n1", "n2")
NODE_CPUS = 1
PARTITION = "debug"
MUNGE_SOCKET_DIR = Path("/run/munge")
MUNGE_KEY = Path("/etc/munge/munge.key")
START_TIMEOUT_S = 30.0


def folder(home: Path | None = None) -> Path:
    return (home or seedbed_home()) / "slurm"


def conf_path(home: Path | None = None) -> Path:
    return folder(home) / "slurm.conf"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ports(base: Path) -> dict:
    path = base / "ports.json"
    if path.exists():
        return json.loads(path.read_text())
    ports = {"ctld": _free_port(), **{node: _free_port() for node in NODES}}
    path.write_text(json.dumps(ports))
    return ports


def _node_memory_mb() -> int:
    with open("/proc/meminfo", encoding="ascii") as fh:
        total_kb = next(int(line.split()[1]) for line in fh if line.startswith("MemTotal:"))
    return max(512, total_kb // 1024 // (2 * len(NODES)))


def write_conf(base: Path) -> Path:
    """The cluster's ``slurm.conf`` (its folders made); returns its path."""
    for sub in ("state", "log", "spool"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    ports, host, memory = _ports(base), socket.gethostname(), _node_memory_mb()
    lines = [
        "ClusterName=seedbed", f"SlurmctldHost={host}(127.0.0.1)", f"SlurmctldPort={ports['ctld']}",
        "AuthType=auth/munge", "CredType=cred/munge", "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU_Memory", "SlurmUser=root", "SlurmdUser=root",
        f"StateSaveLocation={base}/state", f"SlurmdSpoolDir={base}/spool/%n",
        f"SlurmctldPidFile={base}/slurmctld.pid", f"SlurmdPidFile={base}/slurmd-%n.pid",
        f"SlurmctldLogFile={base}/log/slurmctld.log", f"SlurmdLogFile={base}/log/slurmd-%n.log",
        "ReturnToService=2", "MpiDefault=none", "SchedulerType=sched/backfill", "JobCompType=jobcomp/none",
        "AccountingStorageType=accounting_storage/none", "JobAcctGatherType=jobacct_gather/none",
        "SlurmdParameters=config_overrides", "InactiveLimit=0", "KillWait=5", "MinJobAge=300",
        "SlurmctldTimeout=60", "SlurmdTimeout=60", "MessageTimeout=10",
        # a requeued job may start again 10 s later (Slurm's default: 120); the scheduler looks every 5 s
        "AuthInfo=cred_expire=10", "SchedulerParameters=sched_interval=5,bf_interval=5",
        *[f"NodeName={node} NodeHostname={host} NodeAddr=127.0.0.1 Port={ports[node]} CPUs={NODE_CPUS} "
          f"RealMemory={memory} State=UNKNOWN" for node in NODES],
        f"PartitionName={PARTITION} Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE State=UP",
    ]
    path = base / "slurm.conf"
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o644)
    return path


def _munge_works() -> bool:
    try:
        made = subprocess.run(["munge", "-n"], capture_output=True, timeout=5)
        return made.returncode == 0 and subprocess.run(["unmunge"], input=made.stdout, capture_output=True,
                                                       timeout=5).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def ensure_munge() -> None:
    """munged running as ``munge`` with its key (made once with ``mungekey -c``); raises RuntimeError saying what
    is missing where it cannot be done here (not root, packages missing)."""
    if _munge_works():
        return
    if os.geteuid() != 0:
        raise RuntimeError("munged is not running and starting it needs root (the munge package's daemon)")
    try:
        munge = pwd.getpwnam("munge")
    except KeyError:
        raise RuntimeError("no user munge: install Debian's munge package (./seedbed setup does)") from None
    if not MUNGE_KEY.exists():
        subprocess.run(["runuser", "-u", "munge", "--", "mungekey", "-c", "-k", str(MUNGE_KEY)], check=True)
    os.chown(MUNGE_KEY, munge.pw_uid, munge.pw_gid)
    MUNGE_KEY.chmod(0o400)
    MUNGE_SOCKET_DIR.mkdir(mode=0o755, exist_ok=True)
    # munged refuses a socket directory others cannot enter ("execute permissions for all required"): one left
    # 0700 (by a package's script or a tmpfiles rule) is opened up, whoever made it
    MUNGE_SOCKET_DIR.chmod(0o755)
    os.chown(MUNGE_SOCKET_DIR, munge.pw_uid, munge.pw_gid)
    subprocess.run(["runuser", "-u", "munge", "--", "munged"], check=True)
    for _ in range(50):
        if _munge_works():
            return
        time.sleep(0.1)
    raise RuntimeError("munged started but does not answer (see /var/log/munge/munged.log)")


def _env(base: Path) -> dict:
    return {**os.environ, "SLURM_CONF": str(base / "slurm.conf")}


def _pid(path: Path) -> int | None:
    try:
        pid = int(path.read_text().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def start_controller(home: Path | None = None) -> None:
    base = folder(home)
    if _pid(base / "slurmctld.pid") is None:
        subprocess.run(["slurmctld", "-i"], env=_env(base), check=True)


def stop_controller(home: Path | None = None, timeout_s: float = 15.0) -> None:
    _stop_pidfile(folder(home) / "slurmctld.pid", timeout_s)


def _stop_pidfile(path: Path, timeout_s: float) -> None:
    pid = _pid(path)
    if pid is None:
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _pid(path) == pid:
        time.sleep(0.1)
    if _pid(path) == pid:
        os.kill(pid, signal.SIGKILL)


def status(home: Path | None = None) -> dict[str, str]:
    """Node -> its state as ``sinfo`` says it ("idle", "alloc", "down*"); {} when the controller does not answer."""
    base = folder(home)
    try:
        done = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], env=_env(base), capture_output=True, text=True,
                              timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if done.returncode != 0:
        return {}
    return dict(line.split(None, 1) for line in done.stdout.splitlines() if line.strip())


def start(home: Path | None = None) -> Path:
    """Bring the cluster up (what is already up stays) and wait until both nodes are idle; returns the conf path."""
    base = folder(home)
    base.mkdir(parents=True, exist_ok=True)
    base.chmod(0o755)  # the Slurm daemons and client commands read slurm.conf
    path = write_conf(base)
    ensure_munge()
    start_controller(home)
    for node in NODES:
        if _pid(base / f"slurmd-{node}.pid") is None:
            subprocess.run(["slurmd", "-N", node], env=_env(base), check=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        states = status(home)
        if all(states.get(node, "").rstrip("*~#") in ("idle", "mixed", "allocated", "alloc") for node in NODES):
            return path
        time.sleep(0.5)
    raise RuntimeError(f"the Slurm nodes are not up after {START_TIMEOUT_S:.0f} s: {status(home) or 'no answer'} "
                       f"(see {base / 'log'})")


def stop(home: Path | None = None) -> None:
    """Cancel its jobs, then stop the nodes and the controller (munged stays: it serves every cluster of this
    machine). A job left running would outlive its node's slurmd."""
    base = folder(home)
    _cancel_all(base)
    for node in NODES:
        _stop_pidfile(base / f"slurmd-{node}.pid", 15.0)
    stop_controller(home)


def _cancel_all(base: Path, timeout_s: float = 20.0) -> None:
    try:
        listed = subprocess.run(["squeue", "-h", "-o", "%i"], env=_env(base), capture_output=True, text=True,
                                timeout=10)
        jobs = listed.stdout.split() if listed.returncode == 0 else []
        if not jobs:
            return
        subprocess.run(["scancel", *jobs], env=_env(base), capture_output=True, timeout=10)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            left = subprocess.run(["squeue", "-h", "-o", "%i"], env=_env(base), capture_output=True, text=True,
                                  timeout=10)
            if left.returncode != 0 or not left.stdout.split():
                return
            time.sleep(0.5)
    except (OSError, subprocess.TimeoutExpired):
        pass


def main(argv: list[str]) -> int:
    what = argv[0] if argv else ""
    if what == "start":
        print(start())
    elif what == "stop":
        stop()
    elif what == "status":
        print(json.dumps(status()))
    elif what == "conf":
        print(conf_path())
    else:
        print("usage: python -m workers.slurm.cluster start|stop|status|conf", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        print(f"slurm: {exc}", file=sys.stderr)
        sys.exit(1)
