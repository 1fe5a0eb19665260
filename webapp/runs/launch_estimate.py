"""What a config will ask before it is launched, for the run and sweep forms (docs/architecture.md, "A run's
life"): its peak memory a node against the largest worker of its queue, and its time to the last step.

- Memory: ``training.memory``'s estimate of one training process, times ``nproc_per_node`` ranks a node, against
  the largest ``memory_mb`` the queue's workers report (``capacity.queue_capacity``; this host's with no report).
- Time: ``total_steps`` × the rollout tokens of a step (``prompts_per_step`` × ``group_size`` completions of at
  most ``max_new_tokens``) ÷ a measured throughput: the median ``tokens_per_s`` (the loop's own metric: tokens
  generated over the whole step's time, training included) of the last ``PACE_STEPS`` steps of the newest run
  of the same model on the same queue that the viewer may read. With no such run there is no time estimate
  (nothing is assumed). Completions may stop early: the time is an upper bound at that pace.

A config past either bound (``beyond``: more memory than the largest worker has, or over ``MAX_SECONDS``) is
launched only once the form's "launch anyway" box is ticked (``forms.RunForm.clean``). Reads only.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from training.config import TrainConfig

#: a run that would take longer than this (a week) is launched only when confirmed
MAX_SECONDS = 7 * 24 * 3600
#: the recent throughput points of a run its pace is the median of
PACE_STEPS = 25
#: the newest runs of the model looked at for a throughput
PACE_RUNS = 10


@dataclass(frozen=True)
class Pace:
    """A measured throughput: ``tokens_per_s``, the median over ``steps`` steps of run ``run_id``."""

    tokens_per_s: float
    run_id: int
    steps: int


@dataclass(frozen=True)
class LaunchEstimate:
    """One config's estimates: the memory of one process (``memory``, its text ""/None when the model's shape is
    unknown) and of a node, the largest worker's memory (``worker_mb``, ``worker_has`` its words), and the time
    (``seconds`` None without a measured ``pace``)."""

    memory: str
    node_bytes: int | None
    worker_mb: int
    worker_has: str
    seconds: float | None
    pace: Pace | None
    tokens: int
    steps: int

    def time_text(self) -> str:
        """The time estimate and its basis, for the form."""
        if self.pace is None:
            return ("no time estimate: no run of this model on this queue that you may read has reported its "
                    "throughput (tokens_per_s) yet")
        bound = duration_text(self.seconds) if self.seconds < 60 else f"at most {duration_text(self.seconds)}"
        return f"{bound} ({self.time_basis()})"

    def time_basis(self) -> str:
        """What the time estimate is: steps × rollout tokens at the measured pace (with a pace only)."""
        return (f"{self.steps:,} steps × {self.tokens:,} rollout tokens at {self.pace.tokens_per_s:,.0f} tokens/s, "
                f"the median throughput of run {self.pace.run_id}'s last {self.pace.steps} steps on this model")

    def beyond(self) -> str:
        """Why this config is far beyond what the workers do ("" when it is not): what the form's "launch
        anyway" box confirms."""
        worker_bytes = self.worker_mb * 2**20
        if self.node_bytes is not None and worker_bytes and self.node_bytes > worker_bytes:
            return (f"this run needs ~{gb(self.node_bytes)} GB a node, more than any worker has "
                    f"({gb(worker_bytes)} GB: {self.worker_has})")
        if self.seconds is not None and self.seconds > MAX_SECONDS:
            return f"this run may take up to {duration_text(self.seconds)}, more than a week ({self.time_basis()})"
        return ""


def gb(n_bytes: float) -> str:
    """Decimal gigabytes, as training.memory writes them.

    >>> gb(3.14e9), gb(2.5e12)
    ('3.1', '2,500')
    """
    value = n_bytes / 1e9
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def duration_text(seconds: float) -> str:
    """A duration a person reads at a glance.

    >>> duration_text(40), duration_text(540), duration_text(3 * 3600), duration_text(9 * 86400)
    ('under a minute', 'about 9 min', 'about 3.0 h', 'about 9.0 days')
    >>> duration_text(3e9)
    'about 95 years'
    """
    if seconds < 60:
        return "under a minute"
    if seconds < 3600:
        return f"about {math.ceil(seconds / 60)} min"
    if seconds < 2 * 86400:
        return f"about {seconds / 3600:.1f} h"
    if seconds < 365 * 86400:
        return f"about {seconds / 86400:.1f} days"
    return f"about {seconds / (365.25 * 86400):,.0f} years"


def rollout_tokens(cfg: TrainConfig) -> int:
    """The most tokens one step generates: every completion of the batch at ``max_new_tokens``.

    >>> rollout_tokens(TrainConfig(prompts_per_step=4, group_size=8, max_new_tokens=64))
    2048
    """
    return cfg.prompts_per_step * cfg.group_size * cfg.max_new_tokens


def measured_pace(cfg: TrainConfig, *, queue: str, viewer) -> Pace | None:
    """The newest measured throughput of a run of ``cfg``'s model on ``queue`` that ``viewer`` may read (its
    progress belongs to its project); None when none has one."""
    from webapp.projects.selectors import visible

    from .models import MetricPoint, Run

    runs = visible(Run.objects.filter(queue=queue, config__model_path=cfg.model_path, last_step__gt=0), viewer)
    for run_id in runs.order_by("-pk").values_list("pk", flat=True)[:PACE_RUNS]:
        values = list(MetricPoint.objects.filter(run_id=run_id, key="tokens_per_s", value__gt=0)
                      .order_by("-step").values_list("value", flat=True)[:PACE_STEPS])
        if values:
            return Pace(statistics.median(values), run_id, len(values))
    return None


def estimate(cfg: TrainConfig, *, viewer) -> LaunchEstimate:
    """``cfg``'s estimates against the workers of its queue."""
    from training.memory import estimate_for_config

    from .capacity import queue_capacity
    from .services import queue_for

    queue = queue_for(cfg)
    cap = queue_capacity(queue)
    memory = estimate_for_config(cfg, cfg.resolved_model_path(), ranks=cfg.nproc_per_node * cfg.nnodes)
    pace = measured_pace(cfg, queue=queue, viewer=viewer)
    tokens = rollout_tokens(cfg)
    seconds = cfg.total_steps * tokens / pace.tokens_per_s if pace else None
    return LaunchEstimate(memory=memory.text() if memory else "",
                          node_bytes=cfg.nproc_per_node * memory.total if memory else None,
                          worker_mb=cap.memory_mb, worker_has=cap.has(f"{cap.memory_mb:,} MB of memory"),
                          seconds=seconds, pace=pace, tokens=tokens, steps=cfg.total_steps)
