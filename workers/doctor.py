"""``./seedbed doctor``: check every runtime prerequisite, one line each, with the fix when it fails.

    python -m workers.doctor [--for up|test|worker|all]

Each check returns (ok, what it found, how to fix it). Whether a failure stops ``./seedbed up`` or
``./seedbed test`` depends on what that command needs: the tests need Redis, PostgreSQL and Chromium, the app
can fall back to a local broker and builds the tiny model on first use, a worker container
(``--for worker``, docker-compose.yml) needs its broker and the sandbox but no browser. A failure that the
command can live with is printed as ``warn``; one it cannot is ``FAIL`` and makes the exit status 1.
``--for all`` (the default, what ``./seedbed doctor`` runs) treats everything any of them needs as essential.

Only the standard library is imported at module level, so a broken virtualenv is reported, not a traceback.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
SETUP = "./seedbed setup (as root) installs it"
MIN_FREE_GIB, WARN_FREE_GIB = 2.0, 5.0
CHROMIUM = "/usr/bin/chromium"


@dataclass
class Finding:
    ok: bool
    found: str
    fix: str = ""


@dataclass
class Check:
    name: str
    run: Callable[[], Finding]
    essential_for: frozenset  # the modes ("up", "test", "worker") that cannot work without it
    shown_for: frozenset | None = None  # the modes that run it at all (None: every mode)


def _pins(extras: tuple[str, ...]) -> dict[str, str]:
    """{distribution name: pinned version} from pyproject.toml's dependencies and the given extras."""
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = pyproject["project"]
    specs = list(project["dependencies"]) + list(pyproject.get("tool", {}).get("seedbed", {}).get("no-deps", []))
    for extra in extras:
        specs += project.get("optional-dependencies", {}).get(extra, [])
    pins = {}
    for spec in specs:
        m = re.match(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^;\s]+)", spec)
        if m:
            pins[m.group(1)] = m.group(2)
    return pins


def check_python() -> Finding:
    found = f"{sys.version.split()[0]} at {sys.executable}"
    if sys.version_info[:2] != (3, 11):
        return Finding(False, found, "Seedbed needs Python 3.11: apt-get install python3.11 python3.11-venv, "
                                     "then rm -rf .venv && ./seedbed setup")
    return Finding(True, found)


def check_packages(*, extras: tuple[str, ...] = (), pins: dict[str, str] | None = None) -> Finding:
    """Every pinned distribution installed at its pinned version (pins: pyproject.toml's, or those given)."""
    wrong = []
    pins = _pins(extras) if pins is None else pins
    for name, want in pins.items():
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            wrong.append(f"{name} missing")
            continue
        if have.split("+")[0] != want:  # a local label (torch's "+cpu") is the same release
            wrong.append(f"{name} {have} (pinned {want})")
    if wrong:
        return Finding(False, "; ".join(wrong[:6]) + (" ..." if len(wrong) > 6 else ""),
                       f"{sys.executable} -m pip install -e '.[dev]' (./seedbed setup does it)")
    return Finding(True, f"{len(pins)} pinned packages installed ({', '.join(('runtime',) + extras)})")


FRONT_END = {  # package.json's packages: the file the pages load, and what is lost without it
    "htmx.org": ("dist/htmx.min.js", "live sections of the pages would not update"),
    "plotly.js-basic-dist-min": ("plotly-basic.min.js", "no chart would be drawn"),
}


def check_assets() -> Finding:
    """The front-end packages the pages load (package.json: htmx, Plotly's basic bundle), from node_modules/."""
    versions = []
    for package, (script, loss) in FRONT_END.items():
        path = ROOT / "node_modules" / package / script
        if not path.is_file():
            return Finding(False, f"{path.relative_to(ROOT)} missing: {loss}", "npm ci (./seedbed setup does it)")
        versions.append(f"{package} {json.loads((ROOT / 'node_modules' / package / 'package.json').read_text())['version']}")
    return Finding(True, ", ".join(versions))


def check_disk() -> Finding:
    """Free space under $SEEDBED_HOME, and under its runs folder when that is another disk (a data disk mounted
    there): the emptier one decides; a run whose checkpoint finds its disk full fails until space is freed."""
    home = Path(os.environ.get("SEEDBED_HOME", ROOT / "var"))
    probe = home if home.exists() else ROOT
    probes = [probe]
    runs = home / "runs"
    try:
        if runs.is_dir() and runs.stat().st_dev != probe.stat().st_dev:
            probes.append(runs)
    except OSError:
        pass
    free = {p: shutil.disk_usage(p).free / 2**30 for p in probes}
    found = "; ".join(f"{gib:.1f} GiB free under {p}" for p, gib in free.items())
    fix = "free space there, or point SEEDBED_HOME at a larger disk (runs keep checkpoints)"
    free_gib = min(free.values())
    if free_gib < MIN_FREE_GIB:
        return Finding(False, found, fix)
    if free_gib < WARN_FREE_GIB:
        return Finding(True, found + f" (less than {WARN_FREE_GIB:.0f} GiB: checkpoints may fill it)")
    return Finding(True, found)


PRIVATE = {"seedbed.sqlite3": 0o600, "seedbed.sqlite3-wal": 0o600, "seedbed.sqlite3-shm": 0o600,
           "secret_key": 0o600, "admin_password": 0o600,
           # the password of the Redis ./seedbed up starts, and the config file redis-server reads it from
           "redis_password": 0o600, "redis/redis.conf": 0o600}


def check_permissions() -> Finding:
    """$SEEDBED_HOME and its secrets readable by this account only: another local account that reads the SQLite
    database (its live session keys) or the secret key logs in as anyone, admin included. Looked at as found,
    before the database check starts the app (which tightens these itself)."""
    home = Path(os.environ.get("SEEDBED_HOME", ROOT / "var"))
    if not home.is_dir():
        return Finding(True, f"{home} not made yet (the app makes it 0700)")
    wrong = []
    for path, want in [(home, 0o700)] + [(home / name, mode) for name, mode in PRIVATE.items()]:
        try:
            mode = path.stat().st_mode & 0o777
        except OSError:
            continue
        if mode & 0o077:
            wrong.append((path, mode, want))
    if not wrong:
        return Finding(True, f"{home} 0700, its database and secret key 0600")
    return Finding(False, "readable by other accounts: " + ", ".join(f"{p} ({m:04o})" for p, m, _ in wrong),
                   " && ".join(f"chmod {w:o} {shlex.quote(str(p))}" for p, _, w in wrong))


def check_database() -> Finding:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    try:
        import django

        django.setup()
        from django.db import connection
        from django.db.migrations.executor import MigrationExecutor

        connection.ensure_connection()
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception as exc:  # any driver's error: reported with its own words
        return Finding(False, f"{type(exc).__name__}: {exc}".strip()[:300],
                       "check DATABASE_URL (unset means SQLite under $SEEDBED_HOME)")
    where = connection.settings_dict["NAME"]
    if pending:
        return Finding(False, f"{connection.vendor} {where}: {len(pending)} migrations not applied",
                       "./seedbed setup (runs manage.py migrate)")
    return Finding(True, f"{connection.vendor} {where}, migrations applied")


def check_redis() -> Finding:
    """The Redis at $REDIS_URL, as given, or the password-protected redis-server ``./seedbed up`` started on its
    port (workers.broker)."""
    from workers.broker import masked, own_redis_url, redis_answers, redis_url, seedbed_home

    url = redis_url()
    if redis_answers(url, timeout_s=1.0):
        return Finding(True, f"answers at {masked(url)}")
    own = own_redis_url(url, seedbed_home())
    if own:
        return Finding(True, f"answers at {masked(own)} (the local redis-server ./seedbed up started)")
    url = masked(url)
    return Finding(False, f"nothing answers at {url}",
                   "redis-server --daemonize yes --bind 127.0.0.1 --port 6379 (./seedbed up and ./seedbed test "
                   "start a local one; up falls back to a filesystem broker without it)")


def check_postgres() -> Finding:
    base = os.environ.get("SEEDBED_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432")
    try:
        import psycopg

        with psycopg.connect(f"{base}/postgres", connect_timeout=3) as conn:
            version = conn.execute("show server_version").fetchone()[0]
    except Exception as exc:  # psycopg's OperationalError and friends
        return Finding(False, f"{base}: {str(exc).strip().splitlines()[0][:200]}",
                       "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start "
                       "(./seedbed test starts it; or set SEEDBED_TEST_POSTGRES)")
    return Finding(True, f"PostgreSQL {version} at {base}")


def check_chromium() -> Finding:
    if not os.access(CHROMIUM, os.X_OK):
        return Finding(False, f"{CHROMIUM} not found", "apt-get install chromium chromium-driver; " + SETUP)
    try:
        out = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--version"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Finding(False, f"{CHROMIUM}: {exc}", "reinstall: apt-get install --reinstall chromium")
    if out.returncode != 0:
        return Finding(False, f"{CHROMIUM} --version exited {out.returncode}: {out.stderr.strip()[:200]}",
                       "reinstall: apt-get install --reinstall chromium")
    return Finding(True, out.stdout.strip())


def check_bubblewrap() -> Finding:
    from training.verifiers.sandbox import probe_bwrap

    if not shutil.which("bwrap"):
        return Finding(False, "bwrap not installed", "apt-get install bubblewrap; " + SETUP)
    probe = probe_bwrap()
    if probe["works"]:
        return Finding(True, "bwrap starts a sandbox with its own network, PID, IPC, UTS and mount namespaces")
    fix = ("in a container the worker needs cap_add SYS_ADMIN and security_opt apparmor=unconfined (README, "
           "Production)" if os.geteuid() == 0 else
           "unprivileged user namespaces must be on: sysctl -w kernel.unprivileged_userns_clone=1 "
           "user.max_user_namespaces=15000")
    return Finding(False, f"bwrap cannot create namespaces here: {probe['why'].strip()[-200:]}", fix)


def check_sandbox_user() -> Finding:
    """The programs' user and the tests' user: both must exist as root, and differ."""
    from training.verifiers.base import VerifierError
    from training.verifiers.sandbox import SANDBOX_USER, TESTS_USER, sandbox_ids

    if os.geteuid() != 0:
        return Finding(True, f"not root: sandboxed programs and their tests run as this uid ({os.getuid()}), no "
                             f"uid switch (the tests are not out of the programs' reach)")
    found = []
    for user in (SANDBOX_USER, TESTS_USER):
        try:
            uid, gid = sandbox_ids(user)
        except VerifierError as exc:
            return Finding(False, str(exc).split(";")[0], "./seedbed setup creates it (as root)")
        found.append((user, uid, gid))
    if found[0][1] == found[1][1]:
        return Finding(False, f"{SANDBOX_USER} and {TESTS_USER} have the same uid {found[0][1]}",
                       f"userdel {TESTS_USER}; ./seedbed setup creates it again with a uid of its own")
    return Finding(True, ", ".join(f"{user} (uid {uid}, gid {gid})" for user, uid, gid in found))


def check_code_verifier() -> Finding:
    from training.verifiers.base import VerifierError
    from training.verifiers.code import CodeVerifier

    program = "```python\ndef add(a, b):\n    return a + b\n```"
    wrong = "```python\ndef add(a, b):\n    return a - b\n```"
    example = {"tests": "assert add(1, 2) == 3\nassert add(-1, 1) == 0"}
    try:
        verifier = CodeVerifier(processes=1, timeout_s=10)
        good, bad = verifier.batch([program, wrong], [example, example])
    except (VerifierError, ValueError, OSError) as exc:
        return Finding(False, f"{type(exc).__name__}: {exc}"[:300], "see the sandbox user and bubblewrap lines")
    for result in (good, bad):
        if isinstance(result, Exception):
            return Finding(False, f"the sandbox could not judge: {result}"[:300],
                           "see the sandbox user and bubblewrap lines")
    if good.score != 1.0 or bad.score != 0.0:
        return Finding(False, f"a correct program scored {good.score} ({good.details.get('first_failure', '')}),"
                              f" a wrong one {bad.score}", "see the sandbox user and bubblewrap lines")
    layers = good.details.get("layers", {})
    active = ", ".join(k for k, v in sorted(layers.items()) if v is True) or "none reported"
    memory = layers.get("memory_cgroup") or "no memory cgroup: memory_mb / max_processes a process"
    return Finding(True, f"a correct program passes and a wrong one fails (layers: {active}; memory bound: "
                         f"{memory})")


def check_math_verifier() -> Finding:
    from training.verifiers.base import VerifierError
    from training.verifiers.math_answer import MathVerifier

    try:
        verifier = MathVerifier(processes=1)
        # the first is decided in-process, the second needs math-verify in a worker process
        scores = [verifier(r"so \boxed{\dfrac{1}{2}}", {"answer": "0.5"}).score,
                  verifier(r"so \boxed{\sqrt{8}}", {"answer": r"2\sqrt{2}"}).score,
                  verifier(r"so \boxed{3}", {"answer": "4"}).score]
    except (VerifierError, ValueError, OSError) as exc:
        return Finding(False, f"{type(exc).__name__}: {exc}"[:300], f"{sys.executable} -m pip install -e '.[dev]'")
    if scores != [1.0, 1.0, 0.0]:
        return Finding(False, f"scores {scores} for (1/2 vs 0.5, sqrt 8 vs 2 sqrt 2, 3 vs 4); want [1, 1, 0]",
                       "math-verify is broken in this environment: reinstall it (./seedbed setup)")
    return Finding(True, "1/2 = 0.5 and sqrt(8) = 2 sqrt(2) pass, 3 = 4 fails")


def check_engines() -> Finding:
    """The engines this machine runs (training.engines.available_engines), and the operator's commands file
    when $SEEDBED_COMMANDS names one (a broken file is a failure: runs naming its commands cannot start)."""
    from training.engines import available_engines
    from training.engines.command import COMMANDS_ENV, registered_commands

    try:
        commands = registered_commands()
    except (OSError, ValueError) as exc:
        return Finding(False, f"${COMMANDS_ENV}: {exc}"[:300], f"fix the file ${COMMANDS_ENV} names (README: Engines)")
    found = ", ".join(available_engines())
    if commands:
        found += f" ({len(commands)} registered command{'s' if len(commands) > 1 else ''}: {', '.join(sorted(commands))})"
    return Finding(True, found)


def check_tiny_model(required: bool) -> Callable[[], Finding]:
    def run() -> Finding:
        from training.config import default_tiny_model_dir
        from training.tiny import tiny_build_state

        path = default_tiny_model_dir()
        state = tiny_build_state(path)
        if state["state"] == "ready":
            return Finding(True, f"built at {path}")
        found = f"{state['state']} at {path}" + (f" (SFT step {state.get('step')})" if "step" in state else "")
        if not required:  # ./seedbed up: the first run that uses it builds it, with progress on every page
            return Finding(True, found + "; the first run that uses it builds it")
        return Finding(False, found, f"{sys.executable} -m training bootstrap-tiny --out {path} (./seedbed setup)")
    return run


def checks(mode: str) -> list[Check]:
    """The checks ``mode`` runs. ``up``: the app on this machine; ``test``: the test suite; ``worker``: a
    training worker in a container (docker-compose.yml); ``all``: everything, essential for any of them."""
    up, test, worker = "up", "test", "worker"
    every = frozenset({up, test, worker})
    found = [
        Check("python", check_python, every),
        Check("packages", lambda: check_packages(extras=("dev", "peer") if mode in (test, "all") else ()), every),
        Check("assets", check_assets, frozenset({up, test}), shown_for=frozenset({up, test})),
        Check("disk", check_disk, every),
        Check("permissions", check_permissions, frozenset()),  # a warning: the app tightens them when it starts
        Check("database", check_database, every),
        Check("redis", check_redis, frozenset({test, worker})),  # up falls back to a local broker
        Check("postgresql", check_postgres, frozenset({test}), shown_for=frozenset({test})),
        Check("chromium", check_chromium, frozenset({test}), shown_for=frozenset({test})),
        Check("bubblewrap", check_bubblewrap, every),
        Check("sandbox-user", check_sandbox_user, every),
        Check("code", check_code_verifier, every),
        Check("math", check_math_verifier, every),
        Check("engines", check_engines, every),
        Check("tiny-model", check_tiny_model(required=mode in (test, "all")), frozenset({test})),
    ]
    return [c for c in found if mode == "all" or c.shown_for is None or mode in c.shown_for]


def run_checks(mode: str, out=sys.stdout) -> int:
    """Print one line per check; returns 1 when a check essential for ``mode`` failed, else 0."""
    essential_modes = {"all": {"up", "test", "worker"}}.get(mode, {mode})
    failed = []
    for check in checks(mode):
        t0 = time.monotonic()
        try:
            finding = check.run()
        except Exception as exc:  # a check that crashes is a failed check, with its reason
            finding = Finding(False, f"check crashed: {type(exc).__name__}: {exc}"[:300],
                              "run ./seedbed setup; if it persists, report this line")
        essential = bool(check.essential_for & essential_modes)
        word = "ok" if finding.ok else ("FAIL" if essential else "warn")
        line = f"  {word:<5}{check.name:<14}{finding.found}"
        if not finding.ok:
            line += f"  -> fix: {finding.fix}"
        if time.monotonic() - t0 > 5:
            line += f"  ({time.monotonic() - t0:.0f} s)"
        print(line, file=out, flush=True)
        if not finding.ok and essential:
            failed.append(check.name)
    if failed:
        print(f"doctor: {len(failed)} essential check(s) failed: {', '.join(failed)}", file=out)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.doctor", description=__doc__.splitlines()[0])
    parser.add_argument("--for", dest="mode", choices=("up", "test", "worker", "all"), default="all",
                        help="which command's needs decide what is essential (default: all)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    return run_checks(args.mode)


if __name__ == "__main__":
    sys.exit(main())
