"""The stall rule (webapp.runs.stall) on the database: the step's clock and pace kept where metrics are stored, the
flag computed from them on the run page, in the runs list, in the API's run list and detail, and raised as a sweep
alert by the sweep check (the maintenance pass's), cleared once the step advances."""
from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.conftest import REPO, logged_in, tiny_config
from webapp.projects.services import default_project
from webapp.runs import services
from webapp.runs.models import Run, RunStatus
from webapp.sweeps.models import Alert, AlertKind, Sweep

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


@pytest.fixture(autouse=True)
def stall_rule(settings):
    settings.SEEDBED_STALL_FACTOR = 10.0
    settings.SEEDBED_STALL_FLOOR_S = 60.0


def running_run(**fields) -> Run:
    now = timezone.now()
    return Run.objects.create(project=default_project(), config=tiny_config(total_steps=100), seed=0,
                              status=RunStatus.RUNNING, started_at=now, heartbeat_at=now, **fields)


def stalled_run(**fields) -> Run:
    """Step 7, a median step of 2 s (threshold max(60, 20) = 60 s), no step for 90 s, heartbeating."""
    return running_run(last_step=7, median_step_s=2.0, step_advanced_at=timezone.now() - timedelta(seconds=90),
                       **fields)


def test_an_advancing_step_sets_the_clock_and_the_median_and_a_sample_at_the_same_step_does_not():
    run = running_run()
    services.run_metrics_append(run_id=run.pk, points=[(1, "step_time_s", 0.5), (1, "reward/mean", 0.1)])
    services.run_metrics_append(run_id=run.pk, points=[(2, "step_time_s", 0.7), (3, "step_time_s", 9.0)])
    run.refresh_from_db()
    assert run.last_step == 3 and run.median_step_s == pytest.approx(0.7)  # the median, not the mean (3.4)
    advanced = run.step_advanced_at
    assert advanced is not None and (timezone.now() - advanced).total_seconds() < 5
    # the worker's system metrics land at the run's latest step: they are no step, the clock stays
    services.run_metrics_append(run_id=run.pk, points=[(3, "system/rss_mb", 900.0)])
    run.refresh_from_db()
    assert run.step_advanced_at == advanced


def test_an_engine_without_step_times_is_paced_by_its_mean_step():
    run = running_run(first_step_at=timezone.now() - timedelta(seconds=100), last_step=4)
    services.run_metrics_append(run_id=run.pk, points=[(5, "reward/mean", 0.1)])
    run.refresh_from_db()
    assert run.median_step_s == pytest.approx(20.0, rel=0.05)  # 100 s over 5 steps


def test_a_run_is_stalled_past_the_threshold_and_clears_when_its_step_advances():
    run = stalled_run()
    assert run.stalled_for_s == pytest.approx(90, abs=5)
    assert "no step for 1 min 3" in run.stall_note and "after step 7" in run.stall_note
    services.run_metrics_append(run_id=run.pk, points=[(8, "step_time_s", 2.0)])
    run.refresh_from_db()
    assert run.stalled_for_s is None and run.stall_note == ""


def test_a_slow_run_gets_factor_times_its_median_and_a_run_with_no_timed_step_is_never_stalled():
    slow = running_run(last_step=3, median_step_s=30.0, step_advanced_at=timezone.now() - timedelta(seconds=200))
    assert slow.stalled_for_s is None  # 200 s < 10 x 30 s
    slow.step_advanced_at = timezone.now() - timedelta(seconds=310)
    assert slow.stalled_for_s == pytest.approx(310, abs=5)
    loading = running_run(step_advanced_at=timezone.now() - timedelta(hours=1))  # no median: no step timed yet
    assert loading.stalled_for_s is None
    ended = stalled_run()
    ended.status = RunStatus.KILLED
    assert ended.stalled_for_s is None


def test_a_claim_restarts_the_clock_of_a_resumed_run():
    run = Run.objects.create(project=default_project(), config=tiny_config(total_steps=100), seed=0, last_step=7,
                             median_step_s=2.0, step_advanced_at=timezone.now() - timedelta(hours=3))
    assert services.run_start(run_id=run.pk, worker="host:1") == "start"
    run.refresh_from_db()
    assert run.stalled_for_s is None and (timezone.now() - run.step_advanced_at).total_seconds() < 5


def test_the_page_the_list_and_the_api_show_a_stalled_run_and_not_a_moving_one(user, client):
    from webapp.api.services import token_create

    stalled, moving = stalled_run(name="frozen"), running_run(name="moving", last_step=7, median_step_s=2.0,
                                                             step_advanced_at=timezone.now())
    browser = logged_in(user)
    page = browser.get(f"/runs/{stalled.pk}/").content.decode()
    assert 'id="stall-note"' in page and "stalled: no step for" in page and f'id="stalled-{stalled.pk}"' in page
    assert 'id="stall-note"' not in browser.get(f"/runs/{moving.pk}/").content.decode()
    rows = browser.get("/runs/").content.decode()
    assert f'id="stalled-{stalled.pk}"' in rows and f'id="stalled-{moving.pk}"' not in rows
    token = token_create(user=user, name="tests")[1]
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    listed = {r["id"]: r for r in client.get("/api/v1/runs", **auth).json()["runs"]}
    assert listed[stalled.pk]["stalled"] is True and listed[stalled.pk]["stalled_for_s"] >= 89
    assert listed[moving.pk]["stalled"] is False and listed[moving.pk]["stalled_for_s"] is None
    detail = client.get(f"/api/v1/runs/{stalled.pk}", **auth).json()
    assert detail["stalled"] is True and detail["median_step_s"] == 2.0 and detail["step_advanced_at"]


def test_a_stalled_run_of_a_sweep_raises_one_stalled_alert():
    from webapp.sweeps import services as sweep_services

    sweep = Sweep.objects.create(project=default_project(), config=tiny_config(total_steps=100), seeds=[0, 1])
    stalled = stalled_run(sweep=sweep)
    running_run(sweep=sweep, last_step=7, median_step_s=2.0, step_advanced_at=timezone.now())
    new = sweep_services.sweep_check_alerts(sweep_id=sweep.pk)
    assert [(a.run_id, a.kind) for a in new] == [(stalled.pk, AlertKind.STALLED)]
    alert = new[0]
    assert alert.value == pytest.approx(90, abs=5) and alert.bound == 60.0 and "no step for" in alert.message
    assert sweep_services.sweep_check_alerts(sweep_id=sweep.pk) == []  # once per run
    assert Alert.objects.filter(sweep=sweep).count() == 1


@pytest.mark.parametrize("name, value", [("SEEDBED_STALL_FACTOR", "1"), ("SEEDBED_STALL_FLOOR_S", "abc"),
                                         ("SEEDBED_STALL_FLOOR_S", "100000")])
def test_an_out_of_bounds_stall_setting_stops_the_settings_naming_it(name, value):
    env = {**os.environ, name: value, "DJANGO_SETTINGS_MODULE": "webapp.settings"}
    result = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and f"{name}: {value} is out of bounds" in result.stderr, result.stderr


def test_the_cli_shows_the_api_s_stall_in_its_runs_list_and_its_watch_line():
    from seedbed_client.commands import _status_text
    from seedbed_client.watch import progress_line

    stalled = {"status": "running", "stalled": True, "stalled_for_s": 90.2, "last_step": 7, "total_steps": 100}
    assert _status_text(stalled) == "running, stalled 90 s"
    assert "7/100 running (stalled: no step for 90 s)" in progress_line(stalled, None)
    moving = {**stalled, "stalled": False, "stalled_for_s": None}
    assert _status_text(moving) == "running" and "stalled" not in progress_line(moving, None)


def test_the_sweep_dashboard_s_runs_table_shows_a_stalled_seed(user):
    from webapp.sweeps.selectors import sweep_runs_table

    sweep = Sweep.objects.create(project=default_project(), config=tiny_config(total_steps=100), seeds=[0, 1])
    stalled = stalled_run(sweep=sweep)
    moving = running_run(sweep=sweep, last_step=7, median_step_s=2.0, step_advanced_at=timezone.now())
    rows = {r["id"]: r for r in sweep_runs_table(sweep=sweep)}
    assert rows[stalled.pk]["stalled_for_s"] >= 89 and rows[moving.pk]["stalled_for_s"] is None
    page = logged_in(user).get(f"/sweeps/{sweep.pk}/").content.decode()
    assert f'id="stalled-{stalled.pk}"' in page and f'id="stalled-{moving.pk}"' not in page
