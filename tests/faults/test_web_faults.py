"""A web process killed in the middle of a sweep launch leaves nothing half-made: the sweep and its runs are one
transaction (a real process, SIGKILLed by itself after its third run row; the database is the test's)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.conftest import REPO
from webapp.runs.models import Run
from webapp.sweeps.models import Sweep

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

LAUNCH_AND_DIE = textwrap.dedent("""
    import os, signal, django
    django.setup()
    from webapp.runs import services as run_services
    from webapp.sweeps import services as sweep_services

    made = []
    original = run_services.run_create

    def run_create_then_die(**kwargs):
        run = original(**kwargs)
        made.append(run.pk)
        if len(made) == 3:  # three run rows written, the sweep's transaction still open
            print("DYING after runs", made, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return run

    run_services.run_create = run_create_then_die
    sweep_services.sweep_create(config={"total_steps": 4, "prompts_per_step": 2, "group_size": 2,
                                        "max_new_tokens": 4}, seeds=range(6), concurrency=2, name="half")
    print("NOT KILLED", flush=True)
""")


def test_a_web_process_killed_during_a_sweep_launch_leaves_no_half_sweep(worker_env):
    env, _ = worker_env
    proc = subprocess.run([sys.executable, "-c", LAUNCH_AND_DIE], cwd=REPO, env={**env, "DJANGO_SETTINGS_MODULE":
                          "webapp.settings"}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9 and "DYING after runs" in proc.stdout, (proc.returncode, proc.stdout, proc.stderr)
    assert not Sweep.objects.filter(name="half").exists()
    assert not Run.objects.exists()  # none of the three rows it wrote
