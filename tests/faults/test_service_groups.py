"""Each service of ``./seedbed up`` is its whole process group: a service whose main process is SIGKILLed is
started again only once what it left behind (the maintenance worker's embedded beat, a pool slot, a gunicorn
worker) is gone, so at most one beat ever runs; ``./seedbed down`` leaves no process of its $SEEDBED_HOME; and a
full disk under $SEEDBED_HOME (services.json and supervisor.log unwritable) does not stop the supervisor.

A real ``./seedbed up`` on a fresh $SEEDBED_HOME on a tmpfs of its own (root only: mount; 2.3 GB, the doctor wants
2 GiB free, filled with zeros for the full-disk part), a port and a
Redis of its own."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, as_from_a_terminal, wait_for
from tests.faults.conftest import free_port, process_alive
from tests.faults.test_supervisor import serves, services_state

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs (root only)")


def processes_of(home: Path) -> list[tuple[int, int, str]]:
    """(pid, process group, command line) of every live process whose environment has SEEDBED_HOME=home or
    that works in it (the Redis ``up`` starts)."""
    want = f"SEEDBED_HOME={home}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if want not in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0") and \
                    not os.readlink(f"/proc/{entry}/cwd").startswith(str(home)):
                continue
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z":
            found.append((int(entry), int(fields[2]), cmdline))
    return found


def beats(home: Path) -> list[int]:
    """The embedded beats: a ``celery worker -B`` process that is not its group's leader (the worker's main
    process is; its beat is a forked child of the same command line)."""
    return [pid for pid, pgid, cmd in processes_of(home) if " -B " in f"{cmd} " and pid != pgid]


def service(home: Path, prefix: str) -> dict:
    """The service's entry in services.json ({"pid": 0, "restarts": -1} while unreadable)."""
    state = services_state(home) or {"services": []}
    return next((s for s in state["services"] if s["name"].startswith(prefix)), {"pid": 0, "restarts": -1})


def test_each_service_is_its_process_group_and_a_full_disk_spares_the_supervisor(tmp_path, tiny_model_dir):
    home, port, redis_port = tmp_path / "home", free_port(), free_port()
    home.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2300m", "tmpfs", str(home)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL")}
    env.update({"SEEDBED_HOME": str(home), "SEEDBED_PORT": str(port), "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
                "SEEDBED_DEMO": "0", "SEEDBED_TINY_MODEL": tiny_model_dir, "SEEDBED_CPU_SLOTS": "1"})
    log = open(tmp_path / "up.log", "w")
    most_beats, sampling = [0], threading.Event()

    def sample_beats():
        while not sampling.wait(0.2):
            most_beats[0] = max(most_beats[0], len(beats(home)))

    sampler = threading.Thread(target=sample_beats, daemon=True)
    up = None
    try:
        up = subprocess.Popen(["./seedbed", "up"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True, preexec_fn=as_from_a_terminal)
        # "ready" said: up has finished starting (a web server dying before that ends up, by design, rather
        # than being supervised)
        wait_for(lambda: (s := services_state(home)) and len(s["services"]) == 3 and serves(port)
                 and "ready in" in (tmp_path / "up.log").read_text(errors="replace"),
                 timeout=300, what="./seedbed up to serve", every=1)
        wait_for(lambda: len(beats(home)) == 1, timeout=120, what="the maintenance worker's beat to start", every=0.5)
        sampler.start()
        timings = {}
        # each service's main process SIGKILLed three times: it is started again, and its group with it
        for prefix in ("web", "worker", "beat"):
            for k in range(3):
                before = wait_for(lambda: (s := service(home, prefix))["pid"] and s["restarts"] == k
                                  and process_alive(s["pid"]) and s, timeout=120, every=0.5,
                                  what=f"{prefix} to be running (restart {k})")
                if prefix == "beat":  # its beat has started (the one that would be orphaned)
                    wait_for(lambda: len(beats(home)) == 1, timeout=120, every=0.5, what="the beat to start")
                killed_at = time.monotonic()
                os.kill(before["pid"], signal.SIGKILL)
                after = wait_for(lambda: (s := service(home, prefix))["restarts"] == k + 1 and s["pid"]
                                 and s["pid"] != before["pid"] and process_alive(s["pid"]) and s,
                                 timeout=120, every=0.5, what=f"{prefix} to be started again")
                timings.setdefault(prefix, []).append(round(time.monotonic() - killed_at, 1))
                # nothing of the killed service's group is left
                assert not [p for p, g, _ in processes_of(home) if g == before["pid"]], (prefix, k)
                assert after["pid"] != before["pid"]
        assert serves(port)
        wait_for(lambda: len(beats(home)) == 1, timeout=120, every=0.5, what="one beat running again")
        assert most_beats[0] == 1, f"{most_beats[0]} beats ran at once"

        # the disk under $SEEDBED_HOME fills up: the supervisor can write neither services.json nor its log, and
        # goes on supervising (a killed worker is started again)
        worker = service(home, "worker")
        subprocess.run(["dd", "if=/dev/zero", f"of={home}/filler", "bs=1M"], capture_output=True)
        os.kill(worker["pid"], signal.SIGKILL)

        def worker_main_pids():
            return [p for p, g, cmd in processes_of(home) if p == g and "-Q cpu" in cmd]

        wait_for(lambda: (pids := worker_main_pids()) and pids != [worker["pid"]], timeout=120, every=0.5,
                 what="the worker to be started again on a full disk")
        assert up.poll() is None, "the supervisor exited on a full disk"
        (home / "filler").unlink()  # space is back: the status page's state is written again
        wait_for(lambda: (s := services_state(home)) and service(home, "worker")["restarts"] == 4
                 and service(home, "worker")["pid"] in worker_main_pids(), timeout=60, every=0.5,
                 what="services.json to be written again once space is back")
        assert up.poll() is None and serves(port)
    finally:
        sampling.set()
        try:
            down_at = time.monotonic()
            down = subprocess.run(["./seedbed", "down"], cwd=REPO, env=env, capture_output=True, text=True,
                                  timeout=200)
            if up is not None:
                up.wait(timeout=120)
            down_s = time.monotonic() - down_at
            # (`up` is this test's child and exits before the test reaps it: down must not wait on the zombie)
            assert down.returncode == 0 and "stopped" in down.stderr, down.stderr[-2000:]
            # no process of this $SEEDBED_HOME is left: not a service, not a beat, not a child of either
            wait_for(lambda: not processes_of(home), timeout=60, every=0.5,
                     what="every process of this $SEEDBED_HOME to be gone")
        finally:
            for pid, _, _ in processes_of(home):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if up is not None and up.poll() is None:
                os.killpg(up.pid, signal.SIGKILL)
            log.close()
            wait_for(lambda: subprocess.run(["umount", str(home)], capture_output=True).returncode == 0,
                     timeout=60, every=1, what=f"{home} to be unmounted")
    print(f"\nfault: each service's main process SIGKILLed 3 times -> running again after (s) {timings}; "
          f"at most {most_beats[0]} beat at once; 0 processes left after down ({down_s:.0f} s)")
