"""How the worker reads a training process's end: a signal it did not ask for is "signaled" (a lost attempt,
restarted; runs.services.run_record_exit), the error names the signal first, says for SIGKILL whether the kernel
recorded an out-of-memory kill while it ran and the run's peak RSS, and carries no progress bars."""
from __future__ import annotations

import signal

import pytest

from workers import exits
from workers.runner import EXIT_FAILED, EXIT_STOPPED, EXIT_SUCCEEDED


@pytest.mark.parametrize("code, outcome", [
    (EXIT_SUCCEEDED, "succeeded"), (EXIT_STOPPED, "stopped"), (EXIT_FAILED, "failed"), (2, "failed"),
    (-signal.SIGKILL, "signaled"), (-signal.SIGSEGV, "signaled"), (-signal.SIGBUS, "signaled"),
])
def test_the_exit_code_says_how_the_training_process_ended(code, outcome):
    from workers.tasks import exit_outcome

    assert exit_outcome(code) == outcome


def fake_kernel(root, *, vmstat=None, v1=None, v2=None, cgroup_path="/seedbed/worker"):
    """/proc and /sys/fs/cgroup files under ``root`` with these oom_kill counts (None: no such file)."""
    (root / "proc/self").mkdir(parents=True, exist_ok=True)
    if vmstat is not None:
        (root / "proc/vmstat").write_text(f"nr_free_pages 1\noom_kill {vmstat}\npgfault 3\n")
    lines = []
    if v1 is not None:
        lines.append(f"4:memory:{cgroup_path}")
        folder = root / "sys/fs/cgroup/memory" / cgroup_path.lstrip("/")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "memory.oom_control").write_text(f"oom_kill_disable 0\nunder_oom 0\noom_kill {v1}\n")
    if v2 is not None:
        lines.append(f"0::{cgroup_path}")
        folder = root / "sys/fs/cgroup" / cgroup_path.lstrip("/")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "memory.events").write_text(f"low 0\nhigh 0\nmax 4\noom 2\noom_kill {v2}\n")
    (root / "proc/self/cgroup").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("where", ["v1", "v2"])
def test_the_kernels_oom_kill_counters_are_read_where_readable(tmp_path, where):
    fake_kernel(tmp_path, vmstat=7, **{where: 3})
    assert exits.oom_kills(str(tmp_path)) == {"vmstat": 7, "cgroup": 3}
    empty = tmp_path / "nothing"
    empty.mkdir()
    assert exits.oom_kills(str(empty)) == {}


def test_a_sigkill_with_an_oom_kill_recorded_meanwhile_says_out_of_memory_with_the_peak_rss(tmp_path):
    fake_kernel(tmp_path, vmstat=0, v2=0)
    before = exits.oom_kills(str(tmp_path))
    fake_kernel(tmp_path, vmstat=0, v2=1)  # the cgroup's OOM killer acted while the process ran
    line = exits.signal_line(-signal.SIGKILL, before, exits.oom_kills(str(tmp_path)), 812.4)
    assert line == ("training process killed by SIGKILL (out of memory? the kernel recorded 1 out-of-memory "
                    "kill(s) (cgroup) while it ran; peak RSS 812 MB)")
    unreadable = exits.signal_line(-signal.SIGKILL, {}, {}, None)
    assert unreadable.startswith("training process killed by SIGKILL (out of memory? the kernel's out-of-memory "
                                 "record is not readable here; no memory use reported yet")
    none = exits.signal_line(-signal.SIGKILL, before, before, 90.0)
    assert "not the kernel's out-of-memory killer" in none and "peak RSS 90 MB" in none
    assert exits.signal_line(-signal.SIGBUS, before, before, 90.0) == "training process killed by SIGBUS"


def test_the_log_tail_of_an_error_leaves_progress_bars_out(tmp_path):
    log = tmp_path / "worker.log"
    bar = "".join(f"\rLoading weights: {p:3d}%|{'█' * (p // 10)}{' ' * (10 - p // 10)}| {p}/100 [00:01<00:00, "
                  f"95.1it/s]" for p in range(0, 101, 5))
    log.write_text("run 7: training in /x\nstep 1 reward 0.2\n" + bar + "\n"
                   + "Generating: 100%|##########| 40/40 [00:02<00:00, 17.2it/s]\n\n"
                   + "  3/40 [00:01<00:12,  2.91s/it]\nstep 2 reward 0.3\n")
    assert exits.log_tail(log) == "run 7: training in /x\nstep 1 reward 0.2\nstep 2 reward 0.3"
    assert exits.log_tail(tmp_path / "missing.log") == ""


@pytest.mark.django_db
def test_the_error_of_a_signalled_child_names_the_signal_first_with_the_runs_peak_rss(tmp_path):
    import os

    from webapp.projects.services import default_project
    from webapp.runs.models import MetricPoint, Run
    from workers.tasks import ForkedChild, signal_detail

    run = Run.objects.create(project=default_project(), config={}, seed=0)
    MetricPoint.objects.bulk_create([MetricPoint(run=run, step=s, key="system/rss_mb", value=v)
                                     for s, v in ((1, 300.0), (2, 512.4), (3, 480.0))])
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # a training child that reports a cause through its pipe, then is SIGKILLed
        os.setsid()
        os.close(read_fd)
        os.write(write_fd, b"no space left on device\n")
        os.kill(os.getpid(), signal.SIGKILL)
    os.close(write_fd)
    child = ForkedChild(pid, read_fd)
    assert child.wait(timeout=30) == -signal.SIGKILL
    log = tmp_path / "worker.log"
    log.write_text("run 1: training in /x\nLoading weights: 100%|##########| 12/12 [00:00<00:00, 3.1it/s]\n")
    detail = signal_detail(run.pk, child, log, exits.oom_kills())
    first, *rest = detail.splitlines()
    assert first.startswith("training process killed by SIGKILL (") and first.endswith("peak RSS 512 MB)")
    assert rest == ["no space left on device", "run 1: training in /x"]
    assert child.report_fd is None  # the pipe's read end is closed
