"""A sweep on a real Celery worker (real Redis, real training on the tiny task): the policy, applied after each
metrics flush, stops a seed; its slot goes at once to the queued seed; the concurrency limit holds throughout."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.conftest import tiny_config, wait_for
from webapp.runs.models import Run, RunStatus
from webapp.sweeps import services
from webapp.sweeps.models import PolicyDecision

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]
RUN_TIMEOUT = 240  # generous: 2 shared cores

# started_at and ended_at of two runs are stamped by two processes (the queued seed's worker slot, the stopped
# run's): on a host whose clock is slewed or stepped they may come a few ms out of order. Orders that matter are
# read from stamps one transaction writes (the stopped run's ended_at and the queued seed's enqueued_at), and the
# limit itself is polled while the sweep runs; across processes, a hand-over closer than this is no overlap.
CLOCK_SLACK = timedelta(seconds=1)

# Entropy differs between seeds at every step, so with one peer and no margin the lower one stops at the
# first step both reached after the grace period: a stop within a few seconds, every time.
POLICY = {"name": "median", "metric": "entropy", "mode": "max", "grace_steps": 2, "min_peers": 1, "min_delta": 0.0,
          "smoothing": "none"}


def most_at_once(runs: list[Run], slack: timedelta = CLOCK_SLACK) -> int:
    """The largest number of runs whose [started_at, ended_at) intervals overlap by more than ``slack`` (a start
    and an end stamped by two processes within ``slack`` of each other are a hand-over, whatever their order)."""
    now = timezone.now()
    events = sorted([(r.started_at + slack, 1) for r in runs if r.started_at] +
                    [(r.ended_at or now, -1) for r in runs if r.started_at])
    most = current = 0
    for _, delta in events:  # at equal times the end (-1) sorts first: a hand-over is not an overlap
        current += delta
        most = max(most, current)
    return most


def test_a_policy_stop_hands_the_slot_to_the_queued_seed_and_never_exceeds_the_limit(celery_worker):
    # long enough that the survivor is still training when the stopped run ends: a tiny step takes ~40 ms here and
    # the policy is checked at most once a second (CHECK_EVERY_S), so at 40 steps the step-2 stop came when both
    # runs were near their end, and the survivor's success could hand its slot to the queued seed first
    sweep = services.sweep_create(config=tiny_config(total_steps=1000), seeds=[21, 22, 23], concurrency=2,
                                  policy=POLICY, name="worker sweep")
    first, second, third = sweep.runs.order_by("pk")

    def running_count() -> int:
        count = sweep.runs.filter(status=RunStatus.RUNNING).count()
        assert count <= 2, "the concurrency limit was exceeded"
        return count

    wait_for(lambda: running_count() == 2, timeout=RUN_TIMEOUT, what="two runs running")
    assert Run.objects.get(pk=third.pk).status == RunStatus.QUEUED
    decision = wait_for(lambda: running_count() <= 2 and PolicyDecision.objects.filter(sweep=sweep, action="stop").first(),
                        timeout=RUN_TIMEOUT, what="the policy's first stop")
    assert decision.run_id in (first.pk, second.pk) and decision.outcome == "applied"
    assert decision.rule == "median" and decision.step >= 2 and decision.value < decision.threshold
    assert f"run {third.pk}" in decision.note

    stopped = wait_for(lambda: Run.objects.filter(pk=decision.run_id, status=RunStatus.KILLED).first(),
                       timeout=60, what="the stopped run to end")
    assert stopped.killed_by == "policy:median" and stopped.kill_reason == decision.reason
    assert stopped.error == ""  # it stopped cleanly at the next step, not after the grace period
    started = wait_for(lambda: running_count() <= 2 and Run.objects.filter(pk=third.pk, started_at__isnull=False).first(),
                       timeout=60, what="the queued seed to start")
    # the slot was handed on when the stopped run ended, not before: one transaction stamped both
    assert started.enqueued_at >= stopped.ended_at, "the queued seed was sent before the stopped run ended"
    handover = (started.started_at - stopped.ended_at).total_seconds()
    assert -CLOCK_SLACK.total_seconds() < handover < 15, \
        f"the queued seed started {handover:.3f} s after the stopped run ended"

    # clean up: stop whatever still runs so the shared worker's slots are free for the next test
    live = list(sweep.runs.filter(status__in=[RunStatus.RUNNING, RunStatus.QUEUED], kill_requested_at__isnull=True)
                .values_list("pk", flat=True))
    services.sweep_kill_runs(sweep_id=sweep.pk, run_ids=live, killed_by="user:test")
    wait_for(lambda: not sweep.runs.exclude(status__in=[RunStatus.KILLED, RunStatus.SUCCEEDED]).exists(),
             timeout=120, what="every run of the sweep to end")
    assert most_at_once(list(sweep.runs.all())) <= 2
    assert PolicyDecision.objects.filter(sweep=sweep).values("run_id", "action").distinct().count() == \
        PolicyDecision.objects.filter(sweep=sweep).count()
