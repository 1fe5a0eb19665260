"""The launch form hides each knob under the engines that lack it (static/seedbed/engine_fields.js reading the
engine registry's ``Engine.lacks`` from ``data-engine-lacks``; docs/architecture.md#engines-and-distribution), in
a real browser: a hidden knob is disabled, so it is not sent, and switching back shows it again."""
from __future__ import annotations

import pytest

from tests.conftest import log_in

pytestmark = [pytest.mark.django_db(transaction=True)]


def hidden(page, name: str) -> tuple[bool, bool]:
    """(the knob's box is hidden, its input is disabled)."""
    box, disabled = page.evaluate("(n) => [document.getElementById('field-' + n).hidden,"
                                  " document.getElementById('id_' + n).disabled]", name)
    return box, disabled


def test_the_knobs_an_engine_lacks_are_hidden_under_it(live_server, django_user_model, browser_page):
    page = browser_page
    log_in(page, live_server, django_user_model, start="/runs/new/")
    # seedbed: its own ranks knobs, TRL's missing dual clip shown; command only for engine command
    assert hidden(page, "nnodes") == (False, False) and hidden(page, "dual_clip") == (False, False)
    assert hidden(page, "command") == (True, True)
    page.select_option("#id_engine", "trl")
    assert hidden(page, "nnodes") == (True, True) and hidden(page, "strategy") == (True, True)
    assert hidden(page, "dual_clip") == (True, True) and hidden(page, "stop") == (True, True)
    assert hidden(page, "kl_coef") == (False, False)  # a knob TRL has
    page.select_option("#id_engine", "seedbed")
    assert hidden(page, "dual_clip") == (False, False) and hidden(page, "nnodes") == (False, False)
