"""A launch form larger than the server reads (DATA_UPLOAD_MAX_MEMORY_SIZE), in a real browser: before, a 10 MB
name was sent and answered with Django's bare "Bad Request (400)", the page holding what was typed left behind.
Now the page measures the form on submit and sends nothing: a message next to the form names the limit and the
field, and every field keeps its value (static/seedbed/body_size.js)."""
from __future__ import annotations

import pytest

from tests.conftest import log_in
from webapp.runs.models import Run
from webapp.sweeps.models import Sweep

pytestmark = [pytest.mark.django_db(transaction=True)]

TEN_MB = 10 * 2**20


@pytest.mark.parametrize("path, made", [("/runs/new/", Run), ("/sweeps/new/", Sweep)])
def test_a_10_mb_name_is_refused_before_sending_and_the_form_keeps_its_values(
        live_server, django_user_model, browser_page, path, made):
    page = browser_page
    log_in(page, live_server, django_user_model, start=path)
    page.fill("#id_total_steps", "7")
    page.evaluate("(n) => { document.getElementById('id_name').value = 'x'.repeat(n); }", TEN_MB)
    posts = []
    page.on("request", lambda request: posts.append(request.url) if request.method == "POST" else None)
    page.click("#run-form button[type=submit]")
    page.wait_for_selector("#form-too-large", timeout=10_000)

    message = page.text_content("#form-too-large")
    assert "Nothing was sent" in message
    assert "at most 2.5 MB (2,621,440 bytes)" in message
    assert "Name is 10.0 MB" in message
    assert page.evaluate("document.getElementById('form-too-large').nextElementSibling.id") == "run-form"
    assert page.evaluate("document.getElementById('id_name').value.length") == TEN_MB
    assert page.input_value("#id_total_steps") == "7"
    assert page.evaluate("document.activeElement.id") == "id_name"
    assert posts == [] and page.url.endswith(path)
    assert not made.objects.exists()

    # shortened, it is sent: the server answers as for any name (here launched, or a field error)
    page.fill("#id_name", "short")
    with page.expect_navigation():
        page.click("#run-form button[type=submit]")
    assert posts and page.query_selector("#form-too-large") is None
