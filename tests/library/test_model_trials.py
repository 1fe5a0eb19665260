"""The models page's "try it" box: a member's prompt is answered by a worker (the built-in tiny model through a
real Celery worker; the rest through the worker's own function), inputs are bounded and named when wrong,
one trial at a time per user, viewers see no form (403 if they post anyway), non-members get 404."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.urls import reverse

from tests.conftest import log_in, logged_in, wait_for
from training.fields import FieldErrors
from training.models import describe_model
from webapp.library import services
from webapp.library.models import ModelEntry, ModelTrial
from webapp.library.selectors import builtin_model
from webapp.projects.models import AuditEvent, Membership, Project

HTMX = {"HX-Request": "true"}


@pytest.fixture
def ann(django_user_model):
    return django_user_model.objects.create_user(username="ann", password="x")


@pytest.fixture
def tiny_entry(ann, tiny_model_dir):
    """The tiny model registered in ann's personal project."""
    return ModelEntry.objects.create(project=Project.objects.get(name="ann"), name="tiny", path=tiny_model_dir,
                                     description=describe_model(tiny_model_dir), created_by=ann)


def try_url(entry) -> str:
    return reverse("library:model-try", args=[entry.pk])


def post_try(client, url, **data):
    return client.post(url, {"prompt": "12+7=", "max_new_tokens": "8", "temperature": "0", **data}, headers=HTMX)


@pytest.mark.django_db(transaction=True)
def test_a_trial_of_the_builtin_tiny_model_is_answered_by_a_worker(celery_worker, ann):
    client = logged_in(ann)
    page = client.get(reverse("library:models")).content.decode()
    assert f'href="{reverse("library:builtin", args=["tiny"])}"' in page
    assert 'id="try-form"' in client.get(reverse("library:builtin", args=["tiny"])).content.decode()
    response = post_try(client, reverse("library:builtin-try", args=["tiny"]))
    assert response.status_code == 200 and 'id="try-box"' in response.content.decode()
    trial = ModelTrial.objects.get()
    assert f'hx-get="{reverse("library:trial", args=[trial.pk])}" hx-trigger="every 1s"' in response.content.decode()
    assert trial.project.name == "ann" and trial.builtin == "tiny" and trial.entry is None
    wait_for(lambda: ModelTrial.objects.get().is_ended, timeout=120, what="the worker to answer the trial")
    trial.refresh_from_db()
    assert trial.status == "done", trial.error
    assert trial.reply.strip() and trial.tokens >= 1 and trial.seconds > 0 and not trial.chat_used
    assert trial.stop_reason in ("eos", "max_new_tokens")
    state = client.get(reverse("library:trial", args=[trial.pk]))
    assert state.status_code == 286  # htmx stops polling
    body = state.content.decode()
    assert 'data-status="done"' in body and "hx-trigger" not in body and trial.reply in body
    assert f"<span data-tokens>{trial.tokens}</span>" in body


@pytest.mark.django_db(transaction=True)
def test_the_try_box_in_a_browser_shows_the_reply_when_the_worker_has_it(live_server, celery_worker,
                                                                       django_user_model, browser_page):
    page = browser_page
    log_in(page, live_server, django_user_model, start=reverse("library:builtin", args=["tiny"]), username="bea")
    page.fill("#try-form textarea[name=prompt]", "12+7=")
    page.fill("#try-form input[name=max_new_tokens]", "8")
    page.fill("#try-form input[name=temperature]", "0")
    page.click("#try-form button[type=submit]")
    page.wait_for_selector("#trials li[data-status=done] [data-reply]", timeout=60_000)  # htmx polled it there
    trial = ModelTrial.objects.get(created_by__username="bea")
    assert page.text_content("#trials li[data-status=done] [data-reply]") == trial.reply and trial.reply.strip()
    assert page.input_value("#try-form textarea[name=prompt]") == "12+7="  # the form stays, ready for another


@pytest.mark.django_db(transaction=True)
def test_trying_smollm2_in_a_browser_answers_through_its_chat_template(live_server, celery_worker, django_user_model,
                                                                      browser_page, smollm2_dir):
    from tests.conftest import SCREENSHOTS

    page = browser_page
    log_in(page, live_server, django_user_model, start=reverse("library:builtin", args=["smollm2"]), username="bea")
    assert "<|im_start|>" in page.text_content("#chat-template")
    page.fill("#try-form textarea[name=prompt]", "What is 2 + 3? Reply with the number only.")
    page.fill("#try-form input[name=max_new_tokens]", "16")
    page.fill("#try-form input[name=temperature]", "0")
    page.click("#try-form button[type=submit]")
    page.wait_for_selector("#trials li[data-status=done] [data-reply]", timeout=120_000)
    trial = ModelTrial.objects.get(created_by__username="bea")
    assert trial.chat_used and trial.rendered.startswith("<|im_start|>") and trial.reply.strip()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "model_page_try.png"), full_page=True)
    page.goto(f"{live_server.url}{reverse('library:models')}")
    page.screenshot(path=str(SCREENSHOTS / "models_page.png"), full_page=True)


@pytest.mark.django_db
@pytest.mark.postgres
def test_the_worker_side_claims_a_queued_trial_once(ann, tiny_entry, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        trial = services.model_try(user=ann, entry=tiny_entry, prompt="3+4=", max_new_tokens="5", temperature="0.5")
    assert len(callbacks) == 1 and trial.status == "queued" and trial.model_path == tiny_entry.path
    event = AuditEvent.objects.get(action="model.try")
    assert event.actor_name == "ann" and event.target_type == "trial" and event.target_id == trial.pk
    assert event.detail["entry"] == tiny_entry.pk and event.detail["temperature"] == 0.5
    done = services.model_try_run(trial_id=trial.pk)
    assert done.status == "done" and done.reply and 1 <= done.tokens <= 5 and done.started_at and done.ended_at
    again = services.model_try_run(trial_id=trial.pk)  # a second delivery of the task: nothing happens
    assert again.status == "done" and again.ended_at == done.ended_at
    assert services.model_try_run(trial_id=trial.pk + 1000) is None


@pytest.mark.parametrize("data, field, message", [
    ({"prompt": ""}, "prompt", "give a prompt"),
    ({"prompt": "   \n"}, "prompt", "give a prompt"),
    ({"prompt": "x" * 4001}, "prompt", "at most 4000 characters; got 4001"),
    ({"max_new_tokens": "0"}, "max_new_tokens", "must be in [1, 256]; got 0"),
    ({"max_new_tokens": "257"}, "max_new_tokens", "must be in [1, 256]; got 257"),
    ({"max_new_tokens": "many"}, "max_new_tokens", "expected an integer"),
    ({"temperature": "-0.1"}, "temperature", "must be in [0, 2]; got -0.1"),
    ({"temperature": "2.5"}, "temperature", "must be in [0, 2]; got 2.5"),
    ({"temperature": "nan"}, "temperature", "expected a finite number"),
])
@pytest.mark.django_db
def test_bad_inputs_name_their_field_and_queue_nothing(ann, tiny_entry, data, field, message):
    client = logged_in(ann)
    response = post_try(client, try_url(tiny_entry), **data)
    body = response.content.decode()
    assert response.status_code == 200 and f'data-field="{field}"><li>{field}: {message}' in body
    assert not ModelTrial.objects.exists() and not AuditEvent.objects.filter(action="model.try").exists()
    plain = client.post(try_url(tiny_entry), {"prompt": "1+1=", "max_new_tokens": "8", "temperature": "0", **data})
    assert plain.status_code == 400 and f'data-field="{field}"' in plain.content.decode()


@pytest.mark.django_db
@pytest.mark.postgres
def test_a_second_trial_waits_for_the_first(ann, tiny_entry, tiny_model_dir):
    client = logged_in(ann)
    assert post_try(client, try_url(tiny_entry)).status_code == 200
    first = ModelTrial.objects.get()
    second = post_try(client, reverse("library:builtin-try", args=["tiny"]))  # another model: still one at a time
    assert f'data-field="trial"><li>trial: your trial {first.pk} of tiny is still queued: one trial at a time' \
        in second.content.decode()
    assert ModelTrial.objects.count() == 1
    with pytest.raises(IntegrityError), transaction.atomic():  # the database refuses it too (a race)
        ModelTrial.objects.create(project=first.project, entry=tiny_entry, model_path=tiny_model_dir, created_by=ann,
                                  prompt="x", max_new_tokens=1, temperature=0)
    # a trial no worker took within TRIAL_EXPIRE_S is given up, and the user may try again
    ModelTrial.objects.filter(pk=first.pk).update(created_at=first.created_at - timedelta(
        seconds=services.TRIAL_EXPIRE_S + 1))
    assert post_try(client, try_url(tiny_entry)).status_code == 200
    first.refresh_from_db()
    assert first.status == "failed" and "no worker answered" in first.error
    assert ModelTrial.objects.filter(status="queued").count() == 1


@pytest.mark.django_db
def test_a_viewer_sees_the_model_but_no_form_and_a_non_member_gets_404(ann, tiny_entry, django_user_model):
    trial = services.model_try(user=ann, entry=tiny_entry, prompt="1+1=")
    vic = django_user_model.objects.create_user(username="vic", password="x")
    Membership.objects.create(project=tiny_entry.project, user=vic, role="viewer")
    viewer = logged_in(vic)
    page = viewer.get(reverse("library:model", args=[tiny_entry.pk]))
    assert page.status_code == 200 and 'id="try-viewer"' in page.content.decode()
    assert 'id="try-form"' not in page.content.decode()
    assert post_try(viewer, try_url(tiny_entry)).status_code == 403
    assert viewer.get(reverse("library:trial", args=[trial.pk])).status_code == 404  # a prompt is its author's
    eve = logged_in(django_user_model.objects.create_user(username="eve", password="x"))
    assert eve.get(reverse("library:model", args=[tiny_entry.pk])).status_code == 404
    assert post_try(eve, try_url(tiny_entry)).status_code == 404
    assert eve.get(reverse("library:trial", args=[trial.pk])).status_code == 404
    assert ModelTrial.objects.count() == 1


@pytest.mark.django_db
def test_a_model_still_importing_cannot_be_tried(ann, tiny_entry):
    ModelEntry.objects.filter(pk=tiny_entry.pk).update(status="importing")
    tiny_entry.refresh_from_db()
    assert 'id="try-not-ready"' in logged_in(ann).get(reverse("library:model", args=[tiny_entry.pk])).content.decode()
    with pytest.raises(FieldErrors, match="model: tiny is importing; it can be tried once it is ready"):
        services.model_try(user=ann, entry=tiny_entry, prompt="x")


@pytest.mark.django_db
def test_a_trial_that_cannot_run_fails_and_says_why(ann, tiny_entry, model_dir):
    long = services.model_try(user=ann, entry=tiny_entry, prompt="1+" * 100, max_new_tokens=8)
    failed = services.model_try_run(trial_id=long.pk)
    assert failed.status == "failed"
    assert "prompt: 201 tokens once rendered; the model's context holds 128" in failed.error
    broken = ModelEntry.objects.create(project=tiny_entry.project, name="broken", path=model_dir)  # no weights
    trial = services.model_try_run(trial_id=services.model_try(user=ann, entry=broken, prompt="hi").pk)
    assert trial.status == "failed" and trial.error
    body = logged_in(ann).get(reverse("library:model", args=[broken.pk])).content.decode()
    assert f'id="trial-{trial.pk}" data-status="failed"' in body and 'class="error"' in body


@pytest.mark.django_db
def test_smollm2_is_tried_through_its_chat_template(ann, smollm2_dir):
    builtin = builtin_model("smollm2")
    assert builtin["folder"] == smollm2_dir
    trial = services.model_try(user=ann, builtin=builtin, prompt="What is 2+3?", max_new_tokens=4, temperature=0)
    done = services.model_try_run(trial_id=trial.pk)
    assert done.status == "done", done.error
    assert done.chat_used and "<|im_start|>user\nWhat is 2+3?<|im_end|>" in done.rendered
    assert done.reply.strip() and done.tokens <= 4
    plain = services.model_try_run(trial_id=services.model_try(
        user=ann, builtin=builtin, prompt="What is 2+3?", max_new_tokens=4, temperature=0, chat=False).pk)
    assert plain.status == "done" and not plain.chat_used and plain.rendered == "What is 2+3?"
    page = logged_in(ann).get(reverse("library:builtin", args=["smollm2"])).content.decode()
    assert 'name="chat" checked' in page and f'id="trial-{plain.pk}"' in page
