""""Re-run with changes" through Django's test client: a run's or a sweep's form opens filled with the original's
full settings, submitting it unchanged launches the same settings, a change shows on the new one's page, and the
lineage is recorded (the page, the API)."""
from __future__ import annotations

import pytest
from django.urls import reverse

from webapp.runs import services
from webapp.runs.copies import config_diff
from webapp.runs.models import Run
from webapp.sweeps import services as sweep_services
from webapp.sweeps.models import Sweep, SweepPlan

pytestmark = pytest.mark.django_db

# a config far from the defaults, knobs in several kinds (number, choice, bool, JSON) and a task with its params
ORIGINAL = {"preset": "dapo", "task": "reasoning_gym:basic_arithmetic", "seed": 12, "total_steps": 7,
            "prompts_per_step": 3, "group_size": 5, "max_new_tokens": 9, "lr": 3e-05, "kl_coef": 0.01,
            "task_params": {"min_terms": 2, "max_terms": 2, "max_digits": 1},
            "rewards": [{"name": "reasoning_gym", "weight": 0.5}], "dynamic_sampling": False}


def as_browser_submits(form, **typed) -> dict:
    """The POST a browser makes from ``form`` as rendered (each field's shown value, a checked box as "on", an
    unchecked one absent), with ``typed`` changes."""
    data = {}
    for name in form.fields:
        value = form[name].value()
        if value is True:
            data[name] = "on"
        elif value is not False and value is not None:  # (a 0 is sent as "0")
            data[name] = str(value)
    data.update(typed)
    return data


def api_get(user, path: str) -> dict:
    """``path`` of the token API (/api/v1/) as ``user`` reads it."""
    from django.test import Client

    from webapp.api.services import token_create

    token = token_create(user=user, name="tests")[1]
    response = Client().get(f"/api/v1{path}", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.content
    return response.json()


def copy_form(client, kind: str, pk: int):
    response = client.get(reverse(f"{kind}s:new"), {"copy_of": pk})
    assert response.status_code == 200
    return response


@pytest.fixture
def original(model_dir, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        return services.run_create(config={**ORIGINAL, "model_path": model_dir}, name="the original")


def test_a_runs_copy_submitted_unchanged_launches_its_full_config(client_in, original,
                                                                   django_capture_on_commit_callbacks):
    response = copy_form(client_in, "run", original.pk)
    page = response.content.decode()
    assert f'name="copy_of" value="{original.pk}"' in page and f"run {original.pk}</a>" in page
    assert response.context["copy_original"]["lr"] == "3e-05"  # what the page's differences list starts from
    data = as_browser_submits(response.context["form"], copy_of=str(original.pk))
    with django_capture_on_commit_callbacks(execute=False):
        assert client_in.post(reverse("runs:new"), data).status_code == 302
    copy = Run.objects.exclude(pk=original.pk).get()
    assert copy.config == original.config and copy.name == "the original (copy)"
    assert copy.copied_from == original and copy.parent_run is None  # its weights: model_path, as the original's
    html = client_in.get(reverse("runs:detail", args=[copy.pk])).content.decode()
    assert f'Copied from <a href="{reverse("runs:detail", args=[original.pk])}">run {original.pk}</a>, unchanged' in html


def test_a_change_is_listed_on_the_copys_page_and_in_the_api(client_in, user, original,
                                                             django_capture_on_commit_callbacks):
    form = copy_form(client_in, "run", original.pk).context["form"]
    data = as_browser_submits(form, copy_of=str(original.pk), lr="2e-05", task_params='{"max_terms": 3}')
    with django_capture_on_commit_callbacks(execute=False):
        assert client_in.post(reverse("runs:new"), data).status_code == 302
    copy = Run.objects.get(copied_from=original)
    assert copy.config["lr"] == 2e-05 and copy.config["task_params"] == {"max_terms": 3}
    html = client_in.get(reverse("runs:detail", args=[copy.pk])).content.decode()
    assert "lr: 3e-05 → 2e-05" in html and 'task_params: {&quot;max_digits&quot;: 1' in html
    assert api_get(user, f"/runs/{copy.pk}")["copied_from"] == original.pk
    assert api_get(user, f"/runs/{original.pk}")["copied_from"] is None


def test_the_run_page_and_the_compare_page_offer_the_copy_apart_from_the_checkpoint_prefill(client_in, original):
    html = client_in.get(reverse("runs:detail", args=[original.pk])).content.decode()
    assert f'href="{reverse("runs:new")}?copy_of={original.pk}" id="rerun-link">Re-run with changes</a>' in html
    html = client_in.get(reverse("runs:compare"), {"ids": str(original.pk)}).content.decode()
    assert f'href="{reverse("runs:new")}?copy_of={original.pk}" class="rerun-link"' in html
    page = copy_form(client_in, "run", original.pk).content.decode()
    assert "not from\n    what it trained" in page and 'id="from-checkpoint"' not in page


def test_a_run_that_may_not_be_read_is_not_copied(client_in, model_dir, django_user_model,
                                                  django_capture_on_commit_callbacks):
    other = django_user_model.objects.create_user(username="bo", password="x")
    with django_capture_on_commit_callbacks(execute=False):
        theirs = services.run_create(config={**ORIGINAL, "model_path": model_dir}, user=other, name="private")
    response = client_in.get(reverse("runs:new"), {"copy_of": theirs.pk})
    page = response.content.decode()
    assert "copy_of: run" in page and "not one you may read" in page and 'name="copy_of"' not in page
    assert response.context["form"]["lr"].value() != "3e-05"


def test_a_sweeps_copy_keeps_its_seeds_grid_policy_and_concurrency(client_in, user, model_dir,
                                                                    django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        original = sweep_services.sweep_create(
            config={**ORIGINAL, "model_path": model_dir}, seeds=[4, 9], concurrency=3, name="grid sweep",
            grid={"lr": [1e-4, 2e-4]}, policy={"name": "median", "metric": "reward/mean", "grace_steps": 2,
                                               "min_peers": 1}, alert_bounds={"entropy_min": 0.2})
    response = copy_form(client_in, "sweep", original.pk)
    form = response.context["form"]
    assert form["seeds"].value() == "4, 9" and form["grid"].value() == "lr = 0.0001, 0.0002"
    data = as_browser_submits(form, copy_of=str(original.pk), concurrency="1")
    with django_capture_on_commit_callbacks(execute=False):
        response = client_in.post(reverse("sweeps:new"), data)
    assert response.status_code == 302, response.context["form"].errors
    copy = Sweep.objects.get(copied_from=original)
    assert (copy.config, copy.seeds) == (original.config, original.seeds)
    assert copy.policy == {**original.policy, "mode": "max"}  # the form always says the mode (max: the default)
    plan, before = SweepPlan.objects.get(sweep=copy), SweepPlan.objects.get(sweep=original)
    assert (plan.grid, plan.alert_bounds) == (before.grid, before.alert_bounds) and copy.concurrency == 1
    assert sorted(copy.runs.values_list("seed", "config__lr")) == sorted(original.runs.values_list("seed", "config__lr"))
    html = client_in.get(reverse("sweeps:detail", args=[copy.pk])).content.decode()
    assert f"sweep {original.pk}</a>, changed:" in html and "concurrency: 3 → 1" in html
    assert f'href="{reverse("sweeps:new")}?copy_of={copy.pk}" id="rerun-link"' in html
    assert api_get(user, f"/sweeps/{copy.pk}")["copied_from"] == original.pk


def test_config_diff_lists_changed_added_and_removed_keys():
    assert [d["text"] for d in config_diff({"lr": 1e-05, "a": 1, "gone": True}, {"lr": 2e-05, "a": 1, "new": "x"})] == [
        "gone: true → –", "lr: 1e-05 → 2e-05", "new: – → x"]


def test_a_sweeps_copy_with_other_total_steps_gets_their_policy_horizon(client_in, model_dir,
                                                                        django_capture_on_commit_callbacks):
    """Before: the copy kept the original's max_steps (300 on a 30-step copy: its policy judged "every step from
    60" and never acted). After: the horizon the original defaulted follows the copy's total_steps."""
    with django_capture_on_commit_callbacks(execute=False):
        original = sweep_services.sweep_create(
            config={**ORIGINAL, "total_steps": 300, "model_path": model_dir}, seeds=[0, 1, 2, 3], concurrency=4,
            name="long sweep", policy={"name": "median", "metric": "reward/mean"})
    assert original.policy["max_steps"] == 300
    form = copy_form(client_in, "sweep", original.pk).context["form"]
    assert "max_steps" not in form["policy_params"].value()
    data = as_browser_submits(form, copy_of=str(original.pk), total_steps="30")
    with django_capture_on_commit_callbacks(execute=False):
        response = client_in.post(reverse("sweeps:new"), data)
    assert response.status_code == 302, response.context["form"].errors
    copy = Sweep.objects.get(copied_from=original)
    assert copy.config["total_steps"] == 30 and copy.policy["max_steps"] == 30
    html = client_in.get(reverse("sweeps:detail", args=[copy.pk])).content.decode()
    assert "total_steps: 300 → 30" in html and "&quot;max_steps&quot;: 300" in html  # the change list says both


def launch_copy(client, django_capture_on_commit_callbacks, original, **typed) -> Sweep:
    form = copy_form(client, "sweep", original.pk).context["form"]
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(reverse("sweeps:new"), as_browser_submits(form, copy_of=str(original.pk), **typed))
    assert response.status_code == 302, response.context["form"].errors
    return Sweep.objects.filter(copied_from=original).latest("pk")


def test_a_copys_default_name_says_it_is_a_copy_and_what_changed_never_an_existing_one(
        client_in, model_dir, django_capture_on_commit_callbacks):
    """Before: every re-run was named as its original (three sweeps called "newcomer bayes"). After: the form
    opens with "<name> (copy)"; launched so, the name says what changed ("<name> · total_steps 60"), or stays
    "(copy)" when nothing did, numbered past any name its project has; a name the user writes is kept."""
    with django_capture_on_commit_callbacks(execute=False):
        original = sweep_services.sweep_create(config={**ORIGINAL, "model_path": model_dir}, seeds=[0, 1],
                                               concurrency=2, name="newcomer bayes")
    assert copy_form(client_in, "sweep", original.pk).context["form"]["name"].value() == "newcomer bayes (copy)"
    names = [launch_copy(client_in, django_capture_on_commit_callbacks, original).name,
             launch_copy(client_in, django_capture_on_commit_callbacks, original).name,
             launch_copy(client_in, django_capture_on_commit_callbacks, original, total_steps="60").name,
             launch_copy(client_in, django_capture_on_commit_callbacks, original, total_steps="60").name,
             launch_copy(client_in, django_capture_on_commit_callbacks, original, total_steps="60", lr="2e-05",
                         concurrency="1").name,
             launch_copy(client_in, django_capture_on_commit_callbacks, original, name="my own name").name]
    assert names == ["newcomer bayes (copy)", "newcomer bayes (copy) (2)", "newcomer bayes · total_steps 60",
                     "newcomer bayes · total_steps 60 (2)", "newcomer bayes · concurrency 1, total_steps 60 + 1 more",
                     "my own name"]
    copy = Sweep.objects.get(name="newcomer bayes · total_steps 60")
    assert copy.runs.first().name.startswith("newcomer bayes · total_steps 60 / seed ")
