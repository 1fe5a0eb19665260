"""The history the ``bayes`` policy learns from: the project's finished sweeps on its metric (``sweeps.history``),
read by the live check and the dashboard's forecasts alike (real run services, real database)."""
from __future__ import annotations

import pytest

from webapp.projects.services import project_create
from webapp.runs import services as run_services
from webapp.runs.models import RunStatus
from webapp.sweeps import history, policy_check, services
from webapp.sweeps.forecasts import meaning, sweep_forecast
from webapp.sweeps.models import SweepPlan

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

METRIC = "reward/mean"
STEPS = 20


def bayes_sweep(config, project=None, seeds=4):
    return services.sweep_create(config={**config, "total_steps": STEPS}, seeds=range(seeds), concurrency=seeds,
                                 project=project, policy={"name": "bayes", "metric": METRIC, "risk": 0.2})


def run_through(sweep, end=RunStatus.SUCCEEDED, steps=STEPS):
    for k, run in enumerate(sweep.runs.order_by("pk")):
        run_services.run_start(run_id=run.pk, worker="test:1")
        run_services.run_metrics_append(run_id=run.pk, points=[(s, METRIC, 0.2 + 0.1 * k) for s in range(1, steps + 1)])
        if end is not None:
            run_services.run_finish(run_id=run.pk, status=end)


def test_the_history_is_the_projects_finished_sweeps_only(config, user):
    finished = bayes_sweep(config)
    run_through(finished)
    running = bayes_sweep(config)
    run_through(running, end=None)  # its runs still running: not finished
    elsewhere = bayes_sweep(config, project=project_create(user=user, name="elsewhere"))
    run_through(elsewhere)
    current = bayes_sweep(config)
    got = history.project_history(current, METRIC)
    assert history.finished_sweep_ids(current) == (finished.pk,)
    assert len(got) == 1 and sorted(got[0]) == sorted(finished.runs.values_list("pk", flat=True))
    assert all(curve == [(s, pytest.approx(curve[0][1])) for s in range(1, STEPS + 1)] for curve in got[0].values())
    assert history.project_history(current, "no/such_metric") == []


def test_the_live_check_and_the_forecasts_learn_from_it(config):
    current = bayes_sweep(config)
    run_through(current, end=None, steps=12)
    plan = SweepPlan.objects.get(sweep=current)
    assert policy_check.sweep_history(current) == []  # none finished yet: the built-in prior
    past = bayes_sweep(config, seeds=6)
    run_through(past)
    assert len(policy_check.sweep_history(current)) == 1
    check = policy_check.policy_check(sweep=current, plan=plan)
    assert check.decisions and all(d.details["prior"] == "prior from 1 finished sweep of this project"
                                   for d in check.decisions)
    median = services.sweep_create(config={**config, "total_steps": STEPS}, seeds=range(2), concurrency=2,
                                   policy={"name": "median", "metric": METRIC})
    assert policy_check.sweep_history(median) is None  # a rule that learns nothing reads nothing
    answer = sweep_forecast(sweep=current, metric=METRIC, mode="max")
    assert answer["runs"] and answer["prior"] == "prior from 1 finished sweep of this project"
    assert "drawn from the prior from 1 finished sweep of this project" in meaning(answer)
