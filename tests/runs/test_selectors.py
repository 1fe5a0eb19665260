import pytest

from webapp.runs import selectors, services
from webapp.runs.models import RunStatus

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


@pytest.fixture
def run_with_metrics(config):
    run = services.run_create(config=config)
    services.run_metrics_append(run_id=run.pk, points=[
        (s, k, v) for s in (1, 2, 3) for k, v in (("reward/mean", s * 0.1), ("entropy", 3.0 - s))])
    for s in (1, 2, 3):
        services.run_samples_append(run_id=run.pk, step=s, rows=[
            {"prompt": f"{s}+1=", "completion": str(s + 1), "answer": str(s + 1), "reward": 1.0,
             "details": {"extracted": str(s + 1)}}])
    return run


def test_samples_since_are_newest_step_first(run_with_metrics):
    rows = selectors.run_samples_since(run_id=run_with_metrics.pk, since_step=1)
    assert [r["step"] for r in rows] == [3, 2]
    assert rows[0]["details"] == {"extracted": "4"} and rows[0]["reward"] == 1.0


def test_live_state_carries_status_points_and_samples(run_with_metrics):
    state = selectors.run_live_state(run_id=run_with_metrics.pk, since_step=2)
    assert state["status"] == RunStatus.QUEUED and state["ended"] is False
    assert state["last_step"] == 3 and state["total_steps"] == 6
    assert state["series"]["reward/mean"]["x"] == [3]
    assert [r["step"] for r in state["samples"]] == [3]


def test_live_state_keeps_separate_cursors_for_metrics_and_samples(run_with_metrics):
    # the page has metrics up to step 3 but samples only up to step 2: step 3's samples still come
    state = selectors.run_live_state(run_id=run_with_metrics.pk, since_step=3, samples_since_step=2)
    assert state["series"] == {}
    assert [r["step"] for r in state["samples"]] == [3]
