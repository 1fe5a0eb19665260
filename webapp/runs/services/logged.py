"""Metrics and samples a person's process appends to a run through the API (a training or logging process holding
a token scoped to the run): checked as the training loop's own sink never needs, each field bounded, then stored
by the sink's services (``run_metrics_append``, ``run_samples_append``)."""
from __future__ import annotations

import json
import math

from django.http import Http404

from training.fields import FieldErrors, control_character_error
from webapp.projects.models import Role
from webapp.projects.services import require_role
from webapp.runs.models import ENDED_STATUSES, Run

from .metrics import run_metrics_append
from .samples import run_samples_append
from .transitions import TransitionError

MAX_POINTS = 1000  # a request's points: two flushes of the sink's 500-row inserts
MAX_KEY = 100  # MetricPoint.key's column
MAX_STEP = 2**31 - 1  # the step columns are 32-bit integers
MAX_SAMPLES = 64  # a step's samples per request
MAX_SAMPLE_CHARS = 100_000  # a prompt, completion or answer
MAX_DETAILS_BYTES = 64 * 1024  # a sample's details, as JSON


def _open_run(user, run_id: int) -> Run:
    """The run, for a member of its project (404 outside it, 403 below member); TransitionError once it ended."""
    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        raise Http404("not found in your projects")
    require_role(user, run.project_id, Role.MEMBER)
    if run.status in ENDED_STATUSES:
        raise TransitionError(f"run {run.pk} has ended ({run.status}): nothing more is appended to it")
    return run


def _step(value, field: str) -> int:
    if type(value) is not int or not 0 <= value <= MAX_STEP:
        raise FieldErrors({field: f"a whole number from 0 to {MAX_STEP}; got {str(value)[:40]!r}"})
    return value


def run_metrics_log(*, user, run_id: int, points: list) -> int:
    """Append ``points`` ([{"step", "key", "value"}...], at most MAX_POINTS) to a run that has not ended; a
    non-finite value is a gap, as the sink stores it. Returns how many were stored."""
    if not isinstance(points, list) or not 1 <= len(points) <= MAX_POINTS:
        raise FieldErrors({"points": f"a list of 1 to {MAX_POINTS} points"})
    rows = []
    for i, point in enumerate(points):
        if not isinstance(point, dict):
            raise FieldErrors({f"points.{i}": "an object {step, key, value}"})
        key, value = point.get("key"), point.get("value")
        problem = (control_character_error(key) if isinstance(key, str) and 0 < len(key) <= MAX_KEY
                   else f"1 to {MAX_KEY} characters")
        if problem:
            raise FieldErrors({f"points.{i}.key": problem})
        if type(value) not in (int, float) or (type(value) is int and abs(value) > 2**63):
            raise FieldErrors({f"points.{i}.value": f"a number; got {str(value)[:40]!r}"})
        rows.append((_step(point.get("step"), f"points.{i}.step"), key, float(value)))
    run = _open_run(user, run_id)
    return run_metrics_append(run_id=run.pk, points=rows)


def _sample(i: int, row) -> dict:
    if not isinstance(row, dict):
        raise FieldErrors({f"samples.{i}": "an object {prompt, completion, answer, reward, details}"})
    for name in ("prompt", "completion", "answer"):
        text = row.get(name, "")
        if not isinstance(text, str) or len(text) > MAX_SAMPLE_CHARS:
            raise FieldErrors({f"samples.{i}.{name}": f"text of at most {MAX_SAMPLE_CHARS:,} characters"})
    reward = row.get("reward")
    if reward is not None and (type(reward) not in (int, float) or not math.isfinite(float(reward))):
        raise FieldErrors({f"samples.{i}.reward": f"a finite number or null; got {str(reward)[:40]!r}"})
    details = row.get("details") or {}
    if not isinstance(details, dict) or len(json.dumps(details)) > MAX_DETAILS_BYTES:
        raise FieldErrors({f"samples.{i}.details": f"an object of at most {MAX_DETAILS_BYTES:,} bytes as JSON"})
    return {"prompt": row.get("prompt", ""), "completion": row.get("completion", ""),
            "answer": row.get("answer", ""), "reward": reward, "details": details}


def run_samples_log(*, user, run_id: int, step, samples: list) -> int:
    """Store ``samples`` (at most MAX_SAMPLES, each text and its details bounded) as a step's samples of a run
    that has not ended, replacing that step's earlier ones as the sink does. Returns how many were stored."""
    step = _step(step, "step")
    if not isinstance(samples, list) or not 1 <= len(samples) <= MAX_SAMPLES:
        raise FieldErrors({"samples": f"a list of 1 to {MAX_SAMPLES} samples"})
    rows = [_sample(i, row) for i, row in enumerate(samples)]
    run = _open_run(user, run_id)
    return run_samples_append(run_id=run.pk, step=step, rows=rows)
