"""Migration 0011: a sweep stored with the earlier bayes model's keys (p_stop, criterion, drift) gets a risk and
renders; other sweeps are left as they are."""
from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.urls import reverse

from tests.sweeps.conftest import log_points, make_running
from webapp.sweeps import services
from webapp.sweeps.models import Sweep
from webapp.sweeps.policies import make_policy

migration = importlib.import_module("webapp.sweeps.migrations.0011_bayes_risk")


@pytest.mark.parametrize("old, new", [
    ({"name": "bayes", "metric": "m", "p_stop": 0.02, "criterion": "needed", "drift": 0.05},
     {"name": "bayes", "metric": "m", "risk": 0.02}),
    ({"name": "bayes", "p_stop": 0.9}, {"name": "bayes", "risk": 0.5}),  # clamped into (0, 0.5]
    ({"name": "bayes", "p_stop": 0.0}, {"name": "bayes", "risk": 1e-6}),
    ({"name": "bayes", "p_stop": "x", "criterion": "near_best"}, {"name": "bayes"}),  # the default risk
    ({"name": "bayes", "p_stop": 0.3, "risk": 0.1}, {"name": "bayes", "risk": 0.1}),
])
def test_old_bayes_configs_are_converted(old, new):
    assert migration.converted(old) == new
    make_policy({**new, "metric": "m", "max_steps": 10})  # valid today


def test_other_configs_are_left_alone():
    for policy in ({"name": "median", "metric": "m"}, {"name": "bayes", "risk": 0.1}, {}):
        assert migration.converted(policy) is policy


@pytest.mark.django_db
@pytest.mark.postgres  # the migration's JSON lookup (policy__name) is engine-specific SQL
def test_a_stored_old_bayes_sweep_is_converted_and_its_page_renders(client_in, config,
                                                                    django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        sweep = services.sweep_create(config=config, seeds=[0, 1, 2], concurrency=3, name="old bayes",
                                      policy={"name": "bayes", "metric": "reward/mean"})
        median = services.sweep_create(config=config, seeds=[0, 1], concurrency=2, name="median",
                                       policy={"name": "median", "metric": "reward/mean"})
    old = {**sweep.policy, "p_stop": 0.1, "criterion": "needed", "drift": 0.05}
    Sweep.objects.filter(pk=sweep.pk).update(policy=old)  # as the earlier version stored it
    for run in sweep.runs.all():
        log_points(make_running(run), "reward/mean", [0.5] * 6)
    migration.forwards(apps, None)
    sweep.refresh_from_db()
    assert sweep.policy == {**{k: v for k, v in old.items() if k not in ("p_stop", "criterion", "drift")},
                            "risk": 0.1}
    assert Sweep.objects.get(pk=median.pk).policy == median.policy
    page = client_in.get(reverse("sweeps:detail", args=[sweep.pk]))
    assert page.status_code == 200 and "risk 0.1" in page.content.decode()
