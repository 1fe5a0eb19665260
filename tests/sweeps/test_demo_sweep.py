"""The demo sweep ``./seedbed up`` launches shows early stopping at work: its policy acts, and on the recorded
tiny-arithmetic sweeps (4 seeds, two at a time, as the demo runs them) it stops a seed in every one."""
from __future__ import annotations

import os
import sys

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from webapp.sweeps.management.commands.demo_sweep import DEMO_POLICY
from webapp.sweeps.models import Sweep
from webapp.sweeps.policies import replay

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "bench"))
from early_stopping import final_value, real_sweeps  # noqa: E402

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def test_the_demo_sweep_runs_under_an_acting_policy():
    get_user_model().objects.create_superuser("admin", "admin@example.com", "pw")
    call_command("demo_sweep", "--seeds", "4", "--if-no-sweeps")
    sweep = Sweep.objects.get()
    assert sweep.runs.count() == 4
    assert sweep.policy["name"] == "bayes" and sweep.policy["risk"] == 0.2
    assert "early stopping" in sweep.name
    call_command("demo_sweep", "--seeds", "4", "--if-no-sweeps")  # a database with a sweep gets no second demo
    assert Sweep.objects.count() == 1


def test_the_demos_policy_stops_a_seed_on_recorded_tiny_sweeps():
    quartets = []
    for recorded in real_sweeps("reward/mean"):
        if recorded.config.get("task") != "arithmetic":
            continue
        seeds = list(recorded)
        quartets += [{seed: recorded[seed] for seed in seeds[q:q + 4]} for q in range(0, len(seeds) - 3, 4)]
    assert len(quartets) >= 40
    acted = saved = kept = 0
    for quartet in quartets:
        steps = max(len(curve) for curve in quartet.values())
        result = replay({**DEMO_POLICY, "max_steps": steps}, quartet, concurrency=2)
        acted += bool(result.stopped_at)
        saved += 1 - sum(result.steps_run.values()) / sum(len(curve) for curve in quartet.values())
        best = max(quartet, key=lambda seed: final_value(quartet[seed]))
        survivors = [seed for seed in quartet if seed not in result.stopped_at]
        assert survivors  # never every seed
        kept += max(final_value(quartet[s]) for s in survivors) >= final_value(quartet[best]) - 0.05
    print(f"{len(quartets)} quartets: acted {acted}, saved {saved / len(quartets):.2f}, kept {kept}")
    assert acted == len(quartets)
    assert saved / len(quartets) > 0.2
    assert kept / len(quartets) >= 0.8  # a seed within 0.05 of the best final survives in most
