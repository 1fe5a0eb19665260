"""Roles in a real browser: a viewer of a project sees its run but no Kill button; made a member, the same person
sees the button and kills the run; and a user makes an API token on the tokens page (shown once) and revokes it."""
from __future__ import annotations

import pytest

from tests.conftest import log_in
from webapp.api.models import ApiToken
from webapp.api.services import user_for_token
from webapp.projects.models import AuditEvent, Membership, Role
from webapp.projects.services import default_project
from webapp.runs import services as run_services
from webapp.runs.models import Run, RunStatus

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_a_viewer_sees_no_kill_button_and_a_member_kills(live_server, django_user_model, browser_page, model_dir):
    # queued in the default project, no task sent (a worker that another test started must not take it)
    config = run_services.as_config({"preset": "grpo", "model_path": model_dir, "total_steps": 6}).to_dict()
    run = Run.objects.create(project=default_project(), config=config, seed=0, name="shared run")
    page = browser_page
    log_in(page, live_server, django_user_model, start=f"/runs/{run.pk}/", username="vera", default_role="viewer")
    page.wait_for_selector(".run-head .status[data-status=queued]")
    assert page.text_content("h1").startswith("shared run")
    assert page.query_selector("#kill") is None and page.query_selector("#evaluate") is None

    Membership.objects.filter(user__username="vera", project=default_project()).update(role=Role.MEMBER)
    page.reload()
    page.fill("#kill-reason", "not needed")
    page.once("dialog", lambda dialog: dialog.accept())  # the Kill confirmation
    page.click("#kill")
    page.wait_for_selector(".run-head .status[data-status=killed]", timeout=10_000)
    run.refresh_from_db()
    assert run.status == RunStatus.KILLED and run.killed_by == "user:vera"
    page.wait_for_selector("#audit-table tr[data-action='run.kill'] .actor")
    assert page.text_content("#audit-table tr[data-action='run.kill'] .actor") == "vera"
    assert AuditEvent.objects.get(action="run.kill").detail == {"reason": "not needed", "at_step": 0}


def test_a_token_is_made_shown_once_and_revoked_on_the_tokens_page(live_server, django_user_model, browser_page):
    page = browser_page
    log_in(page, live_server, django_user_model, start="/account/tokens/", username="tess")
    page.fill("input[name=name]", "laptop")
    page.click("#make-token")
    page.wait_for_selector("#token-value")
    token = page.text_content("#token-value").strip()
    assert user_for_token(token).username == "tess"
    page.goto(f"{live_server.url}/account/tokens/")
    assert page.query_selector("#token-value") is None and token not in page.content()  # shown once
    row = ApiToken.objects.get(user__username="tess")
    page.click(f"#revoke-{row.pk}")
    page.wait_for_selector(f"tr[data-token='{row.pk}'] >> text=revoked")
    assert user_for_token(token) is None
