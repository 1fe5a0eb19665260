""""New run with model_path = the folder above" on a model's page, through Django's test client: the run form
opens with that folder in model_path. Before, the link was a bare /runs/new/ and model_path came up empty (the
built-in tiny model)."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils.html import escape

from tests.conftest import logged_in
from webapp.library.models import ModelEntry

pytestmark = [pytest.mark.django_db]


def test_new_run_from_a_models_page_opens_the_form_with_its_folder(django_user_model, model_dir):
    client = logged_in(django_user_model.objects.create_user(username="ann", password="x"))
    client.post(reverse("library:models"), {"form": "register", "project": "ann", "name": "mine", "path": model_dir})
    entry = ModelEntry.objects.get(name="mine")
    page = client.get(reverse("library:model", args=[entry.pk])).content.decode()
    link = re.search(r'id="new-run-from-model" href="([^"]+)"', page).group(1).replace("&amp;", "&")
    assert link.startswith(reverse("runs:new") + "?model_path=")
    response = client.get(link)
    assert response.status_code == 200
    assert response.context["form"]["model_path"].value() == model_dir
    assert f'value="{escape(model_dir)}"' in response.content.decode()
    # any folder asked for is shown as asked: the form's submit checks it as it checks a typed one
    form = client.get(reverse("runs:new"), {"model_path": "/etc"}).context["form"]
    assert form["model_path"].value() == "/etc"
    # with a dataset's task too ("New run on it" from a dataset's page): both prefilled
    form = client.get(reverse("runs:new"), {"model_path": model_dir, "task": "arithmetic"}).context["form"]
    assert (form["model_path"].value(), form["task"].value()) == (model_dir, "arithmetic")
