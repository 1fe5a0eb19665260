"""Papercuts of the launch forms and lists, in a real browser: the sweep form warns, next to its policy field and
before launch, of a policy that can never stop a run of the sweep as its fields stand (before: said only on the
launched sweep's page); the runs list's bulk action is chosen first and its question names the action and the
number of runs. Runs ask for a GPU (queue gpu, which no test worker takes): they stay queued."""
from __future__ import annotations

import pytest

from tests.conftest import log_in, tiny_config, wait_for
from webapp.runs import services as run_services
from webapp.runs.models import Run

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
             timeout=20, what="the warning next to the policy field")
    assert page.evaluate("document.getElementById('policy-form-warning').parentElement.previousElementSibling.id") \
        == "field-policy_name"
    page.select_option("#id_policy_name", "manual")
    wait_for(lambda: form_warning(page) == "", timeout=10, what="the warning gone with a manual policy")


def test_a_change_made_while_the_last_answer_is_on_its_way_still_gets_its_warning(
        live_server, django_user_model, browser_page):
    """A loaded server (CI): the answer for seeds 4 is held while seeds becomes 2. Before: htmx queued the second
    ask behind the first on the element the first answer then replaced, so it was never sent and the warning never
    came (hx-swap outerHTML, default sync). After: hx-sync replace aborts the stale ask and sends the new one."""
    page = browser_page
    log_in(page, live_server, django_user_model, start="/sweeps/new/")
    held, asked = [], []

    def hold_the_first(route):
        asked.append(route.request.url)
        if not held:
            held.append(route)
        else:
            route.continue_()

    page.route(lambda url: "/sweeps/new/policy-warning/" in url, hold_the_first)
    page.select_option("#id_policy_name", "median")
    page.fill("#id_concurrency", "2")
    page.fill("#id_seeds", "4")
    page.press("#id_seeds", "Tab")
    pump = page.wait_for_timeout  # Playwright's sync API runs the route handler only inside its own calls
    wait_for(lambda: pump(50) or held, timeout=10, what="the first ask")
    page.fill("#id_seeds", "2")
    page.press("#id_seeds", "Tab")
    wait_for(lambda: pump(50) or len(asked) >= 2, timeout=10, what="the second ask, sent while the first is on its way")
    try:
        held[0].continue_()  # the stale answer arrives late (or was aborted: nothing to send)
    except Exception:  # noqa: BLE001 - an aborted request cannot be continued
        pass
    wait_for(lambda: "median policy can never stop a run of this sweep (2 runs, 2 at a time)" in form_warning(page),
             timeout=20, what="the warning for the fields as they stand")
    assert "seeds=2" in asked[-1]


def test_a_change_whose_delay_is_still_running_when_the_last_answer_lands_still_gets_its_warning(
        live_server, django_user_model, browser_page):
    """The answer for seeds 4 lands within the 200 ms the trigger waits after seeds became 2. Before: the answer
    replaced the warning element (outerHTML) while its delayed ask was pending, and htmx drops an ask of an element
    no longer in the page: the warning never came. After: the answer fills a box that stays (innerHTML)."""
    page = browser_page
    log_in(page, live_server, django_user_model, start="/sweeps/new/")
    held = []
    page.route(lambda url: "/sweeps/new/policy-warning/" in url,
               lambda route: held.append(route) if not held else route.continue_())
    page.select_option("#id_policy_name", "median")
    page.fill("#id_concurrency", "2")
    page.fill("#id_seeds", "4")
    page.press("#id_seeds", "Tab")
    wait_for(lambda: page.wait_for_timeout(50) or held, timeout=10, what="the first ask")
    page.fill("#id_seeds", "2")
    page.press("#id_seeds", "Tab")
    held[0].continue_()  # at once: the second change's delay is still running
    wait_for(lambda: "median policy can never stop a run of this sweep (2 runs, 2 at a time)" in form_warning(page),
             timeout=20, what="the warning for the fields as they stand")


def test_the_runs_lists_bulk_action_is_chosen_first_and_its_question_names_it_and_the_runs(
        live_server, django_user_model, browser_page, model_dir):
    """Before: the action box opened on "kill" and its question was "Apply this action to the selected runs?".
    After: it opens on "choose an action" (applying none asks nothing and says so), and the question names the
    action and how many runs it applies to."""
    runs = [run_services.run_create(config=tiny_config(device="cuda", model_path=model_dir), name=f"bulk {i}")
            for i in range(3)]
    page = browser_page
    log_in(page, live_server, django_user_model, start="/runs/")
    assert page.input_value("#bulk-action") == "" and page.text_content("#bulk-action option:checked") == \
        "choose an action"
    questions = []
    page.on("dialog", lambda dialog: (questions.append(dialog.message), dialog.dismiss()))
    page.check(f"#pick-{runs[0].pk}")
    page.check(f"#pick-{runs[2].pk}")
    page.click("#bulk-apply")  # no action chosen: no question, nothing applied, the field named
    page.wait_for_selector("text=action: choose an action")
    assert questions == [] and all(Run.objects.get(pk=r.pk).kill_requested_at is None for r in runs)
    page.check(f"#pick-{runs[0].pk}")
    page.check(f"#pick-{runs[2].pk}")
    page.select_option("#bulk-action", "kill")
    page.click("#bulk-apply")
    wait_for(lambda: questions, timeout=10, what="the kill's question")
    assert questions[0] == "Kill 2 runs? Each stops after its current step, with a checkpoint."
    page.select_option("#bulk-action", "archive")
    page.click("#bulk-apply")
    wait_for(lambda: len(questions) == 2, timeout=10, what="the archive's question")
    assert questions[1] == "Archive 2 runs?"
    assert all(Run.objects.get(pk=r.pk).kill_requested_at is None and Run.objects.get(pk=r.pk).archived_at is None
               for r in runs)  # answered no: nothing happened
