"""The model library's tasks: a GGUF import (maintenance queue) and a "try it" reply of the models page (a training
slot's queue). Their names stay ``workers.tasks.*`` (what the web app sends)."""
from __future__ import annotations

import logging
import os

from workers.celery_app import app, ensure_django

ensure_django()

from django.db import close_old_connections  # noqa: E402

log = logging.getLogger("seedbed.workers")


@app.task(name="workers.tasks.import_model", ignore_result=True)
def import_model(entry_id: int) -> str:
    """Import a GGUF file into the model library (webapp.library.services.model_import_run)."""
    from webapp.library.services import model_import_run

    close_old_connections()
    return model_import_run(entry_id=entry_id, log=lambda line: log.info("model %s: %s", entry_id, line)).status


@app.task(name="workers.tasks.try_model", acks_late=True, ignore_result=True)
def try_model(trial_id: int) -> str:
    """One "try it" reply of the models page (webapp.library.services.model_try_run); safe to deliver twice:
    only a queued trial is claimed."""
    import torch

    from webapp.library.services import model_try_run

    close_old_connections()
    # One slot, one trial: as many threads as a training run's child or an evaluation job gets.
    torch.set_num_threads(int(os.environ.get("SEEDBED_TORCH_THREADS", "1")))
    trial = model_try_run(trial_id=trial_id)
    if trial is None:
        log.warning("trial %s: no such trial; task dropped", trial_id)
        return "missing"
    log.info("trial %s: %s", trial_id, trial.status)
    return trial.status
