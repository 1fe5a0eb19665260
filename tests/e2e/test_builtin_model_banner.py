"""On a fresh install the first run builds the tiny model; the banner on every page follows that build live
(static/seedbed/builtin_model.js) and says when it is ready."""
from __future__ import annotations

import fcntl
import json
import os
import shutil

import pytest

from tests.conftest import SCREENSHOTS, log_in

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_the_banner_follows_the_build_until_the_model_is_ready(live_server, django_user_model, browser_page,
                                                                tiny_model_dir, tmp_path, monkeypatch):
    target = tmp_path / "models" / "tiny"
    target.parent.mkdir()
    monkeypatch.setenv("SEEDBED_TINY_MODEL", str(target))
    progress = tmp_path / "models" / "tiny.progress.json"
    page = browser_page
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    with open(f"{target}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a run is building it
        progress.write_text(json.dumps({"step": 25, "pass1": 0.01, "target": 0.15}))
        log_in(page, live_server, django_user_model, start="/runs/")
        banner = page.locator("#builtin-model-banner")
        assert "SFT step 25" in banner.inner_text()
        progress.write_text(json.dumps({"step": 150, "pass1": 0.08, "target": 0.15}))
        page.wait_for_selector("#builtin-model-banner:has-text('SFT step 150')", timeout=10_000)
        assert "held-out pass@1 0.080 of the 0.15 it needs" in banner.inner_text()
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "builtin_model_banner.png"))
        shutil.copytree(tiny_model_dir, target.parent / ".tiny-build-x")
        os.rename(target.parent / ".tiny-build-x", target)
    page.wait_for_selector("#builtin-model-banner:has-text('is ready')", timeout=10_000)
    page.reload()
    assert page.locator("#builtin-model-banner").count() == 0
    assert not errors
