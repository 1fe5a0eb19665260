"""Moving Sweep from the runs app to the sweeps app keeps every row and every link to it (SQLite and
PostgreSQL): a database migrated up to just before the move, holding a sweep with runs, a plan, a policy
decision, an alert and an eval job, is migrated forward and read back through today's models."""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

BEFORE = [("runs", "0001_initial"), ("sweeps", "0002_sweepplan_policy_throttle_and_step"),
          ("evals", "0001_initial")]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def latest():
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes()


def test_the_sweep_move_keeps_sweeps_runs_decisions_alerts_and_evals():
    old = migrate(BEFORE)
    OldSweep, OldRun = old.get_model("runs", "Sweep"), old.get_model("runs", "Run")
    sweep = OldSweep.objects.create(name="kept", config={"preset": "grpo"}, seeds=[1, 2], concurrency=1,
                                    policy={"name": "median", "metric": "reward/mean"})
    runs = [OldRun.objects.create(name=f"seed {s}", sweep=sweep, config={"total_steps": 4}, seed=s) for s in (1, 2)]
    old.get_model("sweeps", "SweepPlan").objects.create(sweep=sweep, grid={"lr": [0.1]}, max_new_seeds=1)
    old.get_model("sweeps", "PolicyDecision").objects.create(
        sweep=sweep, run=runs[1], action="stop", rule="median", step=3, value=0.1, threshold=0.2, reason="below")
    old.get_model("sweeps", "Alert").objects.create(sweep=sweep, run=runs[0], kind="entropy_collapse",
                                                    metric="entropy", step=2, value=0.01, bound=0.05, message="low")
    old.get_model("evals", "EvalJob").objects.create(sweep=sweep, task="arithmetic", problems=3, n=4)

    migrate(latest())

    from webapp.evals.models import EvalJob
    from webapp.runs.models import Run
    from webapp.sweeps.models import Alert, PolicyDecision, Sweep, SweepPlan

    moved = Sweep.objects.get(pk=sweep.pk)
    assert (moved.name, moved.seeds, moved.policy["name"]) == ("kept", [1, 2], "median")
    assert Sweep._meta.db_table == "sweeps_sweep" and "sweeps_sweep" in connection.introspection.table_names()
    assert "runs_sweep" not in connection.introspection.table_names()
    assert sorted(moved.runs.values_list("seed", flat=True)) == [1, 2]
    assert Run.objects.get(pk=runs[1].pk).sweep_id == moved.pk
    assert SweepPlan.objects.get(sweep=moved).grid == {"lr": [0.1]}
    assert PolicyDecision.objects.get(sweep=moved).run_id == runs[1].pk
    assert Alert.objects.get(sweep=moved).kind == "entropy_collapse"
    assert EvalJob.objects.get(sweep=moved).n == 4
    # the foreign keys still hold in the database: deleting the sweep cascades to its runs and decisions
    moved.delete()
    assert not Run.objects.filter(pk__in=[r.pk for r in runs]).exists()
    assert not PolicyDecision.objects.exists() and EvalJob.objects.get().sweep_id is None
