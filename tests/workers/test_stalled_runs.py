"""Stalled runs on a real worker (real Redis, a real Celery worker, real training on the tiny model): a run whose
training process is SIGSTOPped goes on heartbeating, yet is flagged stalled (webapp.runs.stall) within the
threshold on its page, in the runs list, in the API and in the CLI, and the flag clears once the process goes on;
a run progressing normally under the same rule is never flagged."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from django.test import Client

from tests.conftest import REPO, logged_in, tiny_config, wait_for
from webapp.runs import services
from webapp.runs.models import Run, RunStatus
from webapp.runs.stall import stall_threshold_s

pytestmark = pytest.mark.django_db(transaction=True)
RUN_TIMEOUT = 240
FACTOR, FLOOR_S = 10.0, 5.0  # the tiny model's steps take well under 0.5 s: the floor decides (5 s)


@pytest.fixture
def stall_rule(settings):
    """The rule the web side reads (the page, the list and the API decide from the run's fields on each read)."""
    settings.SEEDBED_STALL_FACTOR, settings.SEEDBED_STALL_FLOOR_S = FACTOR, FLOOR_S


@pytest.fixture
def api(user):
    from webapp.api.services import token_create

    token = token_create(user=user, name="tests")[1]
    client, auth = Client(), {"HTTP_AUTHORIZATION": f"Bearer {token}"}

    def get(path: str) -> dict:
        answer = client.get(f"/api/v1{path}", **auth)
        assert answer.status_code == 200, answer.content
        return answer.json()
    get.token = token
    return get


def listed(api, run_id: int) -> dict:
    return next(r for r in api("/runs")["runs"] if r["id"] == run_id)


def cli_runs_list(url: str, token: str) -> str:
    env = {**os.environ, "SEEDBED_URL": url, "SEEDBED_TOKEN": token}
    result = subprocess.run([sys.executable, "-m", "seedbed_client", "runs", "list"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_sigstopped_training_process_is_flagged_stalled_everywhere_and_cleared_when_continued(
        celery_worker, stall_rule, api, user, live_server):
    run = services.run_create(config=tiny_config(total_steps=3000, seed=21, checkpoint_every=0))
    run = wait_for(lambda: Run.objects.filter(pk=run.pk, last_step__gte=3, pid__isnull=False,
                                              median_step_s__isnull=False).first(),
                   timeout=RUN_TIMEOUT, what="3 timed steps")
    assert api(f"/runs/{run.pk}")["stalled"] is False
    os.kill(run.pid, signal.SIGSTOP)
    stopped_at, stopped_wall = time.monotonic(), time.time()
    try:
        detail = wait_for(lambda: (d := api(f"/runs/{run.pk}"))["stalled"] and d, timeout=RUN_TIMEOUT,
                          what="the stall flag", every=0.2)
        took = time.monotonic() - stopped_at
        frozen = Run.objects.get(pk=run.pk)
        threshold = stall_threshold_s(frozen.median_step_s, factor=FACTOR, floor_s=FLOOR_S)
        # flagged once `threshold` has passed since the step's last advance (at most when SIGSTOP came), not later
        assert took <= threshold + 2.0, (took, threshold)
        assert detail["status"] == RunStatus.RUNNING and detail["stalled_for_s"] >= threshold  # (the API rounds it to 0.1 s)
        # its worker heartbeats on meanwhile: heartbeats do not hide it
        assert frozen.heartbeat_at.timestamp() > stopped_wall + 1.0
        assert listed(api, run.pk)["stalled"] is True
        browser = logged_in(user)
        page = browser.get(f"/runs/{run.pk}/").content.decode()
        assert 'id="stall-note"' in page and f"after step {frozen.last_step}" in page
        assert f'id="stalled-{run.pk}"' in browser.get("/runs/").content.decode()
        row = next(line for line in cli_runs_list(live_server.url, api.token).splitlines()
                   if line.split()[:1] == [str(run.pk)])
        assert "running, stalled" in row, row
    finally:
        os.kill(run.pid, signal.SIGCONT)
    wait_for(lambda: not api(f"/runs/{run.pk}")["stalled"], timeout=60, what="the flag to clear")
    assert Run.objects.get(pk=run.pk).last_step > frozen.last_step  # it cleared because the step advanced
    assert 'id="stall-note"' not in logged_in(user).get(f"/runs/{run.pk}/").content.decode()
    services.run_kill(run_id=run.pk, killed_by="user:test", reason="done")
    wait_for(lambda: Run.objects.get(pk=run.pk).is_ended, timeout=60, what="the run to end")
    print(f"\nstall: SIGSTOPped training process flagged stalled {took:.1f} s later (threshold {threshold:.1f} s)")


def test_a_run_progressing_normally_is_never_flagged(celery_worker, stall_rule, api):
    run = services.run_create(config=tiny_config(total_steps=300, seed=22, checkpoint_every=50))
    polls, seen = 0, []
    while not (now := Run.objects.get(pk=run.pk)).is_ended:
        seen.append((api(f"/runs/{run.pk}")["stalled"], listed(api, run.pk)["stalled"], now.stalled_for_s))
        polls += 1
        time.sleep(0.25)
        assert polls < RUN_TIMEOUT * 4, "the run did not end"
    assert now.status == RunStatus.SUCCEEDED, now.error
    assert seen and all(s == (False, False, None) for s in seen), [s for s in seen if s != (False, False, None)]
    assert now.median_step_s is not None and 0 < now.median_step_s < 1.0 and now.step_advanced_at is not None
    print(f"\nstall: a normal 300-step run polled {polls} times, never flagged (median step {now.median_step_s:.2f} s)")
