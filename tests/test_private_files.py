"""What the app writes under $SEEDBED_HOME is its own account's alone: another local account must not read the
SQLite database (its live session keys log anyone in, admin included), the secret key, the logs, a run folder or
an uploaded dataset. Checked the real way: a home set up and served as an operator would (their shell's usual
umask 022), then read as another unprivileged account (``nobody``: every Debian machine has it, and no test removes
it, as tests/test_setup.py removes and recreates the sandbox's users while other tests run beside it)."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REPO, tiny_config
from tests.realserver import SHELL_UMASK, Server, app_env, log_in, multipart, prepare_home, request

OTHER_USER = "nobody"


def as_other_user(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", OTHER_USER, "--", *argv], capture_output=True, text=True, timeout=60)


def mode(path: Path) -> str:
    return f"{stat.S_IMODE(path.stat().st_mode):04o}" if path.exists() else "missing"


@pytest.fixture
def open_parent():
    """A folder any account may enter (pytest's own temporary folders are 0700: they would hide everything)."""
    parent = Path(tempfile.mkdtemp(prefix="seedbed-private-"))
    parent.chmod(0o755)
    yield parent
    shutil.rmtree(parent, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="reading as another account needs root to switch to it (CI runs as root)")
def test_another_local_account_reads_nothing_the_app_wrote(open_parent, tiny_model_dir):
    assert subprocess.run(["id", "-u", OTHER_USER], capture_output=True).returncode == 0, \
        f"no user {OTHER_USER} on this machine"
    home = open_parent / "home"
    account = prepare_home(home)  # migrate, the admin account, an API token
    server = Server(home)
    try:
        log_in(server, "admin", account["password"])  # a live session in the database
        rows = b"".join(b'{"prompt": "%d+1=", "answer": "%d"}\n' % (i, i + 1) for i in range(20))
        content_type, body, _ = multipart({"name": "sums"}, "file", "sums.jsonl", [rows])
        status, _, content = request(server, "POST", "/api/v1/datasets",
                                     {"Authorization": f"Bearer {account['token']}", "Content-Type": content_type},
                                     body=b"".join(body))
        assert status == 201, content
        dataset = next(home.glob("library/*/datasets/sums-*.jsonl"))
    finally:
        server.stop()
    env = app_env(home, SEEDBED_TINY_MODEL=tiny_model_dir)
    # an error, logged by an app process as a failed request or task is (logs/errors.log)
    subprocess.run([sys.executable, "manage.py", "shell", "-c",
                    "import logging; logging.getLogger('seedbed').error('an error for the log')"],
                   cwd=REPO, env=env, check=True, capture_output=True, timeout=120, umask=SHELL_UMASK)
    # a run folder, written by the training core's command line
    config = open_parent / "run.json"
    config.write_text(json.dumps(tiny_config(total_steps=1, prompts_per_step=2, group_size=2, samples_per_step=1)))
    run = home / "runs" / "a-run"
    done = subprocess.run([sys.executable, "-m", "training", "run", str(config), "--out", str(run)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300, umask=SHELL_UMASK)
    assert done.returncode == 0, done.stderr[-2000:]

    secrets = {"database": home / "seedbed.sqlite3", "secret key": home / "secret_key",
               "admin password": home / "admin_password", "error log": home / "logs" / "errors.log",
               "run config": run / "config.json", "run metrics": run / "metrics.jsonl", "dataset": dataset}
    folders = {"home": home, "run folder": run, "checkpoints": run / "checkpoints", "uploads": home / "uploads",
               "datasets": dataset.parent, "logs": home / "logs"}
    modes = {name: mode(path) for name, path in {**secrets, **folders}.items()}
    assert all(m != "missing" and int(m, 8) & 0o077 == 0 for m in modes.values()), modes

    def refused() -> dict:
        """What the other account could read: {name: what came out} (empty: nothing)."""
        got = {}
        for name, path in secrets.items():
            out = as_other_user("cat", str(path))
            if out.returncode == 0 or "Permission denied" not in out.stderr:
                got[name] = (out.returncode, out.stderr.strip() or out.stdout[:80])
        for name, path in folders.items():
            out = as_other_user("ls", str(path))
            if out.returncode == 0 or "Permission denied" not in out.stderr:
                got[name] = (out.returncode, out.stderr.strip() or out.stdout[:80])
        return got

    assert refused() == {}
    # each file and folder is private by its own mode too, not only behind the home folder
    home.chmod(0o755)
    try:
        assert set(refused()) == {"home"}
    finally:
        home.chmod(0o700)


def test_the_doctor_warns_when_the_home_or_its_secrets_are_readable_by_others(tmp_path):
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    for name in ("seedbed.sqlite3", "secret_key"):
        (home / name).write_text("")
        (home / name).chmod(0o644)
    done = subprocess.run([sys.executable, "-m", "workers.doctor", "--for", "up"], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "SEEDBED_HOME": str(home),
                                                       "PYTHONPATH": str(REPO)})
    line = next((line for line in done.stdout.splitlines() if line.split()[1:2] == ["permissions"]), "")
    assert line.startswith("  warn"), done.stdout
    assert f"chmod 700 {home}" in line and f"chmod 600 {home / 'seedbed.sqlite3'}" in line \
        and f"chmod 600 {home / 'secret_key'}" in line, line
