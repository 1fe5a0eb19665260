"""Papercuts of the launch forms and lists, in a real browser: the sweep form warns, next to its policy field and
before launch, of a policy that can never stop a run of the sweep as its fields stand (before: said only on the
launched sweep's page)."""
from __future__ import annotations

import pytest

from tests.conftest import log_in, wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]


def form_warning(page) -> str:
    box = page.query_selector("#policy-form-warning")
    return box.text_content() if box is not None and box.is_visible() else ""


def test_the_sweep_form_warns_of_a_policy_that_can_never_stop_a_run_as_its_fields_change(
        live_server, django_user_model, browser_page):
    page = browser_page
    log_in(page, live_server, django_user_model, start="/sweeps/new/")
    page.select_option("#id_policy_name", "median")
    page.fill("#id_concurrency", "2")
    page.fill("#id_seeds", "4")
    page.press("#id_seeds", "Tab")
    assert form_warning(page) == ""
    page.fill("#id_seeds", "2")
    page.press("#id_seeds", "Tab")  # a change: the warning is asked again
    wait_for(lambda: "median policy can never stop a run of this sweep (2 runs, 2 at a time)" in form_warning(page),
             timeout=10, what="the warning next to the policy field")
    assert page.evaluate("document.getElementById('policy-form-warning').previousElementSibling.id") == \
        "field-policy_name"
    page.select_option("#id_policy_name", "manual")
    wait_for(lambda: form_warning(page) == "", timeout=10, what="the warning gone with a manual policy")
