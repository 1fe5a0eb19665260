"""A library entry's folder is checked again on every "try it": a viewer of a project who registered one of its
runs' checkpoints as a model in a project of their own may try it while they may read that run, and not once they
are removed from the run's project (the page's try refused with a field error naming ``model``, and a trial
queued before the removal failed by the worker with the same reason instead of being answered)."""
from __future__ import annotations

import shutil

import pytest
from django.urls import reverse

from tests.conftest import logged_in
from training.fields import FieldErrors
from webapp.library import services
from webapp.library.models import ModelTrial
from webapp.projects.models import Membership, Project, Role
from webapp.projects.services import member_set, project_create
from webapp.runs.services import run_create

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


@pytest.fixture
def registered(settings, tmp_path, django_user_model, tiny_model_dir):
    """alice's run in project vision, a checkpoint of it, and vic (vision's viewer) who registered that
    checkpoint as a model "borrowed" in his personal project."""
    settings.SEEDBED_RUNS_DIR = tmp_path / "home" / "runs"
    settings.SEEDBED_DATA_ROOTS = [*settings.SEEDBED_DATA_ROOTS, str(settings.SEEDBED_RUNS_DIR)]
    alice = django_user_model.objects.create_user(username="alice", password="x")
    vic = django_user_model.objects.create_user(username="vic", password="x")
    vision = project_create(user=alice, name="vision")
    member_set(user=alice, project=vision, username="vic", role=Role.VIEWER)
    run = run_create(config={"model_path": tiny_model_dir}, user=alice, project=vision)
    checkpoint = settings.SEEDBED_RUNS_DIR / str(run.uid) / "checkpoints" / "step_000002"
    shutil.copytree(tiny_model_dir, checkpoint)
    entry = services.model_register(user=vic, name="borrowed", path=str(checkpoint),
                                    project=Project.objects.get(name="vic"))
    return {"vic": vic, "vision": vision, "entry": entry}


def test_a_viewer_removed_from_the_runs_project_can_no_longer_try_its_checkpoint(registered):
    vic, entry = registered["vic"], registered["entry"]
    queued = services.model_try(user=vic, entry=entry, prompt="1+1=", max_new_tokens=2)  # still a viewer: allowed
    Membership.objects.filter(user=vic, project=registered["vision"]).delete()

    # the trial queued before the removal: the worker checks again and does not run the checkpoint
    failed = services.model_try_run(trial_id=queued.pk)
    assert failed.status == "failed" and not failed.reply
    assert "model: borrowed: its folder is not found in your projects" in failed.error
    # a new trial: refused at once, naming the field
    with pytest.raises(FieldErrors) as refused:
        services.model_try(user=vic, entry=entry, prompt="1+1=", max_new_tokens=2)
    assert refused.value.errors["model"].startswith("borrowed: its folder is not found in your projects: ")
    page = logged_in(vic).post(reverse("library:model-try", args=[entry.pk]),
                               {"prompt": "1+1=", "max_new_tokens": "2", "temperature": "0"})
    assert page.status_code == 400 and "its folder is not found in your projects" in page.content.decode()
    assert ModelTrial.objects.count() == 1  # nothing more queued


def test_while_the_viewer_may_read_the_run_the_trial_is_answered(registered):
    trial = services.model_try(user=registered["vic"], entry=registered["entry"], prompt="1+1=", max_new_tokens=2)
    done = services.model_try_run(trial_id=trial.pk)
    assert done.status == "done", done.error
