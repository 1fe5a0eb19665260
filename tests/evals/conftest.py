"""Fixtures for the evaluation tests: runs with checkpoints (model folders on disk) and a job with results
stored through the services (for the pages; the worker test makes real ones). The ``user`` and ``client_in``
fixtures come from tests/conftest.py."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import transaction

from webapp.evals import services
from webapp.evals.models import EvalStatus
from webapp.runs.models import Checkpoint, Run
from webapp.projects.services import default_project


def fake_model_folder(path: Path) -> str:
    """A folder the validation accepts as a model (config.json); only the worker test loads real weights."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"model_type": "test"}))
    return str(path)


@pytest.fixture
def run_with_checkpoints(tmp_path):
    """A finished run whose base model and two checkpoints (steps 2 and 4) are folders on disk."""
    base = fake_model_folder(tmp_path / "base")
    run = Run.objects.create(project=default_project(), name="parent", config={"preset": "dapo", "model_path": base, "task": "arithmetic",
                                                    "total_steps": 4, "seed": 7, "device": "cpu"},
                             seed=7, status=Run.Status.SUCCEEDED, last_step=4)
    for step in (2, 4):
        Checkpoint.objects.create(run=run, step=step,
                                  path=fake_model_folder(tmp_path / "runs" / "ckpt" / f"step_{step:06d}"))
    return run


def model_keys(run: Run) -> list[str]:
    return ["base"] + [f"ckpt:{c.pk}" for c in run.checkpoints.order_by("step")]


# Hand-made results: problem index -> (c of the base, c of the checkpoint), n = 4 for both.
#   base only: 0; checkpoint only: 1, 2; both: 3; neither: 4
HAND_COUNTS = {0: (1, 0), 1: (0, 4), 2: (0, 2), 3: (2, 3), 4: (0, 0)}


def make_job_with_results(run: Run, *, status: str = EvalStatus.SUCCEEDED):
    """A job on the base and the last checkpoint with HAND_COUNTS stored as if a worker had run it."""
    last = run.checkpoints.order_by("-step").first()
    # its task is sent on commit: claimed by then, so a worker a test session left running skips it (it failed the
    # job on its fake checkpoint before this test could finish it, once in a CI run)
    with transaction.atomic():
        job = services.eval_create(run=run, models=["base", f"ckpt:{last.pk}"], task="arithmetic", problems=5, n=4,
                                   ks=[1, 2, 4], name="hand-made")
        if status == EvalStatus.SUCCEEDED:
            services.eval_start(job_id=job.pk, worker="test")
    base_model, ckpt_model = list(job.models.order_by("position"))
    for model, which in ((base_model, 0), (ckpt_model, 1)):
        rows = []
        for index, counts in HAND_COUNTS.items():
            c = counts[which]
            samples = [{"completion": f"{index}{'ok' if j < c else 'no'}{which}", "correct": j < c,
                        "details": {"exact": {"expected": str(index)}}} for j in range(2)]
            rows.append({"index": index, "prompt": f"{index}+0=", "answer": str(index), "n": 4, "c": c,
                         "samples": samples})
        services.eval_results_add(model_id=model.pk, rows=rows, seconds=0.5)
    if status == EvalStatus.SUCCEEDED:
        services.eval_finish(job_id=job.pk, status=EvalStatus.SUCCEEDED)
    job.refresh_from_db()
    return job
