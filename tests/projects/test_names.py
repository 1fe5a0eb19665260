"""Names are names: every user-chosen name that becomes part of a path (a project's library folder, an imported
model's folder, an uploaded dataset's file) is one plain path component, refused with a field error naming the
field otherwise, through the API and the web forms alike; and a write that replaces a folder checks that it stays
inside its parent before anything is removed. Another project's files are never touched."""
from __future__ import annotations

import os

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils.html import escape

from tests.conftest import logged_in
from training.fields import FieldErrors
from training.models import atomic_folder
from training.names import child_path, path_component_error
from webapp.datasets.models import DatasetEntry
from webapp.library.models import ModelEntry
from webapp.projects.models import Membership, Project

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

ROWS = b'{"question": "1 + 1?", "answer": "2"}\n{"question": "2 + 2?", "answer": "4"}\n'
# ".", "..", a separator, NUL, and Unicode look-alikes NFKC folds into something else: fullwidth full stops
# (into ".."), a fullwidth solidus (into "/"), fullwidth letters, a ligature
BAD_NAMES = [".", "..", "a/b", "a\\b", "a\x00b", "\uff0e\uff0e", "a\uff0fb", "\uff4d\uff59", "e\ufb01le"]


@pytest.fixture(autouse=True)
def library(settings, tmp_path):
    settings.SEEDBED_LIBRARY_DIR = tmp_path / "library"
    return tmp_path / "library"


@pytest.fixture
def ann(django_user_model):
    return django_user_model.objects.create_user(username="ann", password="x")


@pytest.fixture
def others_files(library, django_user_model):
    """Another project's imported model and uploaded dataset, on disk: what an attack would delete."""
    django_user_model.objects.create_user(username="zoe", password="x")
    model = library / "zoe" / "mine"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    data = library / "zoe" / "datasets"
    data.mkdir()
    (data / "gsm-0123abcd.jsonl").write_bytes(ROWS)
    return [model / "config.json", data / "gsm-0123abcd.jsonl"]


def untouched(files) -> bool:
    return all(f.is_file() for f in files)


@pytest.fixture
def gguf(tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + b"\x00" * 64)
    return str(path)


def field_error(response, field: str) -> bool:
    body = response.content.decode()
    return response.status_code == 400 and f'data-field="{field}"' in body


@pytest.mark.parametrize("name", BAD_NAMES)
def test_the_one_check_refuses_what_is_not_exactly_one_plain_name(name):
    assert path_component_error(name)
    assert path_component_error("gsm8k-v2.1") == "" and path_component_error("é-données") == ""


@pytest.mark.parametrize("name", [*BAD_NAMES, "datasets", ".hidden"])
def test_a_gguf_import_with_a_bad_name_is_a_name_error_on_the_models_page(ann, gguf, others_files, library, name):
    client = logged_in(ann)
    response = client.post(reverse("library:models"), {"form": "import", "project": "ann", "name": name,
                                                       "gguf": gguf})
    assert field_error(response, "name"), response.content.decode()[:500]
    response = client.post(reverse("library:models"), {"form": "register", "project": "ann", "name": name,
                                                       "path": str(library / "zoe" / "mine")})
    assert field_error(response, "name")
    assert not ModelEntry.objects.exists() and untouched(others_files)


@pytest.mark.parametrize("name", [*BAD_NAMES, ".hidden"])
def test_a_dataset_with_a_bad_name_is_a_name_error_on_the_page_and_the_api(ann, others_files, library, name, client):
    from tests.api.conftest import Api, _user_with_token

    web = logged_in(ann)
    file = SimpleUploadedFile("gsm.jsonl", ROWS)
    response = web.post(reverse("datasets:list"), {"form": "upload", "project": "ann", "name": name, "file": file})
    assert field_error(response, "name"), response.content.decode()[:500]
    response = web.post(reverse("datasets:list"), {"form": "register", "project": "ann", "name": name,
                                                   "path": str(others_files[1])})
    assert field_error(response, "name")
    from django.contrib.auth import get_user_model

    api = Api(client, _user_with_token(get_user_model(), "amy")[1])
    response = api.client.post("/api/v1/datasets", {"name": name, "file": SimpleUploadedFile("gsm.jsonl", ROWS)},
                               **api._headers())
    assert response.status_code == 400 and "name" in response.json()["errors"], response.content
    response = api.post("/datasets/register", {"name": name, "path": str(others_files[1])})
    assert response.status_code == 400 and "name" in response.json()["errors"], response.content
    assert not DatasetEntry.objects.exists() and untouched(others_files)
    assert not os.path.exists(library / "ann" / "datasets") or os.listdir(library / "ann" / "datasets") == []


@pytest.mark.parametrize("name", [*BAD_NAMES, "\uff44efault"])
def test_a_project_with_a_bad_name_is_a_name_error_on_the_page_and_the_api(ann, others_files, name, client):
    from django.contrib.auth import get_user_model

    from tests.api.conftest import Api, _user_with_token

    before = set(Project.objects.values_list("name", flat=True))
    response = logged_in(ann).post(reverse("projects:list"), {"name": name})
    assert field_error(response, "name")
    api = Api(client, _user_with_token(get_user_model(), "amy")[1])
    response = api.post("/projects", {"name": name})
    assert response.status_code == 400 and "name" in response.json()["errors"], response.content
    assert set(Project.objects.values_list("name", flat=True)) == before | {"amy"}
    assert untouched(others_files)


@pytest.mark.parametrize("username", ["..", ".", "default", "DEFAULT", ".hidden"])
def test_a_users_personal_project_gets_a_safe_name_whatever_the_username(django_user_model, username):
    user = django_user_model.objects.create_user(username=username, password="x")
    project = Project.objects.get(personal_for=user)
    assert path_component_error(project.name) == "" and not project.name.startswith(".")
    assert project.name.casefold() != "default"
    assert Membership.objects.get(project=project).user == user
    assert not Membership.objects.filter(project__name="default").exists()


@pytest.mark.parametrize("last", ["..", "."])
def test_the_atomic_replace_refuses_a_target_outside_its_parent_before_removing_anything(library, others_files,
                                                                                           last):
    (library / "ann").mkdir()
    with pytest.raises(FieldErrors):
        with atomic_folder(os.path.join(library, "ann", last), prefix=".import-") as staging:
            open(os.path.join(staging, "config.json"), "w").close()
    assert untouched(others_files) and os.listdir(library / "ann") == []


def test_the_atomic_replace_refuses_a_symlink_out_of_its_parent(library, others_files):
    (library / "ann").mkdir()
    os.symlink(library / "zoe", library / "ann" / "evil")
    with pytest.raises(FieldErrors):
        with atomic_folder(os.path.join(library, "ann", "evil")) as staging:
            open(os.path.join(staging, "config.json"), "w").close()
    assert untouched(others_files) and sorted(os.listdir(library / "ann")) == ["evil"]
    with pytest.raises(FieldErrors, match="name"):
        child_path(str(library / "ann"), "evil", "name")


def test_an_import_queued_before_names_were_checked_fails_without_touching_anything(ann, gguf, others_files,
                                                                                    library):
    from webapp.library.services import model_import_run

    entry = ModelEntry.objects.create(project=Project.objects.get(name="ann"), name="..", source=gguf,
                                      path=os.path.join(library, "ann", ".."), status="importing", created_by=ann)
    done = model_import_run(entry_id=entry.pk, log=lambda _: None)
    assert done.status == "failed" and "name" in done.error
    assert untouched(others_files)
