"""The run form's model_path offers the library's models the user may use, named: the built-in ones (the tiny
model's folder too) and the registered folders of the user's projects, never another project's."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils.html import escape

from tests.conftest import logged_in
from training.config import default_tiny_model_dir
from webapp.library.models import ModelEntry
from webapp.projects.models import Project

pytestmark = [pytest.mark.django_db]


def offered(page: str) -> dict[str, str]:
    """The model_path datalist's options: value -> label."""
    box = re.search(r'<datalist id="model_path-suggestions">(.*?)</datalist>', page, re.S).group(1)
    return {value: label for value, label in re.findall(r'<option value="([^"]*)"(?: label="([^"]*)")?>', box)}


def test_the_run_form_offers_the_models_the_user_may_use_and_no_other_projects(django_user_model, tmp_path,
                                                                                 tiny_model_dir):
    ann = django_user_model.objects.create_user(username="ann", password="x")
    bob = django_user_model.objects.create_user(username="bob", password="x")
    mine, theirs = tmp_path / "SmolLM2-135M-Instruct-gsm8k", tmp_path / "bobs-secret-model"
    ModelEntry.objects.create(project=Project.objects.get(name="ann"), name="smol-gsm8k", path=str(mine))
    ModelEntry.objects.create(project=Project.objects.get(name="bob"), name="bobs", path=str(theirs))
    page = logged_in(ann).get(reverse("runs:new")).content.decode()
    options = offered(page)
    assert options[escape(str(mine))] == "smol-gsm8k (ann)"
    assert options[escape(default_tiny_model_dir())] == "tiny (built-in)"
    assert str(theirs) not in page and "bobs" not in options.values()
    assert 'list="model_path-suggestions"' in page
