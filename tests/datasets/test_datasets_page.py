"""The datasets page: a member uploads a JSONL/Parquet/CSV file or registers one on the server, sees its first
rows, maps its columns and sets the split; a run or an evaluation names it as dataset:<name> and records the file
and mapping it was submitted with. Bad files are refused with the line at fault and leave nothing behind."""
from __future__ import annotations

import io
import json
import os

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils.html import escape

from tests.conftest import logged_in, tiny_config
from webapp.datasets.models import DatasetEntry
from webapp.datasets.services import dataset_register
from webapp.projects.models import AuditEvent, Membership, Project
from webapp.runs.services import run_create

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

# the rows' answers are bare numbers, which the math verifier (a dataset's default) reads inside \boxed{}: a run asks
# for that form, or its submission is refused (training.reward_dry_run)
BOXED = {"answer_instruction": "Put your final answer within \\boxed{}."}
ROWS = [{"question": f"What is {i} + {i}?", "answer": str(2 * i), "system": "Be brief."} for i in range(40)]


@pytest.fixture(autouse=True)
def library(settings, tmp_path):
    settings.SEEDBED_LIBRARY_DIR = tmp_path / "library"
    return settings.SEEDBED_LIBRARY_DIR


@pytest.fixture
def ann(django_user_model):
    return django_user_model.objects.create_user(username="ann", password="x")


def jsonl(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def upload(client, name="gsm", filename="gsm.jsonl", content=None, **data):
    file = SimpleUploadedFile(filename, jsonl(ROWS) if content is None else content)
    return client.post(reverse("datasets:list"), {"form": "upload", "name": name, "project": "ann", "file": file,
                                                   **data})


def files_under(folder) -> list[str]:
    return sorted(p for _, _, names in os.walk(folder) for p in names)


def test_a_member_uploads_jsonl_and_sees_rows_columns_and_the_guessed_mapping(ann, library):
    client = logged_in(ann)
    response = upload(client)
    entry = DatasetEntry.objects.get(name="gsm")
    assert response.status_code == 302 and response.url == reverse("datasets:detail", args=[entry.pk])
    assert entry.project.name == "ann" and entry.rows == 40 and entry.source == "upload"
    assert entry.columns == ["question", "answer", "system"]
    assert (entry.prompt_field, entry.answer_field, entry.fields) == ("question", "answer", {"system_prompt": "system"})
    assert entry.path.startswith(str(library / "ann" / "datasets")) and open(entry.path, "rb").read() == jsonl(ROWS)
    page = client.get(response.url).content.decode()
    assert "What is 0 + 0?" in page and "dataset:gsm" in page and "4 rows held out" in page
    listing = client.get(reverse("datasets:list")).content.decode()
    assert 'data-dataset="gsm"' in listing and "humaneval" in listing and "reasoning_gym:&lt;task&gt;" in listing
    assert AuditEvent.objects.filter(action="dataset.upload", actor_name="ann", target_id=entry.pk).exists()


def test_csv_and_parquet_uploads_are_read_like_training_reads_them(ann, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    client = logged_in(ann)
    csv_text = 'prompt,answer,tests\n"Write f, a function",x,"assert f(1) == 2\nassert f(2) == 4"\nsecond,y,assert True\n'
    assert upload(client, name="c", filename="c.csv", content=csv_text.encode()).status_code == 302
    entry = DatasetEntry.objects.get(name="c")
    assert entry.rows == 2 and entry.fields == {"tests": "tests"}
    from training.data import load_file_dataset

    rows = load_file_dataset(entry.path, entry.prompt_field, entry.answer_field, entry.fields)
    assert rows[0]["prompt"] == "Write f, a function" and rows[0]["tests"] == "assert f(1) == 2\nassert f(2) == 4"
    table = pa.Table.from_pylist([{"problem": "p1", "solution": "1"}, {"problem": "p2", "solution": "2"}])
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    assert upload(client, name="p", filename="p.parquet", content=buffer.getvalue()).status_code == 302
    entry = DatasetEntry.objects.get(name="p")
    assert (entry.rows, entry.prompt_field, entry.answer_field) == (2, "problem", "solution")


@pytest.mark.parametrize("filename, content, field, message", [
    ("bad.jsonl", b'{"prompt": "a", "answer": "1"}\n{"prompt": "b", "answer": \n', "file", "bad.jsonl"),
    ("bad.jsonl", b'{"prompt": "a", "answer": "1"}\n{"prompt": "b", "answer": \n', "file", ":2: not valid JSON"),
    ("bin.jsonl", b"\xff\xfe\x00\x01binary\n", "file", "not UTF-8 text"),
    ("x.txt", b"hello\n", "file", "must be a .jsonl, .parquet, .csv file"),
    ("empty.jsonl", b"\n\n", "file", "the dataset is empty"),
    ("nocol.jsonl", b'{"text": "a", "label": "1"}\n', "prompt_field", "which column holds the prompt? The rows have: text, label"),
    ("short.csv", b"prompt,answer\na,1\nb\n", "file", "fewer values than the header"),
    ("fake.parquet", b"PAR1 not really", "file", "not a readable Parquet file"),
    # a number longer than Python converts to text (4,300 digits): int("...") raises ValueError, once a 500
    ("big.jsonl", b'{"prompt": "a", "answer": "1"}\n{"prompt": "b", "answer": 1' + b"0" * 5000 + b"}\n", "file",
     "big.jsonl:2: a number of more than 4300 digits"),
])
def test_bad_files_are_refused_with_the_line_at_fault_and_leave_nothing(ann, library, filename, content, field,
                                                                          message):
    response = upload(logged_in(ann), name="bad", filename=filename, content=content)
    body = response.content.decode()
    assert response.status_code == 400 and f'data-field="{field}"' in body and escape(message) in body
    assert not DatasetEntry.objects.exists() and files_under(library) == []


def test_a_mapping_that_names_a_missing_column_is_refused_naming_it(ann, library):
    response = upload(logged_in(ann), prompt_field="question", answer_field="solution")
    assert response.status_code == 400 and escape("no column 'solution'; the rows have: question, answer, system") \
        in response.content.decode()
    assert files_under(library) == []


def test_an_upload_over_the_size_limit_is_refused_before_it_is_stored(ann, library, monkeypatch):
    import webapp.datasets.views as views

    monkeypatch.setattr(views, "MAX_DATASET_BYTES", 1000)
    response = upload(logged_in(ann), content=jsonl(ROWS))  # ~2.5 kB
    assert response.status_code == 400 and "larger than the limit of 1,000 bytes" in response.content.decode()
    assert not DatasetEntry.objects.exists() and files_under(library) == []


def test_a_taken_name_and_a_foreign_project_are_field_errors(ann, django_user_model):
    client = logged_in(ann)
    upload(client)
    response = upload(client)
    assert response.status_code == 400 and escape("has a dataset named 'gsm' already") in response.content.decode()
    django_user_model.objects.create_user(username="bob", password="x")
    response = upload(client, name="x", project="bob")
    assert response.status_code == 400 and escape("no project 'bob' among yours") in response.content.decode()


def test_registering_a_server_file_checks_the_allowed_folders(ann, tmp_path):
    client = logged_in(ann)
    response = client.post(reverse("datasets:list"), {"form": "register", "name": "etc", "path": "/etc/passwd"})
    assert response.status_code == 400 and "must lie inside the allowed folders" in response.content.decode()
    path = tmp_path / "mine.jsonl"
    path.write_bytes(jsonl(ROWS[:5]))
    response = client.post(reverse("datasets:list"), {"form": "register", "name": "mine", "path": str(path),
                                                       "held_out_fraction": "0.2", "split_seed": "7"})
    entry = DatasetEntry.objects.get(name="mine")
    assert response.status_code == 302 and entry.path == str(path) and entry.source == "path"
    assert (entry.held_out_fraction, entry.split_seed, entry.rows) == (0.2, 7, 5)


def test_the_mapping_and_split_are_edited_by_members_only(ann, django_user_model):
    client = logged_in(ann)
    upload(client)
    entry = DatasetEntry.objects.get(name="gsm")
    url = reverse("datasets:detail", args=[entry.pk])
    bad = client.post(url, {"prompt_field": "question", "answer_field": "answer", "fields.tests": "nope",
                            "held_out_fraction": "0.2", "split_seed": "1"})
    assert bad.status_code == 400 and escape("no column 'nope'") in bad.content.decode()
    bad = client.post(url, {"prompt_field": "question", "held_out_fraction": "0.9", "split_seed": "1"})
    assert bad.status_code == 400 and "a number from 0 to 0.5" in bad.content.decode()
    ok = client.post(url, {"prompt_field": "question", "answer_field": "", "fields.system_prompt": "",
                           "held_out_fraction": "0.25", "split_seed": "3"})
    entry.refresh_from_db()
    assert ok.status_code == 302 and (entry.answer_field, entry.fields, entry.held_out_fraction) == ("", {}, 0.25)
    viewer = django_user_model.objects.create_user(username="vic", password="x")
    Membership.objects.create(project=entry.project, user=viewer, role="viewer")
    page = logged_in(viewer).get(url)
    assert page.status_code == 200 and "Save mapping" not in page.content.decode()
    assert logged_in(viewer).post(url, {"prompt_field": "answer", "held_out_fraction": "0", "split_seed": "0"}
                                  ).status_code == 403
    stranger = django_user_model.objects.create_user(username="sam", password="x")
    assert logged_in(stranger).get(url).status_code == 404
    assert 'data-dataset="gsm"' not in logged_in(stranger).get(reverse("datasets:list")).content.decode()


def test_a_run_names_a_dataset_and_records_its_file_mapping_and_split(ann, model_dir):
    upload(logged_in(ann))
    entry = DatasetEntry.objects.get(name="gsm")
    run = run_create(config=tiny_config(**BOXED, task="dataset:gsm", model_path=model_dir), user=ann)
    assert run.config["task"] == "dataset:gsm" and run.config["data_path"] == entry.path
    assert (run.config["prompt_field"], run.config["data_fields"], run.config["held_out_fraction"]) == (
        "question", {"system_prompt": "system"}, 0.1)
    # the run keeps what it was submitted with, whatever happens to the entry later
    entry.delete()
    from webapp.runs.services import parse_config

    assert parse_config(run.config, user=ann).data_path == run.config["data_path"]


def test_a_dataset_of_another_project_is_not_found_and_a_shared_name_must_be_qualified(ann, django_user_model,
                                                                                       model_dir, tmp_path):
    from training.fields import FieldErrors

    bob = django_user_model.objects.create_user(username="bob", password="x")
    path = tmp_path / "d.jsonl"
    path.write_bytes(jsonl(ROWS[:3]))
    dataset_register(user=bob, name="gsm", path=str(path))
    with pytest.raises(FieldErrors) as err:
        run_create(config=tiny_config(**BOXED, task="dataset:gsm", model_path=model_dir), user=ann)
    assert "no dataset 'gsm' in your projects" in err.value.errors["task"]
    own = tmp_path / "own.jsonl"
    own.write_bytes(jsonl(ROWS[3:6]))
    dataset_register(user=ann, name="gsm", path=str(own))
    Membership.objects.create(project=Project.objects.get(name="bob"), user=ann, role="member")
    run = run_create(config=tiny_config(**BOXED, task="dataset:gsm", model_path=model_dir), user=ann)  # its project's first
    assert run.project.name == "ann" and run.config["data_path"] == str(own)
    run = run_create(config=tiny_config(**BOXED, task="dataset:gsm", model_path=model_dir), user=ann,
                     project=Project.objects.get(name="bob"))
    assert run.config["data_path"] == str(path)
    lab = Project.objects.create(name="lab")
    Membership.objects.create(project=lab, user=ann, role="member")
    with pytest.raises(FieldErrors) as err:
        run_create(config=tiny_config(**BOXED, task="dataset:gsm", model_path=model_dir), user=ann, project=lab)
    assert "name one as dataset:<project>/gsm" in err.value.errors["task"]
    run = run_create(config=tiny_config(**BOXED, task="dataset:bob/gsm", model_path=model_dir), user=ann, project=lab)
    assert run.config["data_path"] == str(path)
    with pytest.raises(FieldErrors) as err:
        run_create(config=tiny_config(**BOXED, task="dataset:../etc", model_path=model_dir), user=ann)
    assert "dataset:<name>" in err.value.errors["task"]


def test_the_run_form_suggests_the_users_datasets_and_takes_one_from_the_link(ann):
    client = logged_in(ann)
    upload(client)
    page = client.get(reverse("runs:new") + "?task=dataset:gsm").content.decode()
    assert '<option value="dataset:gsm">' in page and 'value="dataset:gsm"' in page
    entry = DatasetEntry.objects.get(name="gsm")  # the form shows the dataset's own file, mapping and split
    assert f'value="{entry.path}"' in page and 'value="question"' in page and 'value="0.1"' in page


def test_an_evaluation_of_a_dataset_reads_its_held_out_rows(ann, model_dir):
    from webapp.evals.services import eval_create
    from workers.eval_tasks import job_examples

    upload(logged_in(ann))
    entry = DatasetEntry.objects.get(name="gsm")
    run = run_create(config=tiny_config(**BOXED, task="dataset:gsm", model_path=model_dir), user=ann)
    job = eval_create(run=run, user=ann, models=["base"], task="dataset:gsm", problems=0, n=2, ks=[1])
    assert job.data_path == entry.path and job.problems == 4  # 10 % of 40 rows
    assert job.data_options == {"data_fields": {"system_prompt": "system"}, "held_out_fraction": 0.1, "split_seed": 0}
    held = [ex["prompt"] for ex in job_examples(job)]
    from training.data import make_prompt_source

    source = make_prompt_source("dataset:gsm", entry.path, "question", "answer", held_out_fraction=0.1)
    assert held == [ex["prompt"] for ex in source.held_out] and not set(held) & {ex["prompt"] for ex in source.examples}
    assert job_examples(job)[0]["system_prompt"] == "Be brief."


def test_an_upload_without_the_csrf_token_is_refused(ann):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(ann)
    assert upload(client).status_code == 403
    assert not DatasetEntry.objects.exists()
