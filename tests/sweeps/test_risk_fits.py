"""The live check's risk level learned from the project's finished sweeps (``sweeps.risk_fits``): never computed by
a check, computed once by the maintenance task, stored, then read by every check (real run services, real
database)."""
from __future__ import annotations

import math
import random

import pytest
from django.db import transaction

from webapp.runs import services as run_services
from webapp.runs.models import RunStatus
from webapp.sweeps import policy_check, risk_fits, services
from webapp.sweeps.forecasts import meaning, sweep_forecast
from webapp.sweeps.models import HistoryRiskFit, SweepPlan
from webapp.sweeps.policies import history_risk

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

METRIC = "reward/mean"
STEPS = 30
POLICY = {"name": "bayes", "metric": METRIC, "risk": 0.2}


def bayes_sweep(config, seeds=5, policy=POLICY):
    return services.sweep_create(config={**config, "total_steps": STEPS}, seeds=range(seeds), concurrency=seeds,
                                 policy=policy)


def started_sweep(config, policy=POLICY):
    """``bayes_sweep`` with every run started in the same transaction: their tasks are sent on commit, once claimed,
    so a real worker of the test skips them (one took a run and failed it before the test finished it, once)."""
    with transaction.atomic():
        sweep = bayes_sweep(config, policy=policy)
        for run in sweep.runs.order_by("pk"):
            run_services.run_start(run_id=run.pk, worker="test:1")
    return sweep


def run_through(sweep, rng, end=RunStatus.SUCCEEDED, steps=STEPS, started=False):
    for k, run in enumerate(sweep.runs.order_by("pk")):
        level = 0.2 + 0.1 * k + rng.uniform(-0.02, 0.02)
        if not started:
            run_services.run_start(run_id=run.pk, worker="test:1")
        run_services.run_metrics_append(run_id=run.pk, points=[(s, METRIC, level + rng.gauss(0, 0.02))
                                                               for s in range(1, steps + 1)])
        if end is not None:
            run_services.run_finish(run_id=run.pk, status=end)


def running_after_history(config, seed: int, finished: int = history_risk.MIN_SWEEPS, policy=POLICY):
    """``finished`` complete finished bayes sweeps of the project, then one of ``policy`` running at step 20: (it,
    its plan)."""
    rng = random.Random(seed)
    for _ in range(finished):
        run_through(started_sweep(config), rng, started=True)
    current = started_sweep(config, policy=policy)
    run_through(current, rng, end=None, steps=20, started=True)
    return current, SweepPlan.objects.get(sweep=current)


@pytest.fixture
def sent(monkeypatch):
    from django.core.cache import cache

    cache.clear()  # (the sent marks of an earlier test, whose ids this database may give again)
    calls = []
    monkeypatch.setattr("workers.dispatch.send_task", lambda name, **kw: calls.append((name, kw["args"])) or "")
    return calls


def test_a_check_sends_the_fit_once_and_decides_with_the_built_in_map_until_it_is_stored(config, sent,
                                                                                          django_capture_on_commit_callbacks):
    current, plan = running_after_history(config, seed=0)
    with django_capture_on_commit_callbacks(execute=True):
        first = policy_check.policy_check(sweep=current, plan=plan)
        policy_check.policy_check(sweep=current, plan=plan)
    assert [name for name, _ in sent].count(risk_fits.TASK) == 1 and (risk_fits.TASK, [current.pk]) in sent
    stops = [d for d in first.decisions if d.action == "stop"]
    assert stops and all(d.details["risk_source"] == "the tuning sweeps" for d in stops)
    assert not HistoryRiskFit.objects.exists()  # a check computes none
    assert "within risk 0.2 on the tuning sweeps." in meaning(sweep_forecast(sweep=current, metric=METRIC, mode="max"))
    assert not HistoryRiskFit.objects.exists()  # nor does the page

    row = risk_fits.sweep_fit_risk(sweep_id=current.pk)
    assert row.sweeps == history_risk.MIN_SWEEPS and row.lost and row.risk == 0.2
    assert risk_fits.sweep_fit_risk(sweep_id=current.pk).pk == row.pk  # idempotent
    after = policy_check.policy_check(sweep=current, plan=plan)
    learned = [d for d in after.decisions if d.action == "stop"]
    assert learned and all(d.details["risk_source"] == f"the {history_risk.MIN_SWEEPS} complete finished sweeps "
                                                       "of this project" for d in learned)
    assert learned[0].details["model_risk"] > stops[0].details["model_risk"]
    assert len(learned) >= len(stops)
    assert (f"within risk 0.2 on the {history_risk.MIN_SWEEPS} complete finished sweeps of this project."
            in meaning(sweep_forecast(sweep=current, metric=METRIC, mode="max")))


def test_a_new_finished_sweep_makes_a_new_fit_and_a_short_history_sends_none(config, sent,
                                                                            django_capture_on_commit_callbacks):
    current, plan = running_after_history(config, seed=1, finished=history_risk.MIN_SWEEPS - 1)
    with django_capture_on_commit_callbacks(execute=True):
        policy_check.policy_check(sweep=current, plan=plan)
    assert not sent  # 19 complete sweeps: no fit can come of them
    key = risk_fits.fit_key(current)
    run_through(bayes_sweep(config), random.Random(3))
    assert risk_fits.fit_key(current) != key  # another finished sweep: another history
    with django_capture_on_commit_callbacks(execute=True):
        policy_check.policy_check(sweep=current, plan=plan)
    assert sent == [(risk_fits.TASK, [current.pk])]


def test_a_sweep_that_is_not_bayes_gets_no_fit(config):
    median = services.sweep_create(config={**config, "total_steps": STEPS}, seeds=range(2), concurrency=2,
                                   policy={"name": "median", "metric": METRIC})
    assert risk_fits.sweep_fit_risk(sweep_id=median.pk) is None and risk_fits.sweep_fit_risk(sweep_id=10 ** 9) is None
    assert not HistoryRiskFit.objects.exists()


def test_an_auto_sweep_decides_with_bayes_until_its_choice_is_stored_then_with_the_chosen_cut(
        config, sent, django_capture_on_commit_callbacks):
    current, plan = running_after_history(config, seed=4, policy={**POLICY, "name": "auto"})
    with django_capture_on_commit_callbacks(execute=True):
        first = policy_check.policy_check(sweep=current, plan=plan)
    assert sent == [(risk_fits.TASK, [current.pk])]
    assert {d.rule for d in first.decisions if d.action == "stop"} == {"bayes"}  # no choice yet: bayes, built-in
    answer = sweep_forecast(sweep=current, metric=METRIC, mode="max")
    assert answer["bayes"] and "by the calibrated forecast of the bayes model auto runs, the one its stops decide on" \
        in meaning(answer)  # its forecasts decide

    row = risk_fits.sweep_fit_risk(sweep_id=current.pk)
    assert len(row.cuts) == len(history_risk.CUT_AT) * len(history_risk.CUT_KEEP) and len(row.lost[0]) == 3
    choice = risk_fits.stored_fit(current)[1].choose(0.2)
    assert choice.rule == "cut"  # the seeds of these sweeps keep their order: a cut saves more than bayes
    after = policy_check.policy_check(sweep=current, plan=plan)
    cut_stops = [d for d in after.decisions if d.action == "stop"]
    assert cut_stops and {d.rule for d in cut_stops} == {"cut"}
    assert all(f"cut at step {math.ceil(choice.at * STEPS)}" in d.reason for d in cut_stops)
    answer = sweep_forecast(sweep=current, metric=METRIC, mode="max")
    assert not answer["bayes"] and "this sweep's policy (auto) does not decide on it" in meaning(answer)
