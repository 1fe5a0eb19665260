"""./seedbed up keeps each service's log bounded (var/logs/maintenance.log grew without end): past
$SEEDBED_LOG_MAX_MB the log is copied to LOG.1 and emptied in place, while its service keeps appending to it.
The functions are run as the script defines them (their text taken out of ./seedbed)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.conftest import wait_for

SCRIPT = (Path(__file__).resolve().parent.parent / "seedbed").read_text()


def function(name: str) -> str:
    match = (re.search(rf"^{name}\(\) {{[^\n]*}}\n", SCRIPT, re.M)  # a one-line function
             or re.search(rf"^{name}\(\) {{.*?^}}\n", SCRIPT, re.S | re.M))
    assert match, name
    return match.group(0)


def bash(code: str, **env) -> str:
    prelude = function("say") + function("rotate_log") + function("log_max_bytes")
    result = subprocess.run(["bash", "-c", prelude + code], capture_output=True, text=True, timeout=30,
                            env={"PATH": "/usr/bin:/bin", **env})
    assert result.returncode == 0, result.stderr
    return result.stdout + result.stderr


def test_a_log_past_its_limit_is_kept_as_log_1_and_emptied_while_its_writer_goes_on(tmp_path):
    log = tmp_path / "maintenance.log"
    writer = subprocess.Popen(["bash", "-c", f"while true; do echo beat tick >>'{log}'; sleep 0.02; done"])
    try:
        wait_for(lambda: log.exists() and log.stat().st_size >= 2000, timeout=10, what="2000 bytes of log")
        bash(f"rotate_log '{log}' 1000")
        kept = (tmp_path / "maintenance.log.1").read_text()
        assert len(kept) >= 2000 and kept.startswith("beat tick\n")
        wait_for(lambda: log.read_text().count("\n") >= 5, timeout=10, what="the writer going on in the emptied log")
        after = log.read_text()
        # the writer carried on into the emptied file, from its start (no hole of NUL bytes where it had been)
        assert after.startswith("beat tick\n") and "\0" not in after and len(after) < len(kept)
    finally:
        writer.kill()
        writer.wait()


def test_a_log_under_its_limit_or_missing_is_left_alone(tmp_path):
    log = tmp_path / "web.log"
    log.write_text("x" * 500)
    bash(f"rotate_log '{log}' 1000; rotate_log '{tmp_path}/missing.log' 1000")
    assert log.read_text() == "x" * 500 and not (tmp_path / "web.log.1").exists()
    assert not (tmp_path / "missing.log").exists()


def test_the_limit_comes_from_seedbed_log_max_mb_and_a_bad_one_is_named():
    assert bash("log_max_bytes").strip() == "20000000"
    assert bash("log_max_bytes", SEEDBED_LOG_MAX_MB="5").strip() == "5000000"
    out = bash("log_max_bytes", SEEDBED_LOG_MAX_MB="lots")
    assert "SEEDBED_LOG_MAX_MB must be a whole number" in out and out.startswith("20000000\n")
