"""The pass@k page's crossing note says which way the curves cross, in a real browser (Playwright + Debian's
Chromium): a checkpoint above the base at k = 1 and below it at k = 4 is "overtaken by the base model"."""
from __future__ import annotations

import pytest

from tests.evals import conftest as evals_conftest
from tests.evals.conftest import make_job_with_results
from tests.evals.test_passk_page import log_in_as_kat

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_the_crossing_note_says_which_model_overtakes_which(live_server, django_user_model, browser_page,
                                                            run_with_checkpoints, monkeypatch):
    run = run_with_checkpoints
    run.config = {**run.config, "device": "cuda"}  # no test worker takes it: the hand-made results stay
    run.save()
    # the base: one of 4 right on four problems; the checkpoint: sure of two, nothing on the rest
    # pass@1 0.2 against 0.35; pass@2 0.4 each (a tie); pass@4 0.8 against 0.4
    monkeypatch.setattr(evals_conftest, "HAND_COUNTS", {0: (1, 4), 1: (1, 3), 2: (1, 0), 3: (1, 0), 4: (0, 0)})
    job = make_job_with_results(run)
    page = browser_page
    log_in_as_kat(page, live_server, django_user_model)
    page.goto(f"{live_server.url}/evals/{job.pk}/")
    note = page.text_content("#crossing")
    assert note == ("The curves cross at k = 4: the base model overtakes step 4 (step 4 is above it at smaller k; "
                    "from k = 4 on below it: pass@4 0.400 against the base model's 0.800).")
