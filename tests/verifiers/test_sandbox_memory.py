"""One memory bound per sandboxed execution: the program and everything it forks share ``memory_mb`` (a memory
cgroup per run where the machine has a writable one, else ``memory_mb`` divided among the processes), and
``max_processes`` is bounded. On b1d04b3 ``memory_mb`` was an RLIMIT_AS per process: six children of 120 MB each
all held their memory at ``memory_mb: 256`` (830 MB together)."""
import json
import os
import subprocess
import textwrap
import time

import pytest

from training.verifiers import get_verifier
from training.verifiers.sandbox import TESTS_USER, SandboxServerProcess, probe_bwrap, sandbox_ids
from training.verifiers.sandbox_cgroup import ServerCgroup, memory_cgroup_base

# Six children each write 120 MB (touched, not only mapped), say so on a pipe and sleep; after 2 s the parent
# counts how many said so and how many of those are still alive, holding their 120 MB together.
SIX_CHILDREN = textwrap.dedent("""
    ```python
    import os, time

    def held():
        r, w = os.pipe()
        kids = []
        for _ in range(6):
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                try:
                    block = b"x" * (120 << 20)
                    os.write(w, b"1")
                    time.sleep(4)
                finally:
                    os._exit(0)
            kids.append(pid)
        time.sleep(2.0)
        os.set_blocking(r, False)
        try:
            said = len(os.read(r, 100))
        except BlockingIOError:
            said = 0
        alive = sum(os.waitpid(pid, os.WNOHANG) == (0, 0) for pid in kids)
        return [said, alive]
    ```
""")
EXAMPLE = {"entry_point": "held", "inputs": [[]], "outputs": [[0, 0]]}


def held_together(details: dict) -> int:
    """How many children held 120 MB at the end together (from the program's own answer)."""
    got = details["first_failure"]
    assert got and "got [" in got, details
    said, alive = json.loads(got[got.index("got ") + 4:])
    return min(said, alive)


def test_a_program_and_all_it_forks_stay_within_one_memory_mb():
    v = get_verifier("code", timeout_s=6, memory_mb=256, max_processes=16, cache_size=0, processes=1)
    result = v(SIX_CHILDREN, EXAMPLE)
    # b1d04b3: 6 (each child had its own 192 MB of address space): 720 MB held at memory_mb 256
    assert held_together(result.details) * 120 <= 256, result.details
    layers = result.details["layers"]
    if memory_cgroup_base() is not None and os.geteuid() == 0:  # this machine: cgroup v1, writable by root
        assert layers["memory_cgroup"] in ("cgroup v1", "cgroup v2"), layers
        peak = result.details["memory_peak_mb"]
        assert 120 <= peak["program"] <= 256 + 1, peak  # measured by the cgroup: the whole tree's peak
        assert peak["tests"] < 256, peak


def test_without_a_memory_cgroup_memory_mb_is_divided_among_the_processes():
    """A server given no cgroup (as where none is writable) says so in its layers and bounds each process by
    memory_mb / processes, the processes lowered so that each has 128 MB: at memory_mb 256 (192 MB of address
    space besides the 64 MB /tmp) the program may not fork, and holds no child's 120 MB."""
    uid, gid = sandbox_ids()
    bwrap = probe_bwrap()["works"]
    command = SandboxServerProcess.command(uid, gid, sandbox_ids(TESTS_USER), bwrap, 64, None)
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={"PATH": "/usr/bin:/bin"},
                            start_new_session=True)
    try:
        hello = json.loads(proc.stdout.readline())
        assert hello["layers"]["memory_cgroup"] is None
        assert hello["layers"]["memory_bound"].startswith("address space per process: memory_mb / max_processes")
        request = {"id": 1, "code": "import os\ndef forks():\n    try:\n        pid = os.fork()\n    except OSError as e:"
                   "\n        return type(e).__name__\n    if pid == 0:\n        os._exit(0)\n    return 'forked'\n",
                   "setup": "", "program_names": ["forks"], "entry_point": None,
                   "steps": [{"kind": "call", "entry": "forks", "args": []}], "timeout_s": 3, "memory_mb": 256,
                   "max_output_kb": 64, "max_processes": 16, "max_report_kb": 64}
        proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        reply = json.loads(proc.stdout.readline())
        assert reply["memory_peak_mb"] is None
        report = json.loads(reply["reports"].splitlines()[-1])
        assert report["value"] == "BlockingIOError", reply  # RLIMIT_NPROC 1: one process of 192 MB
    finally:
        proc.kill()
        proc.wait()


def test_one_pair_of_cgroups_serves_every_run_and_goes_with_its_server():
    folder = ServerCgroup.make()
    if os.geteuid() != 0 or memory_cgroup_base() is None:  # none writable: the servers are given none
        assert folder is None
        return
    assert os.path.isdir(folder.path)
    os.mkdir(os.path.join(folder.path, "run-7-program"))  # what a server killed mid-run leaves
    folder.remove()
    assert not os.path.exists(folder.path)
    v = get_verifier("code", timeout_s=6, memory_mb=320, max_processes=16, cache_size=0, processes=1)
    first = v(SIX_CHILDREN, EXAMPLE)
    assert first.details["memory_peak_mb"]["program"] > 200, first.details
    server = next(w for w in v.sandbox.pool._workers if w.ready)
    # cgroup v1: one pair for all the server's runs, left empty by each run's kill, its peak reset per run
    second = v("```python\nx = 1\n```", {"tests": "assert x == 1"})
    assert second.score == 1.0 and second.details["memory_peak_mb"]["program"] < 100, second.details
    assert sorted(name for name in os.listdir(server.cgroup.path) if not name.startswith("cgroup.")
                  and os.path.isdir(os.path.join(server.cgroup.path, name))) == ["program", "tests"]
    for name in ("program", "tests"):  # between runs: at most the next run's process, waiting and still root
        with open(os.path.join(server.cgroup.path, name, "cgroup.procs")) as f:
            pids = f.read().split()
        assert len(pids) <= 1, (name, pids)
        for pid in pids:
            with open(f"/proc/{pid}/status") as f:
                assert [line.split()[1] for line in f if line.startswith("Uid:")] == ["0"], (name, pid)
    path = server.cgroup.path
    v.sandbox.close()  # (its own: no other test uses these limits)
    assert not os.path.exists(path)


def test_max_processes_is_bounded():
    from training.config import TrainConfig
    from training.fields import FieldErrors

    with pytest.raises(ValueError, match=r"max_processes must lie in \[1, 64\]; got 1024"):
        get_verifier("code", max_processes=1024)
    with pytest.raises(FieldErrors) as info:
        TrainConfig.from_dict({"rewards": [{"name": "code", "params": {"max_processes": 65}}]}, check_paths=False)
    assert "max_processes must lie in [1, 64]; got 65" in info.value.errors["rewards"]


def test_the_doctor_names_the_memory_bound():
    from workers.doctor import check_code_verifier

    finding = check_code_verifier()
    assert finding.ok, finding
    if memory_cgroup_base() is not None and os.geteuid() == 0:
        assert finding.found.endswith("memory bound: cgroup v1)") or finding.found.endswith("memory bound: cgroup v2)")
    else:
        assert finding.found.endswith("memory bound: no memory cgroup: memory_mb / max_processes a process)")
