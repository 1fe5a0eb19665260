"""The risk fit on a real maintenance worker (real Redis, real Celery): a check that finds none stored sends the task,
the worker computes and stores it, and the next check decides at its level."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.conftest import wait_for
from tests.sweeps.test_risk_fits import running_after_history
from webapp.sweeps import policy_check
from webapp.sweeps.models import HistoryRiskFit, SweepPlan
from webapp.sweeps.policies import history_risk

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def test_the_maintenance_worker_computes_the_fit_a_check_asked_for(config, celery_worker):
    from django.core.cache import cache

    cache.clear()
    current, plan = running_after_history(config, seed=2)
    # the worker's beat checks sweeps with running runs: this one is never due, so only this test's checks decide
    SweepPlan.objects.filter(sweep=current).update(policy_checked_at=timezone.now() + timedelta(days=1))
    before = policy_check.policy_check(sweep=current, plan=plan)  # (outside a transaction: sent at once)
    early = [d for d in before.decisions if d.action == "stop"]
    assert early and all(d.details["risk_source"] == "the tuning sweeps" for d in early)
    row = wait_for(lambda: HistoryRiskFit.objects.filter(project_id=current.project_id).first(), timeout=120,
                   what="the maintenance worker to store the risk fit")
    assert row.sweeps == history_risk.MIN_SWEEPS and row.seconds > 0
    after = policy_check.policy_check(sweep=current, plan=plan)
    stops = [d for d in after.decisions if d.action == "stop"]
    assert stops and stops[0].details["risk_source"].startswith(f"the {history_risk.MIN_SWEEPS} complete")
