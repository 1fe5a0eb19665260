"""A sweep whose grid crosses engines: engine = seedbed, trl x the same seeds, from the service and the
form, a grid point the base config makes wrong for TRL named as such, and the dashboard's data for drawing both
engines side by side (each run's grid cell, its engine in the runs table, wall times for the time axis)."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.runs.test_views import form_post
from tests.sweeps.conftest import make_running
from training.fields import FieldErrors
from webapp.runs import services as run_services
from webapp.runs.models import MetricPoint, Run
from webapp.sweeps import services
from webapp.sweeps.forms import SweepForm
from webapp.sweeps.models import Sweep

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def engines_and_seeds(sweep: Sweep) -> list[tuple[str, int]]:
    return [(r.config["engine"], r.seed) for r in sweep.runs.order_by("pk")]


def test_a_grid_over_engines_makes_runs_of_both_with_the_same_seeds(config):
    sweep = services.sweep_create(config=config, seeds=[3, 4], concurrency=2, grid={"engine": ["seedbed", "trl"]})
    # seed by seed, every grid point of a seed first: both engines show early
    assert engines_and_seeds(sweep) == [("seedbed", 3), ("trl", 3), ("seedbed", 4), ("trl", 4)]
    for run in sweep.runs.all():  # the rest of each run's config is the sweep's
        assert {k: v for k, v in run.config.items() if k not in ("engine", "seed")} == \
               {k: v for k, v in sweep.config.items() if k not in ("engine", "seed")}


def test_the_sweep_form_takes_an_engine_grid(client_in, model_dir):
    data = {**form_post(model_path=model_dir, seed="7"), "seeds": "2", "concurrency": "2",
            "grid": "engine = seedbed, trl", "policy_name": "manual", "policy_mode": "max",
            "free_slot_use": "nothing", "name": "engines"}
    assert "engine" in SweepForm(user=None).fields  # the run form's engine select, in the sweep form too
    response = client_in.post(reverse("sweeps:new"), data)
    sweep = Sweep.objects.get(name="engines")
    assert response.status_code == 302, response.content.decode()[:3000]
    assert engines_and_seeds(sweep) == [("seedbed", 7), ("trl", 7), ("seedbed", 8), ("trl", 8)]


def test_a_grid_point_the_base_config_makes_wrong_names_the_point_and_the_knob(config):
    # dapo's dynamic sampling is fine for seedbed; TRL has none: the error says which point and which knob
    with pytest.raises(FieldErrors) as exc:
        services.sweep_create(config={**config, "preset": "dapo"}, seeds=[0], concurrency=1,
                              grid={"engine": ["seedbed", "trl"]})
    assert exc.value.errors["grid"].startswith("engine='trl': dynamic_sampling: the trl engine (TRL's GRPOTrainer) "
                                               "has no dynamic sampling")
    with pytest.raises(FieldErrors) as exc:  # a knob of the point itself keeps its own value in the message
        services.sweep_create(config=config, seeds=[0], concurrency=1, grid={"nproc_per_node": [1, 2]})
    assert exc.value.errors["grid"].startswith("nproc_per_node=2: strategy: 2 ranks (nproc_per_node × nnodes) need a "
                                               "strategy")
    assert not Sweep.objects.exists()


def test_the_dashboard_has_each_runs_engine_its_grid_cell_and_wall_times(client_in, config):
    sweep = services.sweep_create(config=config, seeds=[0, 1], concurrency=4, grid={"engine": ["seedbed", "trl"]})
    started = timezone.now() - timedelta(seconds=30)
    for run in sweep.runs.all():
        make_running(run)
        Run.objects.filter(pk=run.pk).update(started_at=started)
        run_services.run_metrics_append(run_id=run.pk, points=[(s, k, v) for s in (1, 2, 3)
                                                               for k, v in (("reward/mean", s / 10), ("step_time_s", 10.0))])
    live = client_in.get(reverse("sweeps:live", args=[sweep.pk]), {"metric": "reward/mean"}).json()
    cells = {r["id"]: (r["knobs"], r["engine"]) for r in live["runs"]}
    by_engine = {e: [r.pk for r in sweep.runs.order_by("pk") if r.config["engine"] == e] for e in ("seedbed", "trl")}
    assert all(cells[pk] == ({"engine": "seedbed"}, "seedbed") for pk in by_engine["seedbed"])
    assert all(cells[pk] == ({"engine": "trl"}, "trl · 1 process") for pk in by_engine["trl"])
    # the time axis: seconds from each run's first step (it began 10 s before its first metrics: not the 30 s since a
    # worker took it) to its bucket's last point, for both engines
    for run_id, series in live["series"]["runs"].items():
        assert series["last"] == [1, 2, 3] and all(9 <= t < 25 for t in series["t"]), (run_id, series["t"])
    assert MetricPoint.objects.filter(run__sweep=sweep, key="reward/mean").count() == 12

    page = client_in.get(reverse("sweeps:detail", args=[sweep.pk])).content.decode()
    assert "<th>Engine</th>" in page and page.count('<td class="engine">trl · 1 process</td>') == 2
    assert page.count('<td class="engine">seedbed</td>') == 2 and "engine = seedbed, trl" in page
    assert '<option value="time">wall time (s)</option>' in page
