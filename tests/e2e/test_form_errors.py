"""A launch form with an error, in a real browser (Playwright + Debian's Chromium): a summary at the top names each
field to fix with a link, and the page opens the folded "Every other knob" section and scrolls to the first bad
field, its input focused (an error there sat 1,500 px below the button). The sweep form's policy help names every
policy there is."""
from __future__ import annotations

import pytest

from tests.conftest import log_in
from webapp.runs.models import Run
from webapp.sweeps.policies.registry import RULES

pytestmark = [pytest.mark.django_db(transaction=True)]


def in_view(page, selector: str) -> bool:
    return page.evaluate("(s) => { const r = document.querySelector(s).getBoundingClientRect();"
                         " return r.top >= 0 && r.bottom <= window.innerHeight; }", selector)


def test_an_error_in_a_folded_knob_is_summarised_on_top_and_scrolled_to(live_server, django_user_model, browser_page):
    page = browser_page
    log_in(page, live_server, django_user_model, start="/runs/new/")
    page.click("summary:has-text('Every other knob')")
    page.fill("#id_temperature", "-1")
    page.click("summary:has-text('Every other knob')")  # folded again, as a person leaves it
    page.click("#run-form button[type=submit]")
    page.wait_for_selector("#form-errors")
    assert Run.objects.count() == 0

    link = page.locator("#form-errors a[data-field=temperature]")
    assert link.count() == 1 and link.text_content() == "Temperature"
    assert "Nothing was launched" in page.text_content("#form-errors")
    # the summary sits above the form's first field; the page has scrolled to the bad field, open and focused
    summary_top = page.evaluate("document.getElementById('form-errors').getBoundingClientRect().top")
    first_field_top = page.evaluate("document.querySelector('#run-form .field').getBoundingClientRect().top")
    assert summary_top < first_field_top
    assert page.evaluate("document.getElementById('field-temperature').closest('details').open")
    assert in_view(page, "#field-temperature")
    assert page.evaluate("document.activeElement.id") == "id_temperature"

    # from the top again, the summary's link brings the field back
    page.evaluate("window.scrollTo(0, 0)")
    assert not in_view(page, "#field-temperature")
    link.click()
    assert in_view(page, "#field-temperature")


def test_the_sweep_forms_policy_help_names_every_policy(live_server, django_user_model, browser_page):
    page = browser_page
    log_in(page, live_server, django_user_model, start="/sweeps/new/")
    help_text = page.text_content("#field-policy_name .help")
    assert "bayes" in RULES
    assert all(name in help_text for name in RULES), help_text
