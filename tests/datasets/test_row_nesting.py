"""A dataset row nested deeper than MAX_NESTING lists and objects is a field error wherever rows are read: the
upload page (b1d04b3: a 500, Python's JSON decoder raising RecursionError at 100,000 levels; a row 900 deep was
accepted), the upload's check, and the worker's read of a row past the first rows the upload checks."""
from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils.html import escape

from tests.conftest import logged_in
from training.data import CHECKED_ROWS, DatasetError, load_file_dataset
from training.data_limits import MAX_NESTING
from webapp.datasets.models import DatasetEntry
from webapp.datasets.services import dataset_upload

pytestmark = [pytest.mark.django_db]

GOOD = json.dumps({"prompt": "What is 1 + 1?", "answer": "2"}) + "\n"


def nested_line(depth: int) -> str:
    """A row whose "meta" holds lists ``depth - 1`` deep (the row itself is the first level)."""
    inner = "[" * (depth - 1) + "]" * (depth - 1)
    return '{"prompt": "What is 1 + 1?", "answer": "2", "meta": %s}\n' % inner


@pytest.fixture(autouse=True)
def library(settings, tmp_path):
    settings.SEEDBED_LIBRARY_DIR = tmp_path / "library"


@pytest.fixture
def ann(django_user_model):
    return django_user_model.objects.create_user(username="ann", password="x")


@pytest.mark.parametrize("depth", [100_000, 900, MAX_NESTING + 1])
def test_the_upload_page_names_a_deep_row_in_a_field_error(ann, depth):
    file = SimpleUploadedFile("deep.jsonl", (GOOD + nested_line(depth)).encode())
    response = logged_in(ann).post(reverse("datasets:list"), {"form": "upload", "name": "deep", "project": "ann",
                                                               "file": file})
    body = response.content.decode()
    assert response.status_code == 400 and 'data-field="file"' in body, body[:3000]
    assert escape(f"deep.jsonl:2: nested more than {MAX_NESTING} lists and objects deep") in body
    assert not DatasetEntry.objects.exists()


def test_a_row_at_the_limit_is_read_and_a_deep_row_past_the_checked_rows_fails_the_worker(ann):
    at_limit = dataset_upload(user=ann, name="ok", upload=SimpleUploadedFile(
        "ok.jsonl", (GOOD + nested_line(MAX_NESTING)).encode()), prompt_field="prompt", answer_field="answer")
    assert len(load_file_dataset(at_limit.path, "prompt", "answer", None)) == 2
    late = dataset_upload(user=ann, name="late", upload=SimpleUploadedFile(
        "late.jsonl", (GOOD * CHECKED_ROWS + nested_line(100_000)).encode()), prompt_field="prompt",
        answer_field="answer")
    with pytest.raises(DatasetError) as worker:
        load_file_dataset(late.path, late.prompt_field, late.answer_field, late.fields)
    assert str(worker.value).endswith(f":{CHECKED_ROWS + 1}: nested more than {MAX_NESTING} lists and objects deep")
