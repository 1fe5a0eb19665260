"""The web process never imports torch or transformers (seconds of start-up and hundreds of MB per web worker):
every page, in a fresh process on a fresh SQLite database, with a run, a sweep and a dataset to show."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.conftest import REPO

PAGES = textwrap.dedent("""
    import os, sys
    os.environ["DJANGO_SETTINGS_MODULE"] = "webapp.settings"
    import django
    django.setup()
    from django.core.management import call_command
    call_command("migrate", verbosity=0)
    from django.contrib.auth.models import User
    from django.test import Client
    from webapp.runs.services import run_create
    from webapp.sweeps.services import sweep_create
    user = User.objects.create_user("w", password="x")
    run = run_create(config={"total_steps": 3}, user=user)
    sweep = sweep_create(config={"total_steps": 3}, seeds=[0, 1], concurrency=1, user=user)
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    pages = ["/runs/", "/runs/new/", f"/runs/{run.pk}/", f"/runs/{run.pk}/live.json", f"/runs/{run.pk}/state/", f"/runs/{run.pk}/engine-config/",
             f"/runs/{run.pk}/samples/", f"/runs/{run.pk}/prompt/", f"/runs/{run.pk}/log/", f"/runs/compare/?ids={run.pk}", "/sweeps/", "/sweeps/new/",
             f"/sweeps/{sweep.pk}/", f"/sweeps/{sweep.pk}/parallel/", "/evals/", f"/evals/new/?run={run.pk}", "/models/", "/datasets/",
             "/projects/", "/status/", "/account/tokens/"]
    for path in pages:
        status = client.get(path).status_code
        heavy = [m for m in ("torch", "transformers") if m in sys.modules]
        print(path, status, ",".join(heavy) or "-")
""")


def test_no_page_makes_the_web_process_import_torch(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL",)}
    env.update({"SEEDBED_HOME": str(tmp_path), "DJANGO_ALLOWED_HOSTS": "127.0.0.1"})
    proc = subprocess.run([sys.executable, "-c", PAGES], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split() for line in proc.stdout.splitlines()]
    assert len(rows) == 21 and all(status in ("200", "286") for _, status, _ in rows), proc.stdout
    assert [path for path, _, heavy in rows if heavy != "-"] == [], proc.stdout
