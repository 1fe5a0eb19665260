"""Datasets through the token API: upload (multipart), register a server file, read, remap; a run names one as
dataset:<name>. The same services and checks as the datasets page."""
from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

ROWS = "".join(json.dumps({"question": f"{i} + 1?", "answer": str(i + 1)}) + "\n" for i in range(20))


@pytest.fixture(autouse=True)
def library(settings, tmp_path):
    settings.SEEDBED_LIBRARY_DIR = tmp_path / "library"


def upload(api, name="adds", content=ROWS.encode(), filename="adds.jsonl", **fields):
    return api.client.post("/api/v1/datasets", {"name": name, "file": SimpleUploadedFile(filename, content), **fields},
                           **api._headers())


def test_upload_read_remap_and_launch_a_run_on_a_dataset(alice, bob, config):
    created = upload(alice, project="vision")
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["task"], body["project"], body["rows"]) == ("dataset:adds", "vision", 20)
    detail = alice.get(f"/datasets/{body['id']}").json()
    assert (detail["prompt_field"], detail["answer_field"], detail["columns"]) == ("question", "answer",
                                                                                  ["question", "answer"])
    assert detail["preview"][0] == {"question": "0 + 1?", "answer": "1"}
    assert [d["name"] for d in alice.get("/datasets", project="vision").json()["datasets"]] == ["adds"]
    remapped = alice.post(f"/datasets/{body['id']}/mapping", {"prompt_field": "question", "answer_field": "answer",
                                                              "held_out_fraction": 0.25, "split_seed": 4})
    assert remapped.status_code == 200 and remapped.json()["held_out_fraction"] == 0.25
    bare = alice.post("/runs", {"config": {**config, "task": "dataset:adds"}, "project": "vision"})
    # its answers are bare numbers, which the math verifier reads inside \boxed{} only: refused, saying so
    assert bare.status_code == 400 and "the math verifier scores the first row's reference answer \"1\" 0.0 " \
        "(\"no final answer found\")" in bare.json()["errors"]["rewards"], bare.content
    config = {**config, "answer_instruction": "Put your final answer within \\boxed{}."}
    run = alice.post("/runs", {"config": {**config, "task": "dataset:adds"}, "project": "vision"})
    assert run.status_code == 201, run.content
    launched = alice.get(f"/runs/{run.json()['id']}").json()
    assert launched["config"]["data_path"] == detail["path"] and launched["config"]["split_seed"] == 4
    # bob is in none of alice's projects: her dataset is not there for him
    assert bob.get(f"/datasets/{body['id']}").status_code == 404
    assert bob.get("/datasets").json()["datasets"] == []
    refused = bob.post("/runs", {"config": {**config, "task": "dataset:adds"}})
    assert refused.status_code == 400 and "no dataset 'adds' in your projects" in refused.json()["errors"]["task"]


@pytest.mark.parametrize("fields, content, field, message", [
    ({}, b'{"question": "a"\n', "file", "adds.jsonl:1: not valid JSON"),
    ({"prompt_field": "nope"}, ROWS.encode(), "prompt_field", "no column 'nope'"),
    ({"held_out_fraction": "0.7"}, ROWS.encode(), "held_out_fraction", "a number from 0 to 0.5"),
    ({"project": "vision"}, ROWS.encode(), "project", "no project 'vision' among yours"),
    ({"name": "../x"}, ROWS.encode(), "name", "letters, digits"),
    ({}, ROWS.encode() + b'{"question": "big", "answer": 1' + b"0" * 5000 + b"}\n", "file",
     "adds.jsonl:21: a number of more than 4300 digits"),
])
def test_bad_uploads_are_field_errors(bob, fields, content, field, message):
    from webapp.datasets.models import DatasetEntry

    response = upload(bob, content=content, **{"name": "adds", **fields})
    assert response.status_code == 400 and message in response.json()["errors"][field], response.content
    assert not DatasetEntry.objects.exists()


def test_register_checks_the_allowed_folders(alice, tmp_path):
    assert alice.post("/datasets/register", {"name": "pw", "path": "/etc/passwd"}).json()["errors"]["path"].startswith(
        "must lie inside the allowed folders")
    path = tmp_path / "d.csv"
    path.write_text("prompt,answer\nhi,1\n")
    response = alice.post("/datasets/register", {"name": "d", "path": str(path)})
    assert response.status_code == 201 and response.json()["rows"] == 1
