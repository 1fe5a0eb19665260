"""How fast the dashboards are in a real browser at size, and what a stored point costs.

    python bench/dashboards.py [--quick] [--repeat 5] [--run-metrics 30] [--run-steps 100000]
                               [--sweep-seeds 64] [--sweep-metrics 3] [--sweep-steps 100000] [--live-pages 16]
                               [--flush-points 5000] [--mlflow-points 90000] [--home DIR] [--json FILE]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/seedbed_bench python bench/dashboards.py --quick

What: for each database (SQLite always; PostgreSQL too when $DATABASE_URL names a fresh, empty database) it
seeds a run and a sweep into a fresh $SEEDBED_HOME, serves them as production does and times, in headless
Chromium (Playwright, Debian's /usr/bin/chromium), logged in:

- the run page (``--run-metrics`` x ``--run-steps``): until its first six charts are drawn, and until all of
  them are (charts the page loads when scrolled into view or opened are scrolled to, one frame each, and
  opened, once the first six are drawn);
- the sweep page (``--sweep-seeds`` seeds x ``--sweep-steps`` steps of the drawn metric, plus other metrics up to
  ``--sweep-metrics``): until every seed's trace is drawn;
- a zoom into 1 % of the range of the run's first chart (``Plotly.relayout``) until the drawn line holds the
  stored points there, every step (full resolution);
- a live point: ``--live-pages`` pages of the run open in one browser, one point appended through the ingest
  service, until every page's chart has drawn it (the slowest page, and the median page);
- the database's size per million stored points (the SQLite file; on PostgreSQL the metric tables with their
  indexes and TOAST, ``pg_total_relation_size``);
- ingest: points/s of ``webapp.runs.services.run_metrics_append`` (the worker's path: everything seeded goes
  through it, in flushes of ``--flush-points``, by default the 5,000 the worker's sink flushes at most), and
  MLflow's ``MlflowClient().log_batch`` (SQLite tracking store, batches of 1,000 metrics, its limit) on the run's
  first ``--mlflow-points`` points, in the same process, against Seedbed on those same points (MLflow comes with
  the ``bench`` extra: ``pip install -e '.[bench]'``; without it that row says so).

Under the table it breaks the times down (when the HTML, Plotly and the first JSON answer arrived; for the live
point, when the poll that brought it was answered, the rest being the pages drawing it) and lists what went
wrong (a chart never drawn, a page error, a server error in gunicorn's log).

Why: the issue's targets (first charts < 1 s, all charts < 2 s, sweep < 1.5 s, zoom < 0.5 s, live <= 1 s,
ingest >= 5x MLflow's log_batch) are about what a user sees, so each time is read from what Plotly drew
(``gd.calcdata`` of each chart div: the points it computed for its traces, not the arrays handed to it), in the
page, each frame (requestAnimationFrame), from the navigation's start (or from the zoom call, or from the append).

How: each database runs in a child process of this script (Django's settings are per process): migrations, a
user in the default project with a session (as the tests' ``force_login``), the run (running, so the page stays
live) and the sweep (its runs running), curves as bench/sweep_dashboard.py draws them (noisy saturating rewards)
and other plausible shapes, each with a few one-step spikes; then gunicorn ``webapp.wsgi`` with 2 workers and
4 threads, as ``./seedbed up`` serves (DEBUG off; static files collected as ``./seedbed setup app`` does, hashed
and gzipped, served by WhiteNoise), and Chromium with the flags of tests/conftest.py. Each page is timed ``--repeat`` times (the median is
the figure) after a first load reported apart (a fresh browser context: no cached Plotly; the server's first
request for that page). The parent prints one table: row, SQLite, PostgreSQL, target, pass/fail.

The issue's sizes are the goal: a run of 30 metrics x 100 k steps, a sweep of 64 seeds x 30 metrics x 100 k steps
(192 M points). The defaults keep the run at that size and the sweep at 64 seeds x 100 k steps of 3 metrics (the
drawn one and two others; the sweep page draws one metric at a time); ``--quick`` is a smoke run (10 k steps,
8 seeds). What was scaled down is printed with the table.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchkit import setup_django  # noqa: E402  (bench/ is on sys.path: the script's folder)

# as tests/conftest.py drives Chromium
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
VIEWPORT = {"width": 1400, "height": 1000}

# The sizes (the goal) and targets (seconds; ingest: the Seedbed/MLflow ratio).
GOAL = {"run_metrics": 30, "run_steps": 100_000, "sweep_seeds": 64, "sweep_metrics": 30, "sweep_steps": 100_000}
QUICK = {"run_steps": 10_000, "sweep_seeds": 8, "sweep_steps": 10_000, "mlflow_points": 30_000}
DEFAULTS = {"run_metrics": 30, "run_steps": 100_000, "sweep_seeds": 64, "sweep_metrics": 3, "sweep_steps": 100_000,
            "mlflow_points": 90_000}
FIRST_CHARTS = 6

# 30 metric names a run logs (docs/architecture.md#the-training-core); the run page's charts come first, in the order it shows them.
METRICS = ["reward/mean", "accuracy", "entropy", "length/mean", "kl", "clip/low_frac", "clip/high_frac",
           "reward/std", "reward/math/mean", "reward/format/mean", "frac_zero_std_groups", "loss/policy",
           "opsm/masked_frac", "length/max", "length/clipped_frac", "grad_norm", "lr", "tokens_per_s",
           "step_time_s", "num_gen_batches", "reward/overlong/mean", "loss/kl", "loss/total", "advantage/mean",
           "advantage/std", "ratio/max", "length/min", "rollout/time_s", "optimizer/time_s", "weights/sync_s"]
SWEEP_METRIC = "reward/mean"  # the sweep's policy metric: the one its page draws first


# --- the curves --------------------------------------------------------------------------------------------

def curve(key: str, steps: int, rng) -> np.ndarray:
    """``steps`` values of metric ``key`` (index i = step i + 1): rewards saturate noisily as in
    bench/sweep_dashboard.py (half-life steps/20), the rest follow plausible shapes; each has a few one-step
    spikes (which the downsampling must keep)."""
    t = np.arange(1, steps + 1, dtype=np.float64)
    x = t / steps
    noise = rng.normal(0.0, 1.0, steps)
    level = rng.uniform(0.2, 0.8)
    saturating = level * (1 - 0.5 ** (t / max(1.0, steps / 20)))
    if key.startswith(("reward/", "accuracy", "eval/")) and key != "reward/std":
        values, scale = saturating + 0.05 * noise, 1.0
    elif key in ("entropy", "reward/std", "frac_zero_std_groups"):
        values, scale = 0.3 + 1.2 * np.exp(-3 * x) + 0.05 * noise, 1.0
    elif key.startswith(("loss/", "advantage/")):
        values, scale = -0.2 * saturating + 0.1 * noise, 1.0
    elif key == "kl" or key.startswith(("clip/", "opsm/", "length/clipped")):
        values, scale = np.abs(0.01 + 0.02 * x + 0.005 * noise), 0.1
    elif key.startswith("length/"):
        values, scale = 200 + 300 * x + 20 * noise, 500.0
    elif key == "lr":  # warm-up, then cosine: no noise
        warm = max(1, steps // 100)
        values, scale = np.where(t < warm, t / warm, 0.5 * (1 + np.cos(np.pi * x))) * 1e-6, 1e-6
    elif key == "num_gen_batches":
        values, scale = rng.integers(1, 4, steps).astype(np.float64), 3.0
    elif key == "grad_norm" or key == "ratio/max":
        values, scale = np.exp(0.3 * noise), 5.0
    else:  # throughput and timings
        values, scale = 2.0 + 0.1 * noise, 2.0
    spikes = rng.choice(steps, size=min(steps, 5), replace=False)
    values = values.copy()
    values[spikes] += 5 * scale
    return values


def flushes(curves: dict[str, np.ndarray], steps: int, flush_points: int):
    """The points of ``curves`` as a worker emits them, step by step (every metric of a step together), cut into
    flushes of about ``flush_points`` points on step boundaries: yields lists of (step, key, value)."""
    keys = list(curves)
    per_flush = max(1, flush_points // len(keys))
    for start in range(1, steps + 1, per_flush):
        end = min(steps, start + per_flush - 1)
        columns = [curves[k][start - 1:end].tolist() for k in keys]
        yield [(start + i, key, column[i]) for i in range(end - start + 1) for key, column in zip(keys, columns)]


# --- what the page drew (runs in the page) -------------------------------------------------------------------

# Installed before the page's own scripts (page.add_init_script): every frame it reads each chart's gd.calcdata and
# notes (performance.now(), ms since the navigation started) when a chart first holds, for each metric it shows
# that the run logged, a drawn trace of that name reaching the run's last step (run page), or when every seed's
# trace reaches the last step (sweep page).
RECORDER_JS = """
(() => {
  const cfg = __CFG__;
  const seen = {};
  performance.setResourceTimingBufferSize(100000);  // a page polling twice a second fills the default 250
  const state = window.__bench = {seen, cfg, sweepAt: null, seedsDrawn: 0};
  function reach(gd, i) {  // [number of drawn points with a numeric x, largest x]
    const cd = gd.calcdata && gd.calcdata[i];
    if (!cd) return [0, -Infinity];
    let n = 0, max = -Infinity;
    for (const p of cd) if (typeof p.x === "number" && isFinite(p.x)) { n++; if (p.x > max) max = p.x; }
    return [n, max];
  }
  function chartKeys(div) {
    return (div.dataset.keys || "").split(",").filter(k => cfg.logged.includes(k));
  }
  function chartDrawn(div) {
    if (!div.data || !div.calcdata) return false;
    return chartKeys(div).every(k => {
      const i = div.data.findIndex(t => t.name === k);
      if (i < 0) return false;
      const [n, max] = reach(div, i);
      return n >= 2 && max >= cfg.last;
    });
  }
  state.expected = () => Array.from(document.querySelectorAll(".chart")).filter(d => chartKeys(d).length);
  function tick() {
    if (state.stopped) return;
    const now = performance.now();
    if (cfg.mode === "run") {
      for (const div of state.expected()) if (!(div.id in seen) && chartDrawn(div)) seen[div.id] = now;
    } else if (state.sweepAt === null) {
      const gd = document.getElementById("sweep-chart");
      if (gd && gd.data && gd.calcdata) {
        const done = new Set();
        gd.data.forEach((t, i) => {
          const m = /seed\\s*(-?\\d+)/.exec(t.name || "");
          const [n, max] = reach(gd, i);
          if (m && n >= 2 && max >= cfg.last) done.add(m[1]);
        });
        state.seedsDrawn = done.size;
        if (done.size >= cfg.seeds) state.sweepAt = now;
      }
    }
    requestAnimationFrame(tick);
  }
  requestAnimationFrame(tick);
  // the first `first` charts (0: all), in the page's order, each drawn
  state.done = (first) => {
    const charts = state.expected();
    const want = first > 0 ? charts.slice(0, first) : charts;
    return want.length > 0 && want.every(d => d.id in seen);
  };
})();
"""

# Scrolls each chart not yet drawn into view, one frame each (opening a closed <details> holding it first): what a
# user scrolling through the page does, for charts the page draws only once they are seen.
SCROLL_JS = """async () => {
  const frame = () => new Promise(r => requestAnimationFrame(r));
  for (const d of document.querySelectorAll("details")) if (!d.open && d.querySelector(".chart")) d.open = true;
  for (const div of window.__bench.expected()) {
    if (div.id in window.__bench.seen) continue;
    div.scrollIntoView({block: "center"});
    await frame();
  }
}"""

READ_JS = """() => {
  const b = window.__bench, nav = performance.getEntriesByType("navigation")[0];
  const res = performance.getEntriesByType("resource");
  const find = (part) => res.find(r => r.name.includes(part));
  const first = (part) => { const e = find(part); return e ? e.responseEnd : null; };
  const charts = b.cfg.mode === "run" ? b.expected().map(d => ({id: d.id, keys: d.dataset.keys, at: b.seen[d.id] ?? null})) : [];
  return {charts, sweepAt: b.sweepAt, seedsDrawn: b.seedsDrawn,
          allCharts: Array.from(document.querySelectorAll(".chart")).map(d => d.dataset.keys || d.id),
          html: nav ? nav.responseEnd : null, ready: nav ? nav.domContentLoadedEventEnd : null,
          plotly: first("plotly"), live: first("live.json"), liveAsked: find("live.json") ? find("live.json").startTime : null,
          visibility: document.visibilityState};
}"""

# The drawn line of one chart (its trace named `key`): full resolution over [a, b] once its x values are
# consecutive steps covering the range. Returns performance.now() then (wait_for_function's value).
ZOOM_DONE_JS = """({id, key, a, b}) => {
  const gd = document.getElementById(id);
  if (!gd || !gd.data || !gd.calcdata) return false;
  const i = gd.data.findIndex(t => t.name === key);
  const cd = i < 0 ? null : gd.calcdata[i];
  if (!cd) return false;
  const xs = cd.map(p => p.x).filter(x => typeof x === "number" && isFinite(x));
  if (xs.length < 2 || xs[0] > Math.ceil(a) || xs[xs.length - 1] < Math.floor(b)) return false;
  for (let j = 1; j < xs.length; j++) if (xs[j] - xs[j - 1] !== 1) return false;
  return performance.now();
}"""

WHOLE_AGAIN_JS = """({id, key, last}) => {
  const gd = document.getElementById(id);
  const i = gd.data.findIndex(t => t.name === key);
  const cd = gd.calcdata[i] || [];
  const xs = cd.map(p => p.x).filter(x => typeof x === "number" && isFinite(x));
  return xs.length >= 2 && xs[xs.length - 1] >= last && xs[1] - xs[0] > 1;
}"""

# Live: each page notes (epoch ms, one clock for all pages and this process) when its chart's trace `key` first
# reaches `step` (the drawn points are in step order: the last one is the newest), checked every frame and every
# 10 ms; when the poll whose answer brought it was asked and answered (the last live.json answered before then);
# and how long the page's Plotly.react calls since that answer took (Plotly.react is wrapped to time them: the
# page calls the global Plotly.react, it draws as before).
LIVE_WATCH_JS = """({id, key, step}) => {
  window.__live = null;
  if (!window.__reacts) {
    window.__reacts = [];
    const react = Plotly.react;
    Plotly.react = function (...args) {
      const t = performance.now();
      try { return react.apply(this, args); } finally { window.__reacts.push([t, performance.now()]); }
    };
  }
  const check = () => {
    if (window.__live) return true;
    const gd = document.getElementById(id);
    if (!gd || !gd.data || !gd.calcdata) return false;
    const i = gd.data.findIndex(t => t.name === key);
    const cd = i < 0 ? null : gd.calcdata[i];
    if (!cd || !cd.length || !(cd[cd.length - 1].x >= step)) return false;
    const now = performance.now(), t0 = performance.timeOrigin;
    const polls = performance.getEntriesByType("resource").filter(r => r.name.includes("live.json") && r.responseEnd <= now);
    const poll = polls[polls.length - 1];
    const since = poll ? poll.responseEnd : now;
    const reacts = window.__reacts.filter(([a]) => a >= since);
    window.__live = {drawn: t0 + now, asked: poll ? t0 + poll.startTime : null, answered: poll ? t0 + poll.responseEnd : null,
                     reactStart: reacts.length ? t0 + reacts[0][0] : null,
                     reactMs: reacts.reduce((sum, [a, b]) => sum + b - a, 0), reacts: reacts.length};
    return true;
  };
  const frame = () => { if (!check()) requestAnimationFrame(frame); };
  const timer = setInterval(() => { if (check()) clearInterval(timer); }, 10);
  requestAnimationFrame(frame);
}"""


# --- the child: one database --------------------------------------------------------------------------------

def build(args):
    """The user (a member of the default project, with a session), the run and the sweep; nothing stored yet."""
    from datetime import timedelta

    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.utils import timezone

    from webapp.projects.models import Membership
    from webapp.projects.services import default_project
    from webapp.runs import services
    from webapp.runs.models import MetricPoint, Run, RunStatus
    from webapp.sweeps.models import Sweep, SweepPlan

    if Run.objects.exists() or MetricPoint.objects.exists():
        raise SystemExit("the database already holds runs: give bench/dashboards.py a fresh, empty database")
    project = default_project()
    user = get_user_model().objects.create_user(username="bench", password="bench-password-unused")
    Membership.objects.update_or_create(project=project, user=user, defaults={"role": "member"})
    client = Client()
    client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
    session = client.cookies[settings.SESSION_COOKIE_NAME].value

    def config(steps: int, seed: int) -> dict:
        return services.as_config({"preset": "grpo", "task": "arithmetic", "device": "cpu", "seed": seed,
                                   "total_steps": steps + 1000}).to_dict()

    now = timezone.now()
    started = now - timedelta(hours=10)
    run = Run.objects.create(project=project, config=config(args.run_steps, 0), seed=0, status=RunStatus.RUNNING,
                             started_at=started, heartbeat_at=now, name="bench run", queue="cpu")
    policy = {"name": "median", "metric": SWEEP_METRIC, "mode": "max", "max_steps": args.sweep_steps}
    sweep = Sweep.objects.create(project=project, name="bench sweep", config=config(args.sweep_steps, 0),
                                 seeds=list(range(args.sweep_seeds)), concurrency=args.sweep_seeds, policy=policy)
    SweepPlan.objects.create(sweep=sweep)
    sweep_runs = [Run.objects.create(project=project, sweep=sweep, config=config(args.sweep_steps, s), seed=s,
                                     status=RunStatus.RUNNING, started_at=started, heartbeat_at=now,
                                     name=f"bench sweep / seed {s}", queue="cpu")
                  for s in range(args.sweep_seeds)]
    return (settings.SESSION_COOKIE_NAME, session), run, sweep, sweep_runs


def seed(args, run, sweep_runs) -> dict:
    """Every point through run_metrics_append (timed: the ingest figure): the run, then the sweep's runs round
    robin, flush by flush (a sweep's seeds train side by side)."""
    from webapp.runs.services import run_metrics_append

    rng = np.random.default_rng(0)
    timings = []  # (points, seconds) per flush

    def append(run_id, points):
        t0 = time.perf_counter()
        run_metrics_append(run_id=run_id, points=points)
        timings.append((len(points), time.perf_counter() - t0))

    t_all = time.perf_counter()
    run_keys = METRICS[:args.run_metrics]
    for points in flushes({k: curve(k, args.run_steps, rng) for k in run_keys}, args.run_steps, args.flush_points):
        append(run.pk, points)
    run_flushes = len(timings)
    sweep_keys = [SWEEP_METRIC] + [k for k in METRICS if k != SWEEP_METRIC][:args.sweep_metrics - 1]
    streams = [flushes({k: curve(k, args.sweep_steps, rng) for k in sweep_keys}, args.sweep_steps, args.flush_points)
               for _ in sweep_runs]
    for batch in zip(*streams):
        for r, points in zip(sweep_runs, batch):
            append(r.pk, points)
    points = sum(n for n, _ in timings)
    seconds = sum(s for _, s in timings)
    return {"points": points, "seconds": seconds, "rate": points / seconds, "flushes": len(timings),
            "flush_points": statistics.median(n for n, _ in timings), "run_flushes": run_flushes,
            "timings": timings, "wall_s": time.perf_counter() - t_all,
            "run_keys": run_keys, "sweep_keys": sweep_keys}


def mlflow_ingest(args, home: str, ingest: dict) -> dict:
    """MLflow's log_batch (SQLite tracking store, 1,000 metrics a call) on the run's first points, regenerated
    exactly (same seed), against Seedbed's time for those same points (its first flushes)."""
    try:
        import mlflow
        from mlflow.entities import Metric
        from mlflow.tracking import MlflowClient
    except ImportError:
        return {"error": "mlflow is not installed (pip install -e '.[bench]')"}
    import logging

    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    rng = np.random.default_rng(0)
    run_keys = ingest["run_keys"]
    # whole flushes: the same points, in the same order, as Seedbed's first flushes of the run
    seedbed_points = seedbed_s = 0.0
    points = []
    for (n, s), flush in zip(ingest["timings"][:ingest["run_flushes"]],
                             flushes({k: curve(k, args.run_steps, rng) for k in run_keys}, args.run_steps,
                                     args.flush_points)):
        if seedbed_points >= args.mlflow_points:
            break
        seedbed_points += n
        seedbed_s += s
        points.extend(flush)
    client = MlflowClient(tracking_uri=f"sqlite:///{os.path.join(home, 'mlflow.sqlite3')}")
    mlflow_run = client.create_run(client.create_experiment("bench")).info.run_id
    stamp = int(time.time() * 1000)
    t0 = time.perf_counter()
    for start in range(0, len(points), 1000):
        client.log_batch(mlflow_run, metrics=[Metric(k, v, stamp + s, s) for s, k, v in points[start:start + 1000]])
    seconds = time.perf_counter() - t0
    return {"version": mlflow.__version__, "points": len(points), "seconds": seconds, "rate": len(points) / seconds,
            "seedbed_rate": seedbed_points / seedbed_s, "ratio": (seedbed_points / seedbed_s) / (len(points) / seconds)}


def database_size(points: int) -> dict:
    """Bytes per million stored points: the SQLite file (after a WAL checkpoint), or on PostgreSQL the metric tables
    (every table of the runs app named *metric*, with its indexes and TOAST)."""
    from django.apps import apps
    from django.conf import settings
    from django.db import connection

    tables = sorted(m._meta.db_table for m in apps.get_app_config("runs").get_models()
                    if "metric" in m._meta.db_table.lower())
    detail = {}
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            path = settings.DATABASES["default"]["NAME"]
            size = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
            what = "the SQLite file"
            try:  # per table with its indexes, where SQLite has dbstat compiled in
                cursor.execute("SELECT m.tbl_name, SUM(s.pgsize) FROM dbstat s JOIN sqlite_master m ON m.name = s.name "
                               "GROUP BY m.tbl_name")
                detail = {t: b for t, b in cursor.fetchall() if t in tables}
            except Exception:  # noqa: BLE001 - dbstat is optional in SQLite builds
                detail = {}
        else:
            for table in tables:
                cursor.execute("ANALYZE " + connection.ops.quote_name(table))  # steady state: autovacuum would
                cursor.execute("SELECT pg_total_relation_size(%s)", [table])
                detail[table] = cursor.fetchone()[0]
            size = sum(detail.values())
            cursor.execute("SELECT pg_database_size(current_database())")
            detail["(whole database)"] = cursor.fetchone()[0]
            what = "the metric tables (pg_total_relation_size)"
    return {"bytes": size, "points": points, "mb_per_million": size / 1e6 / (points / 1e6), "what": what,
            "tables": detail}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(home: str):
    """gunicorn webapp.wsgi as ./seedbed up starts it (2 workers, 4 threads), DEBUG off; waits for the login page."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}  # this process's need only
    env.update({"DJANGO_DEBUG": "0", "PYTHONPATH": REPO, "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost"})
    log = open(os.path.join(home, "gunicorn.log"), "w")
    proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "webapp.wsgi", "--bind", f"127.0.0.1:{port}",
                             "--workers", "2", "--threads", "4", "--graceful-timeout", "5",
                             "--access-logfile", "-",
                             # not the one control socket of this user (~/.gunicorn): a ./seedbed up may hold it
                             "--no-control-socket"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"gunicorn exited; see {log.name}")
        try:
            urllib.request.urlopen(base + "/accounts/login/", timeout=2)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"gunicorn did not answer in 120 s; see {log.name}")
            time.sleep(0.3)
    return proc, base, log


def stop(proc) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


class Browser:
    """Headless Chromium (Playwright) with the bench user's session; pages record what they drew."""

    def __init__(self, playwright, base: str, session: tuple[str, str], timeout_s: float):
        self.browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        self.base, self.session, self.timeout_ms = base, session, timeout_s * 1000
        self.problems: list[str] = []

    def context(self):
        context = self.browser.new_context(viewport=VIEWPORT)
        context.add_cookies([{"name": self.session[0], "value": self.session[1], "url": self.base}])
        return context

    def page(self, context, cfg: dict | None = None):
        page = context.new_page()
        page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        page.on("console", lambda m: m.type == "error" and self.problems.append(f"console: {m.text}"))
        if cfg is not None:
            page.add_init_script(RECORDER_JS.replace("__CFG__", json.dumps(cfg)))
        return page

    def open(self, page, path: str):
        response = page.goto(self.base + path, wait_until="commit")
        if response is None or response.status != 200 or "/accounts/login/" in page.url:
            raise SystemExit(f"{path}: HTTP {response and response.status} at {page.url}")

    def wait(self, page, js: str, arg=None):
        """wait_for_function polled each frame; None when it timed out."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        try:
            return page.wait_for_function(js, arg=arg, polling="raf", timeout=self.timeout_ms).json_value()
        except PlaywrightTimeout:
            return None


def run_page_loads(b: Browser, run, last: int, logged: list[str], repeat: int) -> list[dict]:
    """1 + ``repeat`` loads of the run page: ms until the first six charts, and all, are drawn."""
    context, loads = b.context(), []
    for i in range(1 + repeat):
        page = b.page(context, {"mode": "run", "last": last, "logged": logged})
        b.open(page, f"/runs/{run.pk}/")
        first_ok = b.wait(page, f"() => window.__bench && window.__bench.done({FIRST_CHARTS})")
        page.evaluate(SCROLL_JS)
        all_ok = b.wait(page, "() => window.__bench.done(0)")
        info = page.evaluate(READ_JS)
        at = [c["at"] for c in info["charts"]]
        info["first"] = max(at[:FIRST_CHARTS]) if first_ok and at else None
        info["all"] = max(at) if all_ok and at else None
        if info["first"] is None or info["all"] is None:
            missing = [c["keys"] for c in info["charts"] if c["at"] is None]
            b.problems.append(f"run page load {i}: not drawn within the timeout: {missing}")
        loads.append(info)
        page.close()
    context.close()
    return loads


def sweep_page_loads(b: Browser, sweep, seeds: int, last: int, repeat: int) -> list[dict]:
    context, loads = b.context(), []
    for i in range(1 + repeat):
        page = b.page(context, {"mode": "sweep", "last": last, "seeds": seeds, "logged": []})
        b.open(page, f"/sweeps/{sweep.pk}/")
        b.wait(page, "() => window.__bench && window.__bench.sweepAt !== null")
        info = page.evaluate(READ_JS)
        if info["sweepAt"] is None:
            b.problems.append(f"sweep page load {i}: {info['seedsDrawn']} of {seeds} seeds drawn within the timeout")
        loads.append(info)
        page.close()
    context.close()
    return loads


def zooms(b: Browser, run, last: int, logged: list[str], repeat: int) -> list[float | None]:
    """1 + ``repeat`` zooms of the run's first chart into 1 % of the range, at different places: ms from the
    Plotly.relayout call until every stored step of the range is drawn."""
    context = b.context()
    page = b.page(context, {"mode": "run", "last": last, "logged": logged})
    b.open(page, f"/runs/{run.pk}/")
    b.wait(page, "() => window.__bench && window.__bench.done(1)")
    chart = page.evaluate("() => window.__bench.expected()[0].id")
    key = page.evaluate("(id) => document.getElementById(id).dataset.keys.split(',')[0]", chart)
    span = max(2, round(last / 100))
    times = []
    for i in range(1 + repeat):
        a = 1 + round((0.1 + 0.8 * i / max(1, repeat)) * (last - span - 1))
        t0 = page.evaluate("([id, a, b]) => { const t = performance.now(); "
                           "Plotly.relayout(id, {'xaxis.range': [a, b]}); return t; }", [chart, a, a + span])
        done = b.wait(page, ZOOM_DONE_JS, {"id": chart, "key": key, "a": a, "b": a + span})
        times.append(None if done is None else done - t0)
        if done is None:
            b.problems.append(f"zoom {i} into [{a}, {a + span}] of {chart}: not at full resolution within the timeout")
        page.evaluate("(id) => Plotly.relayout(id, {'xaxis.autorange': true})", chart)
        b.wait(page, WHOLE_AGAIN_JS, {"id": chart, "key": key, "last": last})
    context.close()
    return times


def live(b: Browser, run, last: int, logged: list[str], pages: int, repeat: int) -> dict:
    """``pages`` pages of the run in one browser; 1 + ``repeat`` times one point appended through
    run_metrics_append: ms from the call until each page's first chart has drawn it."""
    import random

    from webapp.runs.services import run_metrics_append

    context = b.context()
    opened = []
    for _ in range(pages):
        page = b.page(context, {"mode": "run", "last": last, "logged": logged})
        b.open(page, f"/runs/{run.pk}/")
        opened.append(page)
    for page in opened:
        if not b.wait(page, "() => window.__bench && window.__bench.done(1)"):
            raise SystemExit("live: a page never drew its first chart")
        page.evaluate("() => { window.__bench.stopped = true; }")  # its watcher below is all that runs now
    chart = opened[0].evaluate("() => window.__bench.expected()[0].id")
    key = opened[0].evaluate("(id) => document.getElementById(id).dataset.keys.split(',')[0]", chart)
    visibility = sorted({p.evaluate("() => document.visibilityState") for p in opened})
    reps, rng, step = [], random.Random(1), last
    for _ in range(1 + repeat):
        time.sleep(rng.uniform(0.5, 1.5))  # a random phase against the pages' polling
        step += 1
        for page in opened:
            page.evaluate(LIVE_WATCH_JS, {"id": chart, "key": key, "step": step})
        t0 = time.time() * 1000
        run_metrics_append(run_id=run.pk, points=[(step, key, 0.5)])
        deadline = time.monotonic() + b.timeout_ms / 1000
        while True:
            seen = [p.evaluate("() => window.__live") for p in opened]
            if all(s is not None for s in seen) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        lat = [None if s is None else s["drawn"] - t0 for s in seen]
        answered = [s["answered"] - t0 for s in seen if s is not None and s["answered"] is not None]
        waited = [s["answered"] - s["asked"] for s in seen if s is not None and s["answered"] is not None]
        to_react = [s["reactStart"] - s["answered"] for s in seen
                    if s is not None and s["answered"] is not None and s["reactStart"] is not None]
        react_ms = [s["reactMs"] for s in seen if s is not None]
        if any(x is None for x in lat):
            b.problems.append(f"live step {step}: {lat.count(None)} of {pages} pages never drew it")
        got = [x for x in lat if x is not None]
        reps.append({"step": step, "max": max(got) if len(got) == len(lat) else None,
                     "median": statistics.median(got) if got else None, "pages": lat,
                     "answered_median": statistics.median(answered) if answered else None,
                     "answered_max": max(answered) if answered else None,
                     "poll_median": statistics.median(waited) if waited else None,
                     "to_react_median": statistics.median(to_react) if to_react else None,
                     "react_median": statistics.median(react_ms) if react_ms else None,
                     "reacts": statistics.median(s["reacts"] for s in seen if s is not None) if got else None})
    context.close()
    return {"reps": reps, "chart": chart, "key": key, "visibility": visibility}


def child(args) -> None:
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs an event loop in this thread
    os.environ["DJANGO_DEBUG"] = "0"
    setup_django(fresh_home=False, collect_static=True)
    from django.db import connection
    from playwright.sync_api import sync_playwright

    home = os.environ["SEEDBED_HOME"]
    out = {"backend": connection.vendor, "notes": []}
    session, run, sweep, sweep_runs = build(args)
    log(f"[{connection.vendor}] seeding through run_metrics_append ...")
    ingest = seed(args, run, sweep_runs)
    log(f"[{connection.vendor}] {ingest['points']:,} points in {ingest['seconds']:.1f} s of ingest "
        f"({ingest['rate']:,.0f}/s); MLflow on the run's first {args.mlflow_points:,} ...")
    out["mlflow"] = mlflow_ingest(args, home, ingest)
    out["ingest"] = {k: v for k, v in ingest.items() if k != "timings"}
    out["db"] = database_size(ingest["points"])
    out["sizes"] = {"run_metrics": len(ingest["run_keys"]), "run_steps": args.run_steps,
                    "sweep_seeds": args.sweep_seeds, "sweep_metrics": len(ingest["sweep_keys"]),
                    "sweep_steps": args.sweep_steps, "sweep_keys": ingest["sweep_keys"]}
    connection.close()
    out["load"] = os.getloadavg()[0]
    proc, base, server_log = serve(home)
    log(f"[{connection.vendor}] serving on {base}; timing in Chromium ...")
    try:
        with sync_playwright() as p:
            b = Browser(p, base, session, args.timeout)
            try:
                out["run_page"] = run_page_loads(b, run, args.run_steps, ingest["run_keys"], args.repeat)
                out["sweep_page"] = sweep_page_loads(b, sweep, args.sweep_seeds, args.sweep_steps, args.repeat)
                out["zoom"] = zooms(b, run, args.run_steps, ingest["run_keys"], args.repeat)
                out["live"] = live(b, run, args.run_steps, ingest["run_keys"], args.live_pages, args.repeat)
            finally:
                out["problems"] = b.problems
                b.browser.close()
    finally:
        stop(proc)
        server_log.close()
        connection.close()
    text = open(server_log.name, errors="replace").read()
    errors = [line for line in text.splitlines() if '" 500 ' in line or "Traceback" in line or "[CRITICAL]" in line]
    if errors:
        out["problems"].append(f"server: {len(errors)} error lines in {server_log.name}, e.g. {errors[0][:200]}")
    with open(args.child, "w") as f:
        json.dump(out, f)


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# --- the parent: one child per database, one table ----------------------------------------------------------

def median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def figures(result: dict) -> dict:
    """The table's numbers (seconds, MB, points/s) from one child's result."""
    run, sweep, zoom, live_ = result["run_page"], result["sweep_page"], result["zoom"], result["live"]
    ms = lambda v: None if v is None else v / 1000  # noqa: E731
    reps = live_["reps"]
    mlflow = result["mlflow"]
    return {
        "first": ms(median_or_none(l["first"] for l in run[1:])), "first_cold": ms(run[0]["first"]),
        "all": ms(median_or_none(l["all"] for l in run[1:])), "all_cold": ms(run[0]["all"]),
        "sweep": ms(median_or_none(l["sweepAt"] for l in sweep[1:])), "sweep_cold": ms(sweep[0]["sweepAt"]),
        "zoom": ms(median_or_none(zoom[1:])), "zoom_cold": ms(zoom[0]),
        "live": ms(median_or_none(r["max"] for r in reps[1:])), "live_median": ms(median_or_none(r["median"] for r in reps[1:])),
        "live_first": ms(reps[0]["max"]), "live_worst": ms(max((r["max"] or math.inf) for r in reps)),
        "db": result["db"]["mb_per_million"], "ingest": result["ingest"]["rate"],
        "mlflow": mlflow.get("rate"), "seedbed_same": mlflow.get("seedbed_rate"), "ratio": mlflow.get("ratio"),
    }


TITLES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}


def table(results: dict[str, dict], live_pages: int, repeat: int) -> list[str]:
    n_charts = {name: len(r["run_page"][0]["charts"]) for name, r in results.items()}
    charts = "/".join(sorted({str(n) for n in n_charts.values()}))
    mlflow_points = next(iter(results.values()))["mlflow"].get("points", 0)
    rows = [  # key, label, unit, target text, limit, better
        ("first", f"run page: first {FIRST_CHARTS} charts drawn (median of {repeat})", "s", "< 1 s", 1.0, "<"),
        ("first_cold", "    first load", "s", "", None, ""),
        ("all", f"run page: all {charts} charts drawn (median of {repeat})", "s", "< 2 s", 2.0, "<"),
        ("all_cold", "    first load", "s", "", None, ""),
        ("sweep", f"sweep page: every seed's trace drawn (median of {repeat})", "s", "< 1.5 s", 1.5, "<"),
        ("sweep_cold", "    first load", "s", "", None, ""),
        ("zoom", f"zoom to 1 %: full-resolution points drawn (median of {repeat})", "s", "< 0.5 s", 0.5, "<"),
        ("zoom_cold", "    first zoom", "s", "", None, ""),
        ("live", f"live point logged -> drawn, slowest of {live_pages} pages (median of {repeat})", "s", "<= 1 s", 1.0, "<="),
        ("live_median", f"    median page (median of {repeat})", "s", "", None, ""),
        ("live_first", "    first point, slowest page", "s", "", None, ""),
        ("live_worst", f"    worst of {repeat + 1}, slowest page", "s", "", None, ""),
        ("db", "database size per million points", "MB", "", None, ""),
        ("ingest", "ingest: run_metrics_append (all seeding)", "pts/s", "", None, ""),
        ("seedbed_same", f"ingest: Seedbed on the run's first {mlflow_points:,} points", "pts/s", "", None, ""),
        ("mlflow", "ingest: MLflow log_batch on the same points", "pts/s", "", None, ""),
        ("ratio", "ingest: Seedbed / MLflow", "x", ">= 5x", 5.0, ">="),
    ]
    names = list(results)
    figs = {name: figures(r) for name, r in results.items()}

    def fmt(v, unit):
        if v is None or (isinstance(v, float) and math.isinf(v)):
            return "—"
        if unit == "s":
            return f"{v:.3f} s"
        if unit == "MB":
            return f"{v:.1f} MB"
        if unit == "x":
            return f"{v:.1f}x"
        return f"{v:,.0f}"

    def verdict(v, limit, better):
        if limit is None:
            return ""
        if v is None:
            return "n/a"
        ok = v < limit if better == "<" else v <= limit if better == "<=" else v >= limit
        return "pass" if ok else "FAIL"

    header = ["", *(TITLES[n] for n in names), "target", "pass/fail" + (" (" + " / ".join(TITLES[n] for n in names) + ")"
                                                                       if len(names) > 1 else "")]
    body = [[label, *(fmt(figs[n][key], unit) for n in names), target,
             " / ".join(verdict(figs[n][key], limit, better) for n in names) if limit else ""]
            for key, label, unit, target, limit, better in rows]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in [header, *body]]
    lines.insert(1, "-" * len(lines[0]))
    return lines


def report(results: dict[str, dict], args) -> None:
    any_result = next(iter(results.values()))
    s = any_result["sizes"]
    run_points, sweep_points = s["run_metrics"] * s["run_steps"], s["sweep_seeds"] * s["sweep_metrics"] * s["sweep_steps"]
    print(f"sizes: run page {s['run_metrics']} metrics x {s['run_steps']:,} steps = {run_points:,} points; "
          f"sweep {s['sweep_seeds']} seeds x {s['sweep_metrics']} metrics ({', '.join(s['sweep_keys'])}) x "
          f"{s['sweep_steps']:,} steps = {sweep_points:,} points; flushes of {args.flush_points:,} points")
    print(f"machine: {os.cpu_count()} cores; load average when the browser timings began: "
          + ", ".join(f"{TITLES[n]} {r['load']:.1f}" for n, r in results.items()))
    goal_sweep = GOAL["sweep_seeds"] * GOAL["sweep_metrics"] * GOAL["sweep_steps"]
    scaled = [f"{name} {s[name]:,} (goal {GOAL[name]:,})" for name in GOAL if s[name] != GOAL[name]]
    if scaled:
        print(f"scaled down from the issue's sizes (run {GOAL['run_metrics']} x {GOAL['run_steps']:,}; sweep "
              f"{GOAL['sweep_seeds']} x {GOAL['sweep_metrics']} x {GOAL['sweep_steps']:,} = {goal_sweep:,} points): "
              + "; ".join(scaled))
    print()
    for line in table(results, args.live_pages, args.repeat):
        print(line)
    print()
    for name, r in results.items():
        first = r["run_page"][1:] or r["run_page"]
        keys = sorted({k for c in r["run_page"][0]["charts"] for k in c["keys"].split(",")})
        logged = s["run_metrics"]
        med = lambda field: median_or_none(l[field] for l in first)  # noqa: E731
        print(f"[{name}] run page: {len(r['run_page'][0]['charts'])} charts showing {len(keys)} of the {logged} "
              f"logged metrics; medians from navigation start: HTML {fmt_ms(med('html'))}, plotly.min.js "
              f"{fmt_ms(med('plotly'))}, scripts run (DOMContentLoaded) {fmt_ms(med('ready'))}, first live.json asked "
              f"{fmt_ms(med('liveAsked'))} and answered {fmt_ms(med('live'))}")
        sw = r["sweep_page"][1:] or r["sweep_page"]
        smed = lambda field: median_or_none(l[field] for l in sw)  # noqa: E731
        print(f"[{name}] sweep page: medians from navigation start: HTML {fmt_ms(smed('html'))}, scripts run "
              f"{fmt_ms(smed('ready'))}, first live.json asked {fmt_ms(smed('liveAsked'))} and answered "
              f"{fmt_ms(smed('live'))}")
        print(f"[{name}] live: {len(r['live']['reps'][0]['pages'])} pages, visibility {r['live']['visibility']}, "
              f"chart {r['live']['chart']} ({r['live']['key']}); per append, slowest/median page (s): "
              + ", ".join(f"{fmt_s(x['max'])}/{fmt_s(x['median'])}" for x in r["live"]["reps"]))
        reps = r["live"]["reps"][1:] or r["live"]["reps"]
        print(f"[{name}] live, medians over appends: the poll that brought the point answered after "
              f"{fmt_s(median_or_none(x['answered_median'] for x in reps))} s (median page), "
              f"{fmt_s(median_or_none(x['answered_max'] for x in reps))} s (slowest page); that poll took "
              f"{fmt_s(median_or_none(x['poll_median'] for x in reps))} s; from its answer to the page's first "
              f"Plotly.react {fmt_s(median_or_none(x['to_react_median'] for x in reps))} s (JSON parsed, main thread "
              f"free), then {median_or_none(x['reacts'] for x in reps) or 0:.0f} Plotly.react calls took "
              f"{fmt_s(median_or_none(x['react_median'] for x in reps))} s (median page)")
        db = r["db"]
        print(f"[{name}] database: {db['bytes'] / 1e6:,.1f} MB ({db['what']}) for {db['points']:,} points; "
              + ", ".join(f"{t} {b / 1e6:,.1f} MB" for t, b in db["tables"].items()))
        ing, ml = r["ingest"], r["mlflow"]
        print(f"[{name}] ingest: {ing['points']:,} points in {ing['flushes']:,} flushes (median {ing['flush_points']:,.0f} "
              f"points) in {ing['seconds']:.1f} s; "
              + (f"MLflow {ml['version']} (SQLite store): {ml['points']:,} points in {ml['seconds']:.1f} s"
                 if "rate" in ml else f"MLflow: {ml['error']}"))
        for problem in r.get("problems", [])[:12]:
            print(f"[{name}] problem: {problem}")


def fmt_ms(v):
    return "—" if v is None else f"{v:.0f} ms"


def fmt_s(v):
    return "—" if v is None else f"{v / 1000:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 10 k steps, 8 seeds, MLflow on 30 k points (flags given win)")
    parser.add_argument("--run-metrics", type=int, help="metrics of the run page's run (default 30, at most 30)")
    parser.add_argument("--run-steps", type=int, help="steps of the run page's run (default 100,000)")
    parser.add_argument("--sweep-seeds", type=int, help="seeds of the sweep (default 64)")
    parser.add_argument("--sweep-metrics", type=int, help="metrics each seed logs (default 3; the issue's goal is 30)")
    parser.add_argument("--sweep-steps", type=int, help="steps of each seed (default 100,000)")
    parser.add_argument("--repeat", type=int, default=5, help="timed loads after the first (the median is reported)")
    parser.add_argument("--live-pages", type=int, default=16, help="pages of the run open for the live point")
    parser.add_argument("--flush-points", type=int, default=5000,
                        help="points per run_metrics_append call (the worker's sink flushes at most 5,000)")
    parser.add_argument("--mlflow-points", type=int, help="points MLflow logs (default 90,000)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds to wait for a page to draw")
    parser.add_argument("--home", help="a folder for the databases, logs and MLflow store (kept); default a "
                                       "temporary one, removed afterwards")
    parser.add_argument("--json", help="write every measurement here")
    parser.add_argument("--only", choices=["sqlite", "postgresql"], help="one database only")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    for name, default in DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, QUICK.get(name, default) if args.quick else default)
    args.run_metrics = min(args.run_metrics, len(METRICS))
    args.sweep_metrics = min(args.sweep_metrics, len(METRICS))
    if args.child:
        child(args)
        return

    home = args.home or tempfile.mkdtemp(prefix="seedbed-dashboards-")
    database_url = os.environ.get("DATABASE_URL", "")
    backends = [b for b in ("sqlite", "postgresql") if (b == "sqlite" or database_url) and args.only in (None, b)]
    if not backends:
        raise SystemExit("--only postgresql needs $DATABASE_URL (a fresh, empty PostgreSQL database)")
    results = {}
    try:
        for backend in backends:
            folder = os.path.join(home, backend)
            os.makedirs(folder, exist_ok=True)
            env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
            env.update({"SEEDBED_HOME": folder, "DJANGO_SETTINGS_MODULE": "webapp.settings", "PYTHONPATH": REPO})
            if backend == "postgresql":
                env["DATABASE_URL"] = database_url
            out = os.path.join(folder, "result.json")
            argv = sys.argv[1:]
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, os.path.abspath(__file__), *argv, "--child", out], env=env, cwd=REPO)
            if done.returncode != 0:
                raise SystemExit(f"the {backend} bench failed (exit {done.returncode}); its files are in {folder}")
            with open(out) as f:
                results[backend] = json.load(f)
            log(f"[{backend}] done in {time.perf_counter() - t0:.0f} s")
    finally:
        if args.home or len(results) < len(backends):
            log(f"files kept in {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    report(results, args)


if __name__ == "__main__":
    main()
