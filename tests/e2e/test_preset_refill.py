"""The run and sweep forms refill their knobs when the preset changes (static/seedbed/preset_refill.js)."""
from __future__ import annotations

import pytest

from tests.conftest import log_in

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("start", ["/runs/new/", "/sweeps/new/"])
def test_switching_the_preset_refills_the_knobs(live_server, django_user_model, browser_page, start):
    page = browser_page
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    log_in(page, live_server, django_user_model, start=start)
    assert page.input_value("#id_eps_high") == "0.2"
    if page.locator("#id_seeds").count():
        page.fill("#id_seeds", "5")
    page.select_option("#id_preset", "dapo")
    assert page.input_value("#id_eps_high") == "0.28"
    assert page.input_value("#id_loss_agg") == "token-mean"
    assert page.is_checked("#id_dynamic_sampling")
    assert page.input_value("[name=rendered_preset]") == "dapo"
    if page.locator("#id_seeds").count():
        assert page.input_value("#id_seeds") == "5"  # the sweep's own field is never refilled
    page.select_option("#id_preset", "dr_grpo")
    assert page.input_value("#id_loss_agg") == "seq-mean-token-sum-norm"
    assert not page.is_checked("#id_norm_adv_by_std")
    assert not errors
