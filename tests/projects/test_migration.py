"""Projects arriving on a database with work in it (SQLite and PostgreSQL): every user gets a personal project,
every run, sweep and eval job goes to its creator's personal project (a sweep's runs and an eval job to their
sweep's or origin's), and work without a creator to the staff-only "default" project."""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

BEFORE = [("runs", "0002_sweep_moved_to_sweeps"), ("sweeps", "0004_sweep_table_renamed"),
          ("evals", "0002_sweep_moved_to_sweeps"), ("projects", None)]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state([t for t in targets if t[1] is not None]).apps


def test_existing_work_goes_to_its_creators_personal_project():
    old = migrate(BEFORE)
    User = old.get_model("auth", "User")
    ann = User.objects.create(username="ann")
    ben = User.objects.create(username="ben")
    sweep = old.get_model("sweeps", "Sweep").objects.create(name="s", config={}, seeds=[1], concurrency=1,
                                                            created_by=ann)
    Run = old.get_model("runs", "Run")
    in_sweep = Run.objects.create(name="in sweep", sweep=sweep, config={}, seed=1, created_by=ann)
    bens = Run.objects.create(name="ben's", config={}, seed=2, created_by=ben)
    orphan = Run.objects.create(name="orphan", config={}, seed=3)
    EvalJob = old.get_model("evals", "EvalJob")
    job = EvalJob.objects.create(run=bens, task="arithmetic", problems=3, n=4, created_by=ann)

    executor = MigrationExecutor(connection)
    migrate(executor.loader.graph.leaf_nodes())

    from webapp.evals.models import EvalJob as NewEvalJob
    from webapp.projects.models import Membership, Project
    from webapp.runs.models import Run as NewRun
    from webapp.sweeps.models import Sweep

    assert Project.objects.get(personal_for_id=ann.pk).name == "ann"
    assert Membership.objects.get(user_id=ben.pk, project__name="ben").role == "admin"
    assert Sweep.objects.get(pk=sweep.pk).project.name == "ann"
    assert NewRun.objects.get(pk=in_sweep.pk).project.name == "ann"
    assert NewRun.objects.get(pk=bens.pk).project.name == "ben"
    assert NewRun.objects.get(pk=orphan.pk).project.name == "default"
    assert NewEvalJob.objects.get(pk=job.pk).project.name == "ben"  # its origin's project, not its creator's
    assert not Membership.objects.filter(project__name="default").exists()


def test_the_default_project_is_made_by_a_migration_and_taken_back_from_a_user_who_got_it_first():
    old = migrate([("projects", "0002_everything_in_a_project")])
    User, Project = old.get_model("auth", "User"), old.get_model("projects", "Project")
    Membership = old.get_model("projects", "Membership")
    Project.objects.filter(name="default").delete()
    mallory = User.objects.create(username="mallory")
    grabbed = Project.objects.create(name="default", created_by_id=mallory.pk)  # asked for the name first
    Membership.objects.create(project=grabbed, user_id=mallory.pk, role="admin")

    executor = MigrationExecutor(connection)
    migrate(executor.loader.graph.leaf_nodes())

    from webapp.projects.models import AuditEvent
    from webapp.projects.models import Membership as NewMembership
    from webapp.projects.models import Project as NewProject

    default = NewProject.objects.get(name="default")
    assert default.pk == grabbed.pk and default.created_by_id is None  # the work in it stays
    assert not NewMembership.objects.filter(project=default).exists()
    assert AuditEvent.objects.get(project=default, action="project.member").detail["username"] == "mallory"

    old = migrate([("projects", "0002_everything_in_a_project")])
    Project, Membership = old.get_model("projects", "Project"), old.get_model("projects", "Membership")
    Project.objects.filter(name="default").delete()
    named_default = old.get_model("auth", "User").objects.create(username="default")
    personal = Project.objects.create(name="default", personal_for_id=named_default.pk, created_by_id=named_default.pk)
    Membership.objects.create(project=personal, user_id=named_default.pk, role="admin")

    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    assert NewProject.objects.get(pk=personal.pk).name == f"user-{named_default.pk}"
    assert NewMembership.objects.get(project_id=personal.pk).user_id == named_default.pk  # still theirs
    fresh = NewProject.objects.get(name="default")
    assert fresh.pk != personal.pk and not NewMembership.objects.filter(project=fresh).exists()
