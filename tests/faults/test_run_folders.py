"""Run folders named by a UUID (SQLite and PostgreSQL): the migration gives every run one and moves its folder
runs/<id>/ to runs/<uid>/ with its checkpoints' recorded paths; a second database on the same $SEEDBED_HOME
starts its runs in new folders, never in an old run's."""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state([t for t in targets if t[1] is not None]).apps


def test_existing_run_folders_move_to_their_uid_with_their_checkpoints(settings, tmp_path):
    settings.SEEDBED_RUNS_DIR = tmp_path / "runs"
    old = migrate([("runs", "0005_run_dispatch_state")])
    Project = old.get_model("projects", "Project")
    project = Project.objects.create(name="p")
    Run = old.get_model("runs", "Run")
    with_folder = Run.objects.create(config={}, seed=1, project=project)
    without = Run.objects.create(config={}, seed=2, project=project)
    folder = tmp_path / "runs" / str(with_folder.pk)
    (folder / "checkpoints" / "step_000004").mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("{}\n")
    old.get_model("runs", "Checkpoint").objects.create(run=with_folder, step=4,
                                                       path=str(folder / "checkpoints" / "step_000004"))

    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    from webapp.runs.models import Checkpoint, Run as NewRun

    moved = NewRun.objects.get(pk=with_folder.pk)
    other = NewRun.objects.get(pk=without.pk)
    assert moved.uid and other.uid and moved.uid != other.uid
    assert not folder.exists() and (moved.folder / "metrics.jsonl").read_text() == "{}\n"
    assert Checkpoint.objects.get(run=moved).path == str(moved.folder / "checkpoints" / "step_000004")
    assert (moved.folder / "checkpoints" / "step_000004").is_dir()
    fresh = NewRun.objects.create(config={}, seed=3, project_id=project.pk)
    assert fresh.folder != moved.folder and fresh.folder.name == str(fresh.uid)
