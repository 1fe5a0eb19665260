"""Django settings for Seedbed.

Everything a deployment changes comes from environment variables (listed in README "Configuration"):
the embedded default is SQLite under var/ and a local broker; $DATABASE_URL switches to PostgreSQL.
"""
from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONCE, NONE, SELF

BASE_DIR = Path(__file__).resolve().parent.parent
# What the app writes (the database with its live sessions, the secret key, logs, run folders, uploads) is readable
# by its own account only: every process of the app (web, workers, their training children, manage.py) imports
# these settings first.
os.umask(0o077)
# Everything Seedbed writes at run time (database, run folders, broker files, admin password) lives here.
SEEDBED_HOME = Path(os.environ.get("SEEDBED_HOME", BASE_DIR / "var")).resolve()
SEEDBED_HOME.mkdir(parents=True, exist_ok=True)
PRIVATE_FILES = ("seedbed.sqlite3", "seedbed.sqlite3-wal", "seedbed.sqlite3-shm", "secret_key", "admin_password",
                 "redis_password", "redis/redis.conf")  # (the last two: the Redis ./seedbed up starts, workers.broker)


def _tighten(path: Path, mode: int) -> None:
    """Files made before the umask was set (an older Seedbed, another umask) lose their group and other bits."""
    try:
        if path.stat().st_mode & 0o077:
            path.chmod(mode)
    except OSError:  # missing, or not ours to change: the doctor says so
        pass


_tighten(SEEDBED_HOME, 0o700)
for _name in PRIVATE_FILES:
    _tighten(SEEDBED_HOME / _name, 0o600)


def _env_bool(name: str, default: bool) -> bool:
    return os.environ.get(name, str(default)).strip().lower() in ("1", "true", "yes", "on")


def _secret_key() -> str:
    """$DJANGO_SECRET_KEY, else a key generated once and kept in $SEEDBED_HOME/secret_key."""
    if os.environ.get("DJANGO_SECRET_KEY"):
        return os.environ["DJANGO_SECRET_KEY"]
    path = SEEDBED_HOME / "secret_key"
    if not path.exists():
        try:  # created 0600, never readable by others even for a moment
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it meanwhile
            pass
        else:
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = _env_bool("DJANGO_DEBUG", False)
# Fail closed: only this machine unless the deployment names its hosts (./seedbed up adds the host it serves on;
# docker-compose.yml refuses to start without DJANGO_ALLOWED_HOSTS).
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",")
                 if h.strip()]
CSRF_TRUSTED_ORIGINS = [o.strip() for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()]
# Served over HTTPS (docker-compose.yml's default, behind a TLS-terminating proxy that sets X-Forwarded-Proto):
# plain HTTP is redirected, cookies are sent over HTTPS only, browsers are told to keep to HTTPS (HSTS).
# `python manage.py check --deploy` is clean with it on.
if _env_bool("DJANGO_SECURE", False):
    SECURE_SSL_REDIRECT = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", "3600"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True  # the app's own host's subdomains
    # Asking browsers to preload HSTS for the domain is the domain owner's decision (a submission to the
    # browsers' list, hard to undo), not the app's: off unless DJANGO_HSTS_PRELOAD says so.
    SECURE_HSTS_PRELOAD = _env_bool("DJANGO_HSTS_PRELOAD", False)
    if not SECURE_HSTS_PRELOAD:
        SILENCED_SYSTEM_CHECKS = ["security.W021"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "webapp.staticstorage.StaticFilesConfig",  # django.contrib.staticfiles, collecting what pages use
    "webapp.projects",
    "webapp.runs",
    "webapp.evals",
    "webapp.sweeps",
    "webapp.library",
    "webapp.datasets",
    "webapp.api",
    "axes",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Every page needs a login unless its view is marked login_not_required (only the login page is).
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # last: it answers a locked-out login (django-axes)
    "axes.middleware.AxesMiddleware",
]

# Login throttling (django-axes): after AXES_FAILURE_LIMIT failed logins for one username from one address, that
# pair is locked out for the cool-off period; a success resets the count.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = int(os.environ.get("SEEDBED_LOGIN_FAILURE_LIMIT", "10"))
AXES_COOLOFF_TIME = timedelta(minutes=15)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# The address is the peer's unless a trusted proxy header is configured (webapp/client_address.py): behind a
# proxy every peer is the proxy, and a header believed from anyone would let a client pick its address.
AXES_CLIENT_IP_CALLABLE = "webapp.client_address.client_address"
SEEDBED_TRUSTED_PROXY_HEADER = os.environ.get("SEEDBED_TRUSTED_PROXY_HEADER", "").strip()
SEEDBED_TRUSTED_PROXIES = os.environ.get("SEEDBED_TRUSTED_PROXIES", "1").strip()
if not SEEDBED_TRUSTED_PROXIES.isdigit():  # addresses or networks: a typo fails at start-up, not at each login
    import ipaddress
    [ipaddress.ip_network(p.strip(), strict=False) for p in SEEDBED_TRUSTED_PROXIES.split(",") if p.strip()]

# Content security policy (django-csp): scripts only from this site, inline ones only with the page's nonce;
# inline styles are allowed (Plotly draws with them).
CONTENT_SECURITY_POLICY = {"DIRECTIVES": {
    "default-src": [SELF], "script-src": [SELF, NONCE], "style-src": [SELF, "'unsafe-inline'"],
    "img-src": [SELF, "data:", "blob:"], "connect-src": [SELF], "font-src": [SELF, "data:"],
    "object-src": [NONE], "base-uri": [SELF], "form-action": [SELF], "frame-ancestors": [NONE],
}}

ROOT_URLCONF = "webapp.urls"
WSGI_APPLICATION = "webapp.wsgi.application"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "runs:list"
LOGOUT_REDIRECT_URL = "login"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "webapp.builtin_model.builtin_model",
                "webapp.too_big.body_limit",
            ],
        },
    },
]


def _database() -> dict:
    url = os.environ.get("DATABASE_URL")
    if url:
        db = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    else:
        db = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(SEEDBED_HOME / "seedbed.sqlite3")}
    if db["ENGINE"].endswith("sqlite3"):
        # Several processes write at once (web, worker, each run's child): WAL lets readers and one writer
        # proceed together; IMMEDIATE transactions take the write lock up front so two writers queue on
        # the busy timeout instead of failing with "database is locked" on lock upgrade.
        db.setdefault("OPTIONS", {}).update(
            {"init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
             "transaction_mode": "IMMEDIATE", "timeout": 30})
        # Worker subprocesses in tests must see the same test database, so it is a file, not memory.
        test_name = str(SEEDBED_HOME / f"test_{Path(db['NAME']).stem}_{os.getpid()}.sqlite3")
    else:
        test_name = f"test_{db['NAME']}_{os.getpid()}"
    # One test database per test session (pid), so test sessions running side by side never share one.
    db.setdefault("TEST", {}).setdefault("NAME", test_name)
    return db


DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Applied wherever a password is chosen through a form (the password change page, the admin's user forms): at least
# 8 characters, not like the user name or e-mail, not one of Django's list of 20,000 common passwords, not all digits
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = SEEDBED_HOME / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]


# Plotly.js's basic bundle (scatter, bar, pie: 1.2 MB; the charts draw only scatter traces) and htmx (the live
# fragments) from npm: package.json, installed by ./seedbed setup (npm ci) and the Dockerfile
STATICFILES_DIRS.append(("vendor/plotly", str(BASE_DIR / "node_modules" / "plotly.js-basic-dist-min")))
STATICFILES_DIRS.append(("vendor/htmx", str(BASE_DIR / "node_modules" / "htmx.org" / "dist")))
# Hashed, gzipped copies in STATIC_ROOT (collectstatic, run by set-up), served with a year's cache; a name not
# collected falls back to the finders (webapp/staticstorage.py says why).
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "webapp.staticstorage.StaticStorage"},
}
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
WHITENOISE_KEEP_ONLY_HASHED_FILES = True

# Request bodies (webapp/bodylimit.py, around the WSGI application): a request without a session cookie or an API
# token may send at most SEEDBED_MAX_ANON_BODY_MB, any other at most SEEDBED_MAX_BODY_MB (by default the dataset
# limit plus room for the upload form's other fields); past it, 413 before the body is read.
SEEDBED_MAX_ANON_BODY_BYTES = int(float(os.environ.get("SEEDBED_MAX_ANON_BODY_MB", "1")) * 1_000_000)
SEEDBED_MAX_BODY_BYTES = int(float(os.environ.get("SEEDBED_MAX_BODY_MB") or
                                   float(os.environ.get("SEEDBED_MAX_DATASET_MB", "200")) + 5) * 1_000_000)
# Django's own: form fields and JSON bodies are read into memory up to 2.5 MB; an uploaded file past 2.5 MB goes to
# a file in $SEEDBED_HOME/uploads (the disk its dataset will live on, private to the app), never the system's /tmp.
# Form fields past 2.5 MB are answered 413 naming the limit (webapp/too_big.py); the launch forms check it first.
DATA_UPLOAD_MAX_MEMORY_SIZE = FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
FILE_UPLOAD_TEMP_DIR = SEEDBED_HOME / "uploads"
FILE_UPLOAD_TEMP_DIR.mkdir(exist_ok=True)
FILE_UPLOAD_PERMISSIONS, FILE_UPLOAD_DIRECTORY_PERMISSIONS = 0o600, 0o700

SEEDBED_LOG_DIR = SEEDBED_HOME / "logs"
SEEDBED_LOG_DIR.mkdir(parents=True, exist_ok=True)
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(process)d %(name)s: %(message)s"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain"},
        # every error of every process (web, workers, beat) with its traceback, in one rotated file: a 500 and
        # a failed task name their request or task and its arguments (the run, sweep or job id)
        "errors": {"class": "logging.handlers.RotatingFileHandler", "formatter": "plain", "level": "ERROR",
                   "filename": str(SEEDBED_LOG_DIR / "errors.log"), "maxBytes": 5_000_000, "backupCount": 5,
                   "delay": True},
    },
    "loggers": {"seedbed": {"handlers": ["console", "errors"], "level": os.environ.get("SEEDBED_LOG_LEVEL", "INFO")},
                "django.request": {"handlers": ["console", "errors"], "level": "ERROR", "propagate": False},
                # Celery logs a task that raised here, with its traceback, id and arguments (to errors.log through
                # "celery" below)
                "celery.app.trace": {"level": "ERROR", "propagate": True},
                # the workers' and the beat's own errors (celery.worker.consumer: a lost or refused broker
                # connection; celery.beat: a schedule entry it cannot send; kombu) reach errors.log too; no level
                # here (the errors handler takes ERROR and worse), so their INFO lines still reach each process's log
                "celery": {"handlers": ["errors"], "propagate": True},
                "kombu": {"handlers": ["errors"], "propagate": True}},
}

# --- Seedbed's own knobs ------------------------------------------------------------------------------
SEEDBED_RUNS_DIR = SEEDBED_HOME / "runs"
# Imported models, one folder per project (webapp.library): only the project's members may name them.
SEEDBED_LIBRARY_DIR = SEEDBED_HOME / "library"
# The folders a config submitted through the web app or the API may name as model_path or data_path: the
# built-in models and shared data under $SEEDBED_HOME, the library and run folders (where membership decides,
# webapp.projects.paths.config_path_error), and the folders the operator adds. Never the rest of $SEEDBED_HOME
# (the database, the secret key, the admin password, logs).
SEEDBED_DATA_ROOTS = [str(SEEDBED_HOME / "models"), str(SEEDBED_HOME / "data"), str(SEEDBED_LIBRARY_DIR),
                      str(SEEDBED_RUNS_DIR)] + [p for p in os.environ.get("SEEDBED_DATA_ROOTS", "").split(os.pathsep)
                                                if p.strip()]
# Seconds between a running run's heartbeats, and the age at which a heartbeat means the run is lost.
SEEDBED_HEARTBEAT_S = float(os.environ.get("SEEDBED_HEARTBEAT_S", "5"))
SEEDBED_LOST_AFTER_S = float(os.environ.get("SEEDBED_LOST_AFTER_S", "60"))
# A run whose worker was lost restarts after this many seconds, twice as long each next time (max_restarts).
SEEDBED_RESTART_BACKOFF_S = float(os.environ.get("SEEDBED_RESTART_BACKOFF_S", "10"))
# ... and never longer than this (10, 20, 40, 60, 60 ... s by default).
SEEDBED_RESTART_BACKOFF_MAX_S = float(os.environ.get("SEEDBED_RESTART_BACKOFF_MAX_S", "60"))
# A run that failed on a full disk ("no space left on device under ...") restarts from its last checkpoint once
# its folder's disk has this much free again (MB; a restart under max_restarts); the /status page and the doctor
# warn below SEEDBED_DISK_WARN_MB free under $SEEDBED_HOME (or its runs folder).
SEEDBED_DISK_RESUME_MB = float(os.environ.get("SEEDBED_DISK_RESUME_MB", "512"))
SEEDBED_DISK_WARN_MB = float(os.environ.get("SEEDBED_DISK_WARN_MB", "5120"))
# A queued run the broker took this long ago is looked for in the broker; if its message is gone, it is sent again.
SEEDBED_QUEUE_CHECK_S = float(os.environ.get("SEEDBED_QUEUE_CHECK_S", "30"))
# After a kill request, how long the loop gets to stop by itself before its process group is terminated.
SEEDBED_KILL_GRACE_S = float(os.environ.get("SEEDBED_KILL_GRACE_S", "30"))
# A running run whose step has not advanced for max(SEEDBED_STALL_FLOOR_S, SEEDBED_STALL_FACTOR x its median step
# time) is flagged stalled (webapp.runs.stall: the rule and its bounds; out of bounds: the settings refuse to load).
from webapp.runs import stall as _stall  # noqa: E402 (the bounds live beside the rule)

SEEDBED_STALL_FACTOR = _stall.bounded_setting("SEEDBED_STALL_FACTOR", _stall.DEFAULT_FACTOR, _stall.FACTOR_BOUNDS)
SEEDBED_STALL_FLOOR_S = _stall.bounded_setting("SEEDBED_STALL_FLOOR_S", _stall.DEFAULT_FLOOR_S, _stall.FLOOR_BOUNDS_S)
# Disk budgets (webapp.runs.disk_budget) where a project's staff-set budget is empty: one run's folder may take this
# fraction of the runs folder's disk, all of a project's runs together this fraction (0.001 to 1).
SEEDBED_RUN_DISK_FRACTION = _stall.bounded_setting("SEEDBED_RUN_DISK_FRACTION", 0.25, (0.001, 1.0))
SEEDBED_PROJECT_DISK_FRACTION = _stall.bounded_setting("SEEDBED_PROJECT_DISK_FRACTION", 0.5, (0.001, 1.0))
# Requests per API token (webapp.api.ratelimit: a token bucket of SEEDBED_API_RATE_BURST requests refilled at
# SEEDBED_API_RATE_PER_MIN a minute, in the broker's Redis; past it, 429 with Retry-After; out of bounds: the
# settings refuse to load).
from webapp.api import ratelimit as _ratelimit  # noqa: E402

SEEDBED_API_RATE_PER_MIN = _stall.bounded_setting("SEEDBED_API_RATE_PER_MIN", _ratelimit.DEFAULT_RATE_PER_MIN,
                                                  _ratelimit.RATE_BOUNDS)
SEEDBED_API_RATE_BURST = _stall.bounded_setting("SEEDBED_API_RATE_BURST", _ratelimit.DEFAULT_BURST,
                                                _ratelimit.BURST_BOUNDS)
# Queue for runs whose config says device "auto": "cpu" in the embedded default, "gpu" in production.
SEEDBED_AUTO_QUEUE = os.environ.get("SEEDBED_AUTO_QUEUE", "cpu")
SEEDBED_QUEUES = ("cpu", "gpu")
# Caps on what one config may ask of a worker (webapp.runs.capacity): at most what the largest worker reporting
# for the run's queue has (cores or GPUs, memory, how many workers), lowered by these when set (unset: no cap of
# the operator's; while no worker reports, these alone where set, else this host's cores and memory, and 8 nodes)
SEEDBED_MAX_RANKS_PER_NODE = int(os.environ["SEEDBED_MAX_RANKS_PER_NODE"]) if os.environ.get("SEEDBED_MAX_RANKS_PER_NODE") else None
SEEDBED_MAX_NODES = int(os.environ["SEEDBED_MAX_NODES"]) if os.environ.get("SEEDBED_MAX_NODES") else None
SEEDBED_MAX_SANDBOX_PROCS = int(os.environ["SEEDBED_MAX_SANDBOX_PROCS"]) if os.environ.get("SEEDBED_MAX_SANDBOX_PROCS") else None
SEEDBED_MAX_SANDBOX_MB = int(os.environ["SEEDBED_MAX_SANDBOX_MB"]) if os.environ.get("SEEDBED_MAX_SANDBOX_MB") else None
