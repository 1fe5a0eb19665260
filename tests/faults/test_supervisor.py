"""`./seedbed up` supervises its services: one that is killed is started again (with the restart on the /status
page's services.json and in logs/supervisor.log) and a run launched afterwards trains; Ctrl-C still stops every process it started. A real `./seedbed up` on a fresh $SEEDBED_HOME (SQLite), a port and a Redis of its own.

It serves on 0.0.0.0 (every address), so its one plain-HTTP warning is checked on a real ``up``; the Redis it starts
requires the password kept in $SEEDBED_HOME/redis_password, which the run launched here is given."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request


from tests.conftest import REPO, as_from_a_terminal, wait_for
from tests.faults.conftest import free_port, process_alive


def serves(port: int) -> bool:
    try:
        return b"Log in" in urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=5).read()
    except OSError:  # refused, reset or timed out while it starts
        return False


def services_state(home):
    try:
        return json.loads((home / "services.json").read_text())
    except (OSError, ValueError):
        return None


def test_a_killed_service_is_restarted_and_ctrl_c_stops_everything(tmp_path, tiny_model_dir):
    home, port, redis_port = tmp_path / "home", free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL")}
    env.update({"SEEDBED_HOME": str(home), "SEEDBED_PORT": str(port), "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
                "SEEDBED_DEMO": "0", "SEEDBED_TINY_MODEL": tiny_model_dir, "SEEDBED_CPU_SLOTS": "1",
                "SEEDBED_HOST": "0.0.0.0"})
    log = open(tmp_path / "up.log", "w")
    up = subprocess.Popen(["./seedbed", "up"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                          start_new_session=True, preexec_fn=as_from_a_terminal, umask=0o022)
    try:
        wait_for(lambda: (s := services_state(home)) and len(s["services"]) == 3 and serves(port),
                 timeout=300, what="./seedbed up to serve", every=1)
        # what up and its services write is this account's alone, whatever the shell's umask (022 here)
        modes = {str(p.relative_to(tmp_path)): f"{p.stat().st_mode & 0o777:04o}" for p in
                 [home, home / "logs", home / "services.json", *(home / "logs").glob("*.log")]}
        assert len(modes) >= 6 and all(int(m, 8) & 0o077 == 0 for m in modes.values()), modes
        warning = f"warning: serving plain HTTP on 0.0.0.0:{port}, not a loopback address"
        assert (tmp_path / "up.log").read_text().count(warning) == 1
        assert (home / "logs" / "supervisor.log").read_text().count(warning) == 1
        password = redis_password_of(home, redis_port)
        before = {s["name"]: s for s in services_state(home)["services"]}
        worker = next(s for name, s in before.items() if name.startswith("worker"))
        killed_at = time.monotonic()
        os.killpg(worker["pid"], signal.SIGKILL)
        wait_for(lambda: next(s for s in services_state(home)["services"] if s["name"] == worker["name"])
                 ["restarts"] == 1, timeout=60, what="the supervisor to notice", every=0.5)
        after = wait_for(lambda: next((s for s in services_state(home)["services"]
                                       if s["name"] == worker["name"] and s["pid"]), None),
                         timeout=60, what="the worker to be started again", every=0.5)
        restarted_s = time.monotonic() - killed_at
        assert after["pid"] != worker["pid"] and process_alive(after["pid"])
        assert "exit code" in after["last_exit"]
        assert f"{worker['name']} exited" in (home / "logs" / "supervisor.log").read_text()
        # the others were left alone
        for name, s in before.items():
            if name != worker["name"]:
                assert process_alive(s["pid"]), name
        # and training goes on: a run launched now succeeds on the restarted worker
        launch = subprocess.run([str(REPO / ".venv/bin/python"), "-c",
                                 "import django; django.setup(); from webapp.runs import services; "
                                 "print(services.run_create(config={'total_steps': 3, 'prompts_per_step': 2, "
                                 "'group_size': 2, 'max_new_tokens': 4}).pk)"],
                                cwd=REPO, env={**env, "DJANGO_SETTINGS_MODULE": "webapp.settings",
                                               "CELERY_BROKER_URL": f"redis://:{password}@127.0.0.1:{redis_port}/0"},
                                capture_output=True, text=True, timeout=120)
        assert launch.returncode == 0, launch.stderr
        run_id = int(launch.stdout.split()[-1])
        status = subprocess.run([str(REPO / ".venv/bin/python"), "-c",
                                 "import django, time; django.setup(); from webapp.runs.models import Run\n"
                                 f"for _ in range(600):\n"
                                 f"    s = Run.objects.get(pk={run_id}).status\n"
                                 f"    if s in ('succeeded', 'failed', 'lost'): break\n"
                                 f"    time.sleep(0.5)\n"
                                 f"print(s)"],
                                cwd=REPO, env={**env, "DJANGO_SETTINGS_MODULE": "webapp.settings"},
                                capture_output=True, text=True, timeout=320)
        assert status.stdout.strip() == "succeeded", (status.stdout, status.stderr)
        web_down_s = crash_repeatedly(home, "web server", 6, back=lambda since: serves(port))
        maintenance_down_s = crash_repeatedly(home, "beat + maintenance", 5,
                                              back=lambda since: maintenance_pass_after(home, since))
        # a web server or maintenance worker that crashes again and again is restarted within 2 s each time
        # (1 s, then 2 s: WEB_BACKOFF_MAX_S, MAINTENANCE_BACKOFF_MAX_S), not after 4, 8, 16, 30 s
        assert restart_delays(home, "web server") == [1, 2, 2, 2, 2, 2]
        assert restart_delays(home, "beat + maintenance") == [1, 2, 2, 2, 2]
        assert web_down_s < 12 and maintenance_down_s < 14, (web_down_s, maintenance_down_s)
        pids = [s["pid"] for s in services_state(home)["services"]]
    finally:
        up.send_signal(signal.SIGINT)  # Ctrl-C
        try:
            up.wait(timeout=120)
        finally:
            if up.poll() is None:
                os.killpg(up.pid, signal.SIGKILL)
            log.close()
    assert not any(process_alive(pid) for pid in pids)
    assert not (home / "services.json").exists() and not (home / "up.pid").exists()
    print(f"\nfault: ./seedbed up's worker SIGKILLed -> running again {restarted_s:.1f} s later; web server "
          f"SIGKILLed 6 times in a row -> serving again {web_down_s:.1f} s after the last; maintenance worker 5 "
          f"times -> a pass {maintenance_down_s:.1f} s after the last")


def redis_password_of(home, redis_port: int) -> str:
    """The password of the Redis ``up`` started (0600 in $SEEDBED_HOME/redis_password), after checking that a client
    without it is refused (NOAUTH) and that no process's command line shows it."""
    import socket
    from pathlib import Path

    path = home / "redis_password"
    assert path.stat().st_mode & 0o777 == 0o600
    password = path.read_text().strip()
    with socket.create_connection(("127.0.0.1", redis_port), timeout=5) as conn:
        conn.sendall(b"PING\r\n")
        assert conn.recv(200).startswith(b"-NOAUTH")
    shown = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            shown += [cmdline] if password.encode() in cmdline.read_bytes() else []
        except OSError:  # gone meanwhile
            pass
    assert not shown, shown
    return password


def service(home, prefix: str) -> dict:
    return next(s for s in services_state(home)["services"] if s["name"].startswith(prefix))


def crash_repeatedly(home, prefix: str, times: int, back) -> float:
    """SIGKILL the service named ``prefix...`` ``times`` times in a row, each time once it is back
    (``back(since)``: serving again since the last kill, a wall-clock time), so that its restarts come within a
    minute of each other (the supervisor's backoff grows); returns the seconds from the last kill until it is back."""
    since = time.time() - 10
    for _ in range(times):
        pid = wait_for(lambda: (s := service(home, prefix))["pid"] and process_alive(s["pid"]) and back(since)
                       and s["pid"], timeout=120, what=f"{prefix} to be up", every=0.2)
        killed_at, since = time.monotonic(), time.time()
        os.killpg(pid, signal.SIGKILL)
        wait_for(lambda: service(home, prefix)["pid"] != pid, timeout=60, what=f"{prefix}'s exit seen", every=0.2)
    wait_for(lambda: service(home, prefix)["pid"] and back(since), timeout=120, what=f"{prefix} back", every=0.2)
    return time.monotonic() - killed_at


def restart_delays(home, prefix: str) -> list[int]:
    """The backoffs logs/supervisor.log records for the service: "NAME exited (code C); restart N in D s"."""
    import re

    return [int(m.group(1)) for m in re.finditer(rf"{re.escape(prefix)}[^\n]* exited \(code -?\d+\); restart \d+ "
                                                 r"in (\d+) s", (home / "logs" / "supervisor.log").read_text())]


def maintenance_pass_after(home, since: float) -> bool:
    """The maintenance pass recorded one (webapp.status's maintenance.json) at or after ``since``."""
    from datetime import datetime

    try:
        at = json.loads((home / "maintenance.json").read_text())["at"]
    except (OSError, ValueError, KeyError):
        return False
    return datetime.fromisoformat(at).timestamp() >= since
