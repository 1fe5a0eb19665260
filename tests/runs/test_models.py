import pytest
from django.db import IntegrityError, transaction

from webapp.runs.models import ENDED_STATUSES, LEGAL_TRANSITIONS, MetricPoint, Run, RunStatus
from webapp.projects.services import default_project

pytestmark = pytest.mark.postgres


def test_every_status_has_its_transitions_and_finished_ones_lead_nowhere_but_a_resume():
    assert set(LEGAL_TRANSITIONS) == set(RunStatus.values)
    assert LEGAL_TRANSITIONS[RunStatus.SUCCEEDED] == frozenset()
    assert LEGAL_TRANSITIONS[RunStatus.FAILED] == frozenset({RunStatus.QUEUED})  # resumed from its checkpoint
    assert RunStatus.QUEUED not in ENDED_STATUSES and RunStatus.RUNNING not in ENDED_STATUSES


@pytest.mark.django_db
def test_a_metric_is_stored_once_per_run_key_and_step():
    run = Run.objects.create(project=default_project(), config={"total_steps": 3}, seed=1)
    MetricPoint.objects.create(run=run, step=1, key="reward/mean", value=0.5)
    with pytest.raises(IntegrityError), transaction.atomic():
        MetricPoint.objects.create(run=run, step=1, key="reward/mean", value=0.6)
    MetricPoint.objects.create(run=run, step=2, key="reward/mean", value=0.6)
    assert run.metrics.count() == 2


@pytest.mark.django_db
def test_run_defaults_and_helpers():
    run = Run.objects.create(project=default_project(), config={"total_steps": 12}, seed=7)
    assert run.status == RunStatus.QUEUED and not run.is_ended
    assert run.total_steps == 12
    assert run.display_name == f"run {run.pk}"
