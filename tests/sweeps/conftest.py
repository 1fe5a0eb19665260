import pytest
from django.utils import timezone

from webapp.runs import services as run_services
from webapp.runs.models import Run, RunStatus


# model_dir, user and client_in come from tests/conftest.py


@pytest.fixture
def config(model_dir):
    return {"preset": "grpo", "model_path": model_dir, "total_steps": 20, "prompts_per_step": 4, "group_size": 4}


def make_running(run: Run) -> Run:
    """What a worker's run_start does, without a worker."""
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=timezone.now(),
                                         heartbeat_at=timezone.now(), worker="test:1")
    run.refresh_from_db()
    return run


def log_points(run: Run, key: str, values, start: int = 1) -> None:
    """Store ``values`` as steps start, start+1, ... of ``key`` (as the DB sink would) and bump last_step."""
    points = [(start + i, key, v) for i, v in enumerate(values)]
    for i in range(0, len(points), 5000):
        run_services.run_metrics_append(run_id=run.pk, points=points[i:i + 5000])
    run.refresh_from_db()
