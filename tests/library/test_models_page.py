"""The models page: built-in models, folders registered by a project's members, GGUF files imported on a worker,
checkpoints of runs as models; every path inside the allowed folders; another project's entries are 404."""
from __future__ import annotations

import os

import pytest
from tests.conftest import logged_in
from django.urls import reverse
from django.utils.html import escape

from webapp.library.models import ModelEntry
from webapp.library.services import model_import_gguf, model_import_run
from webapp.projects.models import AuditEvent

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]




@pytest.fixture
def ann(django_user_model):
    return django_user_model.objects.create_user(username="ann", password="x")


def register(client, **data):
    return client.post(reverse("library:models"), {"form": "register", "project": "ann", **data})


def test_a_member_registers_a_folder_and_sees_its_description(ann, smollm2_dir, settings):
    settings.SEEDBED_DATA_ROOTS = [*settings.SEEDBED_DATA_ROOTS, os.path.dirname(smollm2_dir)]
    client = logged_in(ann)
    response = register(client, name="smol", path=smollm2_dir)
    entry = ModelEntry.objects.get(name="smol")
    assert response.status_code == 302 and response.url == reverse("library:model", args=[entry.pk])
    assert entry.project.name == "ann" and entry.status == "ready"
    page = client.get(response.url).content.decode()
    assert "LlamaForCausalLM" in page and "134515008" in page and "&lt;|im_start|&gt;" in page
    listing = client.get(reverse("library:models")).content.decode()
    assert 'data-model="smol"' in listing and "SmolLM2-135M-Instruct (built-in)" in listing
    assert AuditEvent.objects.filter(action="model.register", actor_name="ann").exists()


@pytest.mark.parametrize("data, field, message", [
    ({"name": "x", "path": "/etc"}, "path", "must lie inside the allowed folders"),
    ({"name": "x", "path": "MODEL_DIR/.."}, "path", "not a model folder (no config.json)"),
    ({"name": "x", "path": ""}, "path", "give the model folder"),
    ({"name": "bad name!", "path": "MODEL_DIR"}, "name", "letters, digits"),
    ({"name": "x", "path": "MODEL_DIR", "project": "someone-elses"}, "project", "no project 'someone-elses'"),
])
def test_bad_registrations_are_field_errors_and_create_nothing(ann, model_dir, data, field, message):
    data = {k: v.replace("MODEL_DIR", model_dir) for k, v in data.items()}
    response = register(logged_in(ann), **data)
    assert response.status_code == 400
    assert f'data-field="{field}"><li>' in response.content.decode() and escape(message) in response.content.decode()
    assert not ModelEntry.objects.exists()


def test_another_projects_model_is_404(ann, django_user_model, model_dir):
    register(logged_in(ann), name="mine", path=model_dir)
    entry = ModelEntry.objects.get()
    eve = django_user_model.objects.create_user(username="eve", password="x")
    client = logged_in(eve)
    assert client.get(reverse("library:model", args=[entry.pk])).status_code == 404
    assert 'data-model="mine"' not in client.get(reverse("library:models")).content.decode()


def test_a_gguf_import_is_queued_for_a_worker_and_a_bad_file_fails_visibly(ann, tmp_path,
                                                                             django_capture_on_commit_callbacks):
    fake = tmp_path / "broken.gguf"
    fake.write_bytes(b"GGUF" + b"\x00" * 64)  # the magic, then nothing a reader can use
    with django_capture_on_commit_callbacks() as callbacks:
        entry = model_import_gguf(user=ann, name="broken", gguf=str(fake))
    assert entry.status == "importing" and entry.path.endswith(os.path.join("library", "ann", "broken"))
    assert len(callbacks) == 1  # the import task, sent once the entry is committed
    page = logged_in(ann).get(reverse("library:model", args=[entry.pk]))
    assert page["Refresh"] == "3" and "Importing" in page.content.decode()
    done = model_import_run(entry_id=entry.pk, log=lambda _: None)
    assert done.status == "failed" and done.error and not os.path.exists(done.path)
    assert "model-error" in logged_in(ann).get(reverse("library:model", args=[entry.pk])).content.decode()
    with pytest.raises(Exception, match="no GGUF magic"):
        (tmp_path / "text.gguf").write_text("hello")
        model_import_gguf(user=ann, name="text", gguf=str(tmp_path / "text.gguf"))


def test_the_run_form_suggests_the_library_models(ann, model_dir, smollm2_dir):
    register(logged_in(ann), name="mine", path=model_dir)
    page = logged_in(ann).get(reverse("runs:new")).content.decode()
    assert 'list="model_path-suggestions"' in page
    assert f'<option value="{os.path.realpath(model_dir)}" label="mine (ann)">' in page
    assert f'<option value="{smollm2_dir}" label="SmolLM2-135M-Instruct (built-in)">' in page


def test_the_model_pages_list_the_runs_from_a_model_and_their_checkpoints(ann, django_user_model, model_dir):
    """The runs app fills the library's model page sections at ready() (the library imports no runs code,
    docs/architecture.md#layers): the runs started from a model's folder and their checkpoints, the user's only."""
    from webapp.runs.models import Checkpoint, Run

    client = logged_in(ann)
    register(client, name="mine", path=model_dir)
    entry = ModelEntry.objects.get()
    run = Run.objects.create(project=entry.project, name="from-mine", config={"model_path": entry.path}, seed=3,
                             created_by=ann)
    Run.objects.create(project=entry.project, name="from-elsewhere", config={"model_path": "/elsewhere"}, seed=4,
                       created_by=ann)
    Checkpoint.objects.create(run=run, step=7, path="/checkpoints/from-mine/step-7")
    detail = client.get(reverse("library:model", args=[entry.pk])).content.decode()
    runs_section = detail.split('id="model-runs"')[1].split("</ul>")[0]
    assert f'href="{reverse("runs:detail", args=[run.pk])}">from-mine</a>' in runs_section
    assert "from-elsewhere" not in runs_section
    listing = client.get(reverse("library:models")).content.decode()
    assert 'id="checkpoint-models"' in listing and "/checkpoints/from-mine/step-7" in listing
    eve = django_user_model.objects.create_user(username="eve", password="x")
    assert "/checkpoints/from-mine/step-7" not in logged_in(eve).get(reverse("library:models")).content.decode()
