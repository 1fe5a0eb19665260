"""``./seedbed up`` serves plain HTTP (gunicorn, no TLS): bound to another address than the loopback, passwords,
session cookies and API tokens cross the network readable by anyone on it. It says so in one line, on its output
and in logs/supervisor.log, naming the address and the two ways out; on the loopback it says nothing. The
functions run as the script defines them (their text taken out of ./seedbed, as tests/test_log_rotation.py does);
tests/faults/test_supervisor.py runs a whole ``up`` on 0.0.0.0 and finds the line there too."""
from __future__ import annotations

import re
import subprocess

import pytest

from tests.test_log_rotation import SCRIPT, function


def warn(tmp_path, host: str, port: str = "8123") -> tuple[str, str]:
    """(stderr, supervisor.log) of ``warn_if_plain_http_on_network`` with HOST and PORT as ``up`` sets them."""
    (tmp_path / "logs").mkdir(exist_ok=True)
    code = (function("sup_log") + function("loopback_host") + function("warn_if_plain_http_on_network")
            + f"HOST='{host}'; PORT='{port}'; warn_if_plain_http_on_network\n")
    result = subprocess.run(["bash", "-c", code], capture_output=True, text=True, timeout=30,
                            env={"PATH": "/usr/bin:/bin", "SEEDBED_HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    log = tmp_path / "logs" / "supervisor.log"
    return result.stderr, log.read_text() if log.exists() else ""


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "::", "seedbed.mylab.org"])
def test_a_non_loopback_address_gets_one_warning_line_naming_it_and_the_fixes(tmp_path, host):
    err, log = warn(tmp_path, host)
    assert len(err.splitlines()) == 1 and log.splitlines() == err.splitlines(), (err, log)
    line = err.strip()
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ warning: serving plain HTTP on ", line), line
    assert f"on {host}:8123, not a loopback address" in line
    assert "TLS reverse proxy" in line and "SEEDBED_HOST=127.0.0.1" in line


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.1.1", "localhost", "::1"])
def test_the_loopback_gets_no_warning(tmp_path, host):
    assert warn(tmp_path, host) == ("", "")


def test_up_warns_before_its_set_up_starts():
    """The line comes first (an operator sees it at once, not after minutes of set-up), once the logs folder is there."""
    up = SCRIPT[SCRIPT.index("cmd_up() {"):]
    up = up[:up.index("\n}\n")]
    assert up.index('mkdir -p "$SEEDBED_HOME/logs"') < up.index("warn_if_plain_http_on_network") < up.index("setup)")
