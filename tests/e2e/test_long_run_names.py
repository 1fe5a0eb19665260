"""A run name of the form's full 200 characters with no space in it (a pasted hash, a path) wraps on the pages that
show it: the runs list, the run's page and the models page's Run column fit a 1280 x 800 window (no sideways
scroll). Before: the runs list was 2,829 px wide, the run's page 3,511 px (at 1400), the models page 2,339 px."""
from __future__ import annotations

import pytest

from tests.conftest import log_in, tiny_config
from webapp.runs import services as run_services

pytestmark = [pytest.mark.django_db(transaction=True)]

NAME = "n" * 200  # the name field's limit (Run.name, the form and the API allow 200)


def test_a_200_character_name_without_spaces_wraps_on_the_runs_list_and_the_run_page(
        live_server, django_user_model, chromium, model_dir):
    page = chromium.new_context(viewport={"width": 1280, "height": 800}).new_page()
    log_in(page, live_server, django_user_model, start="/runs/")
    run = run_services.run_create(config=tiny_config(device="cuda", model_path=model_dir), name=NAME)  # stays queued
    for path in ("/runs/", f"/runs/{run.pk}/", f"/runs/compare/?ids={run.pk}"):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_selector(f"text={NAME[:40]}", timeout=10_000)
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280, path


@pytest.mark.parametrize("form, field, value", [("/runs/new/", "#id_group_size", "16"),
                                                ("/sweeps/new/", "#id_seeds", "2")])
def test_the_forms_live_checks_leave_the_name_out_of_their_requests(live_server, django_user_model, browser_page,
                                                                    form, field, value):
    """The estimate and the policy warning are asked again as the fields change, with the form's fields in the
    URL. Before: the name went too, so a long one (pasted past the field's limit; the form refuses it on submit)
    made the request fail in the browser (htmx:sendError) and the estimate stopped following."""
    page = browser_page
    log_in(page, live_server, django_user_model, start=form)
    asked = []
    page.on("request", lambda request: asked.append(request.url) if "/estimate/" in request.url
            or "/policy-warning/" in request.url else None)
    page.evaluate("document.getElementById('id_name').value = 'n'.repeat(1000000)")
    page.fill(field, value)
    page.press(field, "Tab")
    page.wait_for_timeout(100)
    deadline = 50
    while not asked and deadline:
        page.wait_for_timeout(100)
        deadline -= 1
    queries = [url.split("?", 1)[1].split("&") for url in asked]
    assert asked and not any(part.startswith("name=") for query in queries for part in query)
    assert all(len(url) < 20_000 for url in asked)
