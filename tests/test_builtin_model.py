"""Every page says when the built-in tiny model is not built yet, and how far its build is."""
from __future__ import annotations

import fcntl
import json

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def unbuilt(tmp_path, monkeypatch):
    path = tmp_path / "tiny"
    monkeypatch.setenv("SEEDBED_TINY_MODEL", str(path))
    return path


def test_pages_say_the_model_is_not_built_yet(client_in, unbuilt):
    page = client_in.get("/runs/").content.decode()
    assert 'id="builtin-model-banner"' in page and "the first run that uses it builds it" in page
    poll = client_in.get("/models/builtin/state")
    assert poll.status_code == 200 and 'hx-trigger="every 2s"' in poll.content.decode()


def test_pages_show_the_build_progress_while_a_process_builds_it(client_in, unbuilt):
    with open(f"{unbuilt}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        (unbuilt.parent / "tiny.progress.json").write_text(json.dumps({"step": 125, "pass1": 0.0625, "target": 0.15}))
        page = " ".join(client_in.get("/sweeps/new/").content.decode().split())
        poll = client_in.get("/models/builtin/state")
    assert "Preparing the built-in tiny model (first start only): SFT step 125, held-out pass@1 0.06" in page
    assert poll.status_code == 200 and "SFT step 125," in poll.content.decode()


def test_no_banner_once_the_model_is_ready(client_in, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("SEEDBED_TINY_MODEL", tiny_model_dir)
    assert "builtin-model-banner" not in client_in.get("/runs/").content.decode()
    done = client_in.get("/models/builtin/state")
    assert done.status_code == 286 and "is ready" in done.content.decode()  # htmx stops polling


def test_the_state_needs_a_login(client, unbuilt):
    assert client.get("/models/builtin/state").status_code == 302
