"""One row check wherever a dataset's rows are read (training.data.row_example): a bad row the upload's check of the
first CHECKED_ROWS rows reaches is refused with the message the worker's read of every row fails a run with when
the same row lies past them: the same rule, the same row and field named the same way."""
from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from training.data import CHECKED_ROWS, DatasetError, load_file_dataset
from training.fields import FieldErrors
from webapp.datasets.models import DatasetEntry
from webapp.datasets.services import dataset_upload

pytestmark = [pytest.mark.django_db]

GOOD = {"prompt": "What is 1 + 1?", "answer": "2"}
# each bad row, and the rule's words after '<file>:<line>: '
BAD_ROWS = [
    ([1, 2], "expected an object, got list"),
    ("a string", "expected an object, got str"),
    ({"answer": "2"}, "missing field 'prompt' (the row has answer)"),
    ({"prompt": "  ", "answer": "2"}, "field 'prompt' must be a non-empty string"),
    ({"prompt": 7, "answer": "2"}, "field 'prompt' must be a non-empty string"),
]


@pytest.fixture(autouse=True)
def library(settings, tmp_path):
    settings.SEEDBED_LIBRARY_DIR = tmp_path / "library"


@pytest.fixture
def ann(django_user_model):
    return django_user_model.objects.create_user(username="ann", password="x")


def jsonl(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def upload_error(user, name: str, content: bytes, filename: str) -> str:
    with pytest.raises(FieldErrors) as refused:
        dataset_upload(user=user, name=name, upload=SimpleUploadedFile(filename, content), prompt_field="prompt",
                       answer_field="answer")
    return refused.value.errors["file"]


@pytest.mark.parametrize("bad, rule", BAD_ROWS)
def test_the_worker_names_a_late_bad_row_as_the_upload_names_it_first(ann, bad, rule):
    assert upload_error(ann, "first", jsonl([bad, GOOD]), "first.jsonl") == f"first.jsonl:1: {rule}"
    late = CHECKED_ROWS + 1
    entry = dataset_upload(user=ann, name="late", upload=SimpleUploadedFile("late.jsonl", jsonl(
        [GOOD] * CHECKED_ROWS + [bad])), prompt_field="prompt", answer_field="answer")
    assert DatasetEntry.objects.get(pk=entry.pk).rows == late  # counted, not checked: past the first rows
    with pytest.raises(DatasetError) as worker:
        load_file_dataset(entry.path, entry.prompt_field, entry.answer_field, entry.fields)
    assert str(worker.value) == f"{entry.path}:{late}: {rule}"


def test_a_csv_row_is_held_to_the_same_rule_at_its_line(ann):
    def csv_bytes(rows) -> bytes:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["prompt", "answer"])
        writer.writerows(rows)
        return out.getvalue().encode()

    rule = "field 'prompt' must be a non-empty string"
    assert upload_error(ann, "c1", csv_bytes([["", "2"], ["q", "2"]]), "c1.csv") == f"c1.csv:2: {rule}"
    entry = dataset_upload(user=ann, name="c2", upload=SimpleUploadedFile("c2.csv", csv_bytes(
        [["q", "2"]] * CHECKED_ROWS + [["", "2"]])), prompt_field="prompt", answer_field="answer")
    with pytest.raises(DatasetError, match=rf"^{entry.path}:{CHECKED_ROWS + 2}: {rule}$"):
        load_file_dataset(entry.path, entry.prompt_field, entry.answer_field, entry.fields)
