"""The set-up installs what the product needs, and ``./seedbed doctor`` names what is missing with its fix.

These run the real script (``./seedbed``), as CI does. The sandbox-user test removes the user for real: it
needs root (CI runs as root) and proves that nothing hand-made is needed for the ``code`` verifier.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from tests.conftest import REPO
from workers.doctor import check_packages

SANDBOX_USER = "seedbed-sandbox"
TESTS_USER = "seedbed-sandbox-tests"
PROGRAM = "```python\ndef add(a, b):\n    return a + b\n```"
VERIFY = ("import sys; from training.verifiers.code import CodeVerifier\n"
          "from training.verifiers.base import VerifierError\n"
          "try:\n"
          "    print(CodeVerifier(processes=1)(sys.argv[1], {'tests': 'assert add(1, 2) == 3'}).score)\n"
          "except VerifierError as exc:\n"
          "    print('VerifierError:', exc)\n")


def seedbed(*args: str, env_extra: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([str(REPO / "seedbed"), *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)


def verify_in_a_fresh_process() -> str:
    """The code verifier in a new process (a fresh look-up of the sandbox user), on a correct program."""
    done = subprocess.run([sys.executable, "-c", VERIFY, PROGRAM], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def doctor_lines(out: str) -> dict[str, str]:
    """{check name: its line} from the doctor's output."""
    lines = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in ("ok", "warn", "FAIL"):
            lines[parts[1]] = line
    return lines


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(os.geteuid() != 0, reason="removing and creating a system user needs root (CI runs as root)")
@pytest.mark.parametrize("user", [SANDBOX_USER, TESTS_USER])
def test_set_up_recreates_the_sandbox_user_and_the_code_verifier_works_again(user):
    """The programs' user, then the tests' (a uid of their own, out of the programs' reach)."""
    removed = subprocess.run(["userdel", user], capture_output=True, text=True)
    assert removed.returncode == 0, removed.stderr
    assert f"user '{user}' does not exist" in verify_in_a_fresh_process()
    doctor = seedbed("doctor", "up")
    assert doctor.returncode == 1
    assert doctor_lines(doctor.stdout)["sandbox-user"].startswith("  FAIL")
    assert "./seedbed setup creates it" in doctor_lines(doctor.stdout)["sandbox-user"]

    setup = seedbed("setup", "system")
    assert setup.returncode == 0, setup.stderr
    assert f"creating the unprivileged user {user}" in setup.stderr
    assert verify_in_a_fresh_process() == "1.0"
    again = seedbed("setup", "system")  # idempotent: nothing to do the second time
    assert again.returncode == 0 and "creating" not in again.stderr


def test_doctor_on_this_machine_says_ok_to_every_check():
    done = seedbed("doctor", timeout=120)
    lines = doctor_lines(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert set(lines) == {"python", "packages", "assets", "disk", "permissions", "database", "redis", "postgresql",
                          "chromium", "bubblewrap", "sandbox-user", "code", "math", "engines", "tiny-model"}
    assert all(line.startswith("  ok") for line in lines.values()), done.stdout
    assert "seedbed, trl" in lines["engines"]  # TRL comes with the set-up; verl needs a GPU


def test_doctor_fails_on_a_commands_file_it_cannot_read(tmp_path):
    bad = tmp_path / "commands.yaml"
    bad.write_text("trainer:\n  argv: python train.py\n")  # a string, not a list of arguments
    done = seedbed("doctor", env_extra={"SEEDBED_COMMANDS": str(bad)}, timeout=120)
    line = doctor_lines(done.stdout)["engines"]
    assert done.returncode == 1 and line.startswith("  FAIL") and "needs argv, a non-empty list" in line


def test_doctor_names_a_stopped_redis_and_postgresql_with_their_fixes():
    dead = f"127.0.0.1:{free_port()}"
    env = {"REDIS_URL": f"redis://{dead}/0", "SEEDBED_TEST_POSTGRES": f"postgres://postgres@{dead}"}
    done = seedbed("doctor", env_extra=env, timeout=120)
    lines = doctor_lines(done.stdout)
    assert done.returncode == 1
    assert lines["redis"].startswith("  FAIL") and f"nothing answers at redis://{dead}/0" in lines["redis"]
    assert "-> fix: redis-server --daemonize yes" in lines["redis"]
    assert lines["postgresql"].startswith("  FAIL") and "-> fix: pg_ctlcluster" in lines["postgresql"]
    assert "essential check(s) failed: redis, postgresql" in done.stdout
    # ./seedbed up can live without them (a local or filesystem broker, SQLite): a warning, not a stop
    up = seedbed("doctor", "up", env_extra=env, timeout=120)
    assert up.returncode == 0, up.stdout
    assert doctor_lines(up.stdout)["redis"].startswith("  warn")


def test_doctor_requires_the_tiny_model_for_the_tests_but_not_for_up(tmp_path):
    env = {"SEEDBED_TINY_MODEL": str(tmp_path / "tiny")}
    test = seedbed("doctor", "test", env_extra=env, timeout=120)
    assert test.returncode == 1
    assert doctor_lines(test.stdout)["tiny-model"].startswith("  FAIL")
    assert "bootstrap-tiny" in doctor_lines(test.stdout)["tiny-model"]
    up = seedbed("doctor", "up", env_extra=env, timeout=120)
    assert up.returncode == 0, up.stdout
    assert "the first run that uses it builds it" in doctor_lines(up.stdout)["tiny-model"]


def test_the_package_check_names_a_missing_or_wrongly_pinned_distribution():
    assert check_packages(pins={"Django": "0.0.1", "no-such-distribution-xyz": "1.0"}).found == (
        f"Django {__import__('django').get_version()} (pinned 0.0.1); no-such-distribution-xyz missing")
    assert check_packages(pins={"Django": __import__("django").get_version()}).ok


def test_an_unknown_command_or_set_up_part_is_refused():
    assert seedbed("frobnicate").returncode == 2
    bad = seedbed("setup", "everything")
    assert bad.returncode == 1 and "unknown set-up part 'everything' (system, deps or app)" in bad.stderr
