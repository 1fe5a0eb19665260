"""The sweep form, the dashboard and its JSON endpoints through Django's test client."""
from __future__ import annotations

import json
import re
from html import unescape

import pytest
from django.urls import reverse

from tests.sweeps.conftest import log_points, make_running
from webapp.runs.models import Run, RunStatus, Sample, WorkerCapacity
from webapp.sweeps import services
from webapp.sweeps.forms import parse_grid, parse_seeds
from webapp.sweeps.models import Sweep, SweepPlan

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def form_data(model_dir, **overrides):
    data = {"preset": "grpo", "rendered_preset": "grpo", "model_path": model_dir, "task": "arithmetic", "seed": "10",
            "total_steps": "20", "prompts_per_step": "4", "group_size": "4", "max_new_tokens": "6", "lr": "1e-05",
            "eps_low": "0.2", "eps_high": "0.2", "kl_coef": "0.0", "name": "form sweep", "seeds": "3",
            "concurrency": "2", "grid": "", "policy_name": "median", "policy_metric": "reward/mean",
            "policy_mode": "max", "policy_params": '{"grace_steps": 3, "min_peers": 1}', "free_slot_use": "nothing",
            "extend_steps": "0", "budget": "", "alert_bounds": ""}
    data.update(overrides)
    return data


def test_the_form_launches_a_bayes_sweep_with_a_risk(client_in, model_dir, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        response = client_in.post(reverse("sweeps:new"), form_data(model_dir, policy_name="bayes",
                                                                   policy_params='{"risk": 0.05}'))
    assert response.status_code == 302, response.content.decode()[-2000:]
    assert Sweep.objects.get().policy["risk"] == 0.05


def test_the_form_launches_a_grid_of_seeds_with_its_policy(client_in, model_dir, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client_in.post(reverse("sweeps:new"), form_data(model_dir, seeds="7, 9", grid="lr = 1e-4, 2e-4",
                                                                   free_slot_use="new_seed", budget="6"))
    sweep = Sweep.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("sweeps:detail", args=[sweep.pk])
    assert sorted(sweep.runs.values_list("seed", "config__lr")) == [(7, 1e-4), (7, 2e-4), (9, 1e-4), (9, 2e-4)]
    assert sweep.policy == {"name": "median", "metric": "reward/mean", "mode": "max", "grace_steps": 3,
                            "min_peers": 1, "max_steps": 20}
    assert len(callbacks) == 3 and sweep.concurrency == 2  # two runs sent, and the first check (its feasibility note)
    plan = SweepPlan.objects.get(sweep=sweep)
    assert (plan.free_slot_use, plan.budget, plan.grid) == ("new_seed", 6, {"lr": [1e-4, 2e-4]})
    # the sweep page shows the budget: nothing run yet, the 4 runs of 20 steps committed
    page = client_in.get(reverse("sweeps:detail", args=[sweep.pk])).content.decode()
    assert "budget 6 runs: 0.0 spent, 4.0 committed, 2.0 left" in page


@pytest.mark.parametrize("overrides, field, message", [
    ({"policy_params": '{"min_peers": 0}'}, "policy_params", "min_peers: must be at least 1"),
    ({"policy_params": '{"grace": 2}'}, "policy_params", "grace: unknown key"),
    ({"policy_params": "{not json"}, "policy_params", "not valid JSON"),
    ({"policy_name": "threshold", "policy_params": ""}, "policy_params", "lower_bound: set at least one"),
    ({"policy_params": '{"risk": 0.05}'}, "policy_params", "risk: only bayes has a probability model"),
    ({"policy_name": "asha", "policy_params": '{"risk": 0.05}'}, "policy_params", "risk: only bayes has a"),
    ({"policy_name": "threshold", "policy_params": '{"risk": 0.1, "patience": 3}'}, "policy_params",
     "risk: only bayes has a probability model"),
    ({"policy_name": "bayes", "policy_params": '{"risk": 0.6}'}, "policy_params", "risk: must lie in (0, 0.5]"),
    ({"policy_name": "bayes", "policy_params": '{"p_stop": 0.05}'}, "policy_params", "p_stop: unknown key"),
    ({"policy_name": "nope"}, "policy_name", "nope"),
    ({"grid": "lr 1e-4"}, "grid", "write 'knob = value, value'"),
    ({"grid": "nope = 1, 2"}, "grid", "nope: not a config knob"),
    ({"seeds": "1, 1"}, "seeds", "distinct"),
    ({"seeds": "a, b"}, "seeds", "whole numbers"),
    ({"total_steps": "-3"}, "total_steps", ""),
    ({"concurrency": "0"}, "concurrency", ""),
    ({"free_slot_use": "extend", "extend_steps": "0"}, "extend_steps", "at least 1"),
    ({"free_slot_use": "new_seed", "budget": ""}, "budget", "give the budget in full runs"),
    ({"free_slot_use": "new_seed", "budget": "2"}, "budget", "at least the 3 runs the sweep starts with"),
    ({"free_slot_use": "new_seed", "budget": "0"}, "budget", "greater than or equal to 1"),
    ({"free_slot_use": "nothing", "budget": "8"}, "budget", "only used when freed slots start new seeds or extend survivors"),
    ({"alert_bounds": '{"entropy_min": "low"}'}, "alert_bounds", "finite number"),
    ({"seeds": "1"}, "seeds", "median compares seeds: give at least 2"),  # (a sweep of one run: nothing to compare)
    ({"seeds": "1", "policy_name": "bayes", "policy_params": "{}"}, "seeds", "bayes compares seeds: give at least 2"),
])
def test_bad_input_is_shown_on_the_field_that_caused_it(client_in, model_dir, overrides, field, message):
    response = client_in.post(reverse("sweeps:new"), form_data(model_dir, **overrides))
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert field in errors and message in " ".join(errors[field]), errors
    assert f'data-field="{field}"' in response.content.decode()
    assert not Sweep.objects.exists()


def test_seed_and_grid_parsing():
    assert parse_seeds("4", 10) == [10, 11, 12, 13]
    assert parse_seeds("7,", 0) == [7] and parse_seeds("3; 1", 0) == [3, 1]
    with pytest.raises(ValueError, match="count of seeds"):
        parse_seeds("0", 0)
    for typo in ("1, , 3", ",2", "1,,"):  # an empty item is a typo, not a seed fewer (it was dropped silently)
        with pytest.raises(ValueError, match="an empty item"):
            parse_seeds(typo, 0)
    assert parse_grid("lr = 1e-4, 2e-4\nloss_agg = token-mean, \"seq-mean-token-mean\"") == {
        "lr": [1e-4, 2e-4], "loss_agg": ["token-mean", "seq-mean-token-mean"]}
    with pytest.raises(ValueError, match="appears twice"):
        parse_grid("lr = 1\nlr = 2")


@pytest.fixture
def sweep(config, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        sweep = services.sweep_create(config=config, seeds=[0, 1, 2, 3], concurrency=4, name="dash",
                                      policy={"name": "median", "metric": "reward/mean", "grace_steps": 2,
                                              "min_peers": 2, "smoothing": "none"})
    runs = [make_running(r) for r in sweep.runs.order_by("pk")]
    for run, value in zip(runs, (0.5, 0.5, 0.5, 0.1)):
        log_points(run, "reward/mean", [value] * 5)
    services.sweep_apply_policy(sweep_id=sweep.pk)
    return sweep


def test_the_dashboard_page_and_its_live_json(client_in, sweep):
    for url in (reverse("sweeps:detail", args=[sweep.pk]),):
        page = client_in.get(url)
        assert page.status_code == 200
        html = page.content.decode()
        assert 'id="sweep-chart"' in html and "sweeps/sweep_dashboard." in html and "plotly-basic.min." in html
        assert '<option value="reward/mean">' in html and f"?sweep={sweep.pk}" in html
    live = client_in.get(reverse("sweeps:live", args=[sweep.pk]), {"metric": "reward/mean"}).json()
    assert live["series"]["width"] == 1 and live["mode"] == "max" and not live["ended"]
    assert len(live["series"]["runs"]) == 4 and len(live["runs"]) == 4
    poor = sweep.runs.order_by("pk").last()
    row = next(r for r in live["runs"] if r["id"] == poor.pk)
    assert row["killed_by"] == "policy:median" and row["kill_requested"]
    # live: only what follows each run's given step
    since = ",".join(f"{r.pk}:4" for r in sweep.runs.all())
    again = client_in.get(reverse("sweeps:live", args=[sweep.pk]), {"metric": "reward/mean", "since": since,
                                                                    "width": "1"}).json()
    assert all(s["last"] == [5] for s in again["series"]["runs"].values())


@pytest.mark.parametrize("params", [{"since": "x"}, {"since": "3:-1"}, {"width": "0"}, {"width": "a"}])
def test_live_json_refuses_bad_parameters(client_in, sweep, params):
    response = client_in.get(reverse("sweeps:live", args=[sweep.pk]), params)
    assert response.status_code == 400 and list(params)[0] in response.json()["error"]


def test_kill_selected_runs(client_in, sweep):
    a, b, c, d = sweep.runs.order_by("pk")
    response = client_in.post(reverse("sweeps:kill", args=[sweep.pk]), {"run": [a.pk, b.pk, d.pk], "reason": "flat"})
    assert response.status_code == 302
    a.refresh_from_db()
    assert a.killed_by == "user:ada" and a.kill_reason == "flat"
    assert Run.objects.get(pk=c.pk).kill_requested_at is None
    assert Run.objects.get(pk=d.pk).killed_by == "policy:median"  # already being killed: refused, unchanged
    page = client_in.get(response["Location"]).content.decode()
    assert "already being killed" in page
    assert client_in.post(reverse("sweeps:kill", args=[sweep.pk]), {}).status_code == 302
    assert Run.objects.filter(sweep=sweep, status=RunStatus.RUNNING, kill_requested_at__isnull=True).count() == 1


@pytest.mark.parametrize("seeds, grid, expected_parses", [("4", "", 1), ("3", "lr = 1e-4, 2e-4", 3)])
def test_a_sweep_request_parses_its_config_once_and_each_grid_point_once(
        client_in, model_dir, parses, django_capture_on_commit_callbacks, seeds, grid, expected_parses):
    """Before: 2 + P + P*N parses for P grid points x N seeds (form, service, grid check, every run)."""
    with django_capture_on_commit_callbacks(execute=False):
        response = client_in.post(reverse("sweeps:new"), form_data(model_dir, seeds=seeds, grid=grid))
    assert response.status_code == 302
    assert len(parses) == expected_parses
    runs = Sweep.objects.get().runs.all()
    assert len(runs) == (4 if not grid else 6)
    assert len({r.seed for r in runs}) == (4 if not grid else 3)  # each run got its own seed all the same


def test_the_live_tables_are_a_fragment_that_htmx_polls_until_the_sweep_ends(client_in, sweep):
    """Runs with their last and best values and next decision point, decisions, alerts and the state badge,
    rendered on the server; the decisions and alerts come out of band."""
    poor = sweep.runs.order_by("pk").last()
    panel = client_in.get(reverse("sweeps:panel", args=[sweep.pk]), {"metric": "reward/mean"})
    assert panel.status_code == 200
    html = panel.content.decode()
    assert 'hx-trigger="every 1s"' in html and 'hx-include="#metric"' in html
    rows = dict(re.findall(r'<tr data-run="(\d+)" data-status="(\w+)"', html))
    assert len(rows) == 4 and rows[str(poor.pk)] == "running"
    poor_row = html[html.index(f'<tr data-run="{poor.pk}"'):].split("</tr>")[0]
    assert '<td class="last">0.1</td>' in poor_row and '<td class="final"><span class="hint"' in poor_row  # no final
    assert "(stopping)" in poor_row and "policy:median: median rule" in poor_row and "disabled" in poor_row
    decision = html[html.index(f'<tr data-run="{poor.pk}" data-action="stop">'):].split("</tr>")[0]
    assert "<td>2</td>" in decision and "<td>median</td>" in decision and "below the median" in decision
    assert 'id="decisions-live" hx-swap-oob="true"' in html and "median on reward/mean" in html
    assert 'id="sweep-state"' in html and "4 running, 0 queued" in html
    # the final is the mean of the last 10 % of steps (at step 7: the last one), not the noisiest maximum (0.9)
    log_points(Run.objects.get(pk=poor.pk), "reward/mean", [0.9, 0.2], start=6)
    html = client_in.get(reverse("sweeps:panel", args=[sweep.pk]), {"metric": "reward/mean"}).content.decode()
    poor_row = html[html.index(f'<tr data-run="{poor.pk}"'):].split("</tr>")[0]
    assert '<td class="last">0.2</td>' in poor_row and "–</span></td>" in poor_row
    # once every run has ended: 286, and the fragment no longer polls; the final shows once the run has ended
    Run.objects.filter(sweep=sweep).update(status=RunStatus.SUCCEEDED)
    done = client_in.get(reverse("sweeps:panel", args=[sweep.pk]))
    poor_row = done.content.decode()[done.content.decode().index(f'<tr data-run="{poor.pk}"'):].split("</tr>")[0]
    assert '<td class="final">0.2</td>' in poor_row
    assert done.status_code == 286 and "hx-trigger" not in done.content.decode().split('id="runs-live"')[1][:80]
    assert ">ended<" in done.content.decode()


def test_samples_side_by_side_as_a_fragment(client_in, sweep):
    a, b = list(sweep.runs.order_by("pk"))[:2]
    for run in (a, b):
        Sample.objects.create(run=run, step=3, index=0, prompt="1+1=", completion=f"seed {run.seed}", answer="2",
                              reward=1.0)
    html = client_in.get(reverse("sweeps:samples", args=[sweep.pk]), {"step": 3}).content.decode()
    assert html.count('class="column"') == 2 and "seed 0" in html and "seed 1" in html
    assert "No samples stored at step 4" in client_in.get(reverse("sweeps:samples", args=[sweep.pk]),
                                                          {"step": 4}).content.decode()
    assert client_in.get(reverse("sweeps:samples", args=[sweep.pk])).status_code == 400
    client_in.raise_request_exception = False
    for step in ("12345678901234567890123", "-1"):  # b1d04b3: 23 digits overflowed SQLite's integer, a 500
        answer = client_in.get(reverse("sweeps:samples", args=[sweep.pk]), {"step": step})
        assert answer.status_code == 400 and "step: give the step" in answer.content.decode()


def bayes_sweep_one_poor(config, django_capture_on_commit_callbacks, *, poor: float):
    """A bayes sweep of 4 running seeds that logged 16 of their 20 steps: three at 0.8, the last at ``poor``."""
    with django_capture_on_commit_callbacks(execute=False):
        sweep = services.sweep_create(config=config, seeds=[0, 1, 2, 3], concurrency=4, name="forecast",
                                      policy={"name": "bayes", "metric": "reward/mean", "grace_steps": 3,
                                              "min_peers": 2})
    runs = [make_running(r) for r in sweep.runs.order_by("pk")]
    for run, level in zip(runs, (0.8, 0.8, 0.8, poor)):
        log_points(run, "reward/mean", [level + 0.001 * (i % 3) for i in range(16)])
    return sweep, runs


def test_a_bayes_decision_shows_its_probability_and_forecast_on_the_dashboard(client_in, config,
                                                                               django_capture_on_commit_callbacks):
    sweep, runs = bayes_sweep_one_poor(config, django_capture_on_commit_callbacks, poor=0.1)  # 80 % of the run
    services.sweep_apply_policy(sweep_id=sweep.pk)
    decision = sweep.decisions.get(run=runs[3])
    assert decision.details["loss"] <= decision.details["model_risk"] < decision.details["risk"] == 0.05
    html = client_in.get(reverse("sweeps:detail", args=[sweep.pk])).content.decode()
    row = html[html.index(f'<tr data-run="{runs[3].pk}" data-action="stop">'):]
    row = row[:row.index("</tr>")]
    assert (f'<td class="probability">{decision.details["probability"]:.3f} (model loss '
            f'{decision.details["loss"]:.3f} ≤ {decision.details["model_risk"]:.3f}, its level for risk 0.05)') in row
    shown = re.search(r'<td class="forecast">([0-9.]+) \[([0-9.-]+), ([0-9.]+)\]', row)  # the worth, its 95 % interval
    assert shown and float(shown[2]) <= float(shown[1]) < 0.2 <= float(shown[3])


def test_a_policy_that_can_never_stop_a_run_is_said_with_the_settings_that_would(client_in, config,
                                                                                  django_capture_on_commit_callbacks):
    # no worker reports capacity here (a worker of another test in this process may have: CI saw "only 1 of its 2
    # slots is free", its 2 slots held by this test's other sweeps), so each sweep's own concurrency is what counts
    WorkerCapacity.objects.all().delete()
    with django_capture_on_commit_callbacks(execute=False):
        small = services.sweep_create(config=config, seeds=[0, 1], concurrency=2, name="two seeds",
                                      policy={"name": "median", "metric": "reward/mean"})
        enough = services.sweep_create(config=config, seeds=[0, 1, 2, 3, 4, 5], concurrency=3, name="six seeds",
                                       policy={"name": "median", "metric": "reward/mean"})
        manual = services.sweep_create(config=config, seeds=[0, 1], concurrency=1, name="by hand",
                                       policy={"name": "manual"})
    assert small.plan.warnings == []  # not replayed in the request: by the check sent once the launch committed
    for sweep in (small, enough, manual):
        services.sweep_check(sweep_id=sweep.pk)  # what that task runs
        sweep.plan.refresh_from_db()
    (warning,) = small.plan.warnings
    assert warning.startswith("the median policy can never stop a run of this sweep (2 runs, 2 at a time)")
    assert "it would act with min_peers 1 or 4 runs" in warning
    assert enough.plan.warnings == [] and manual.plan.warnings == []
    page = client_in.get(reverse("sweeps:detail", args=[small.pk])).content.decode()
    assert 'id="policy-warning"' in page and "can never stop a run" in page
    assert 'id="policy-warning"' not in client_in.get(reverse("sweeps:detail", args=[enough.pk])).content.decode()


def test_a_sweeps_metrics_export_has_every_run(client_in, sweep):
    import json

    lines = b"".join(client_in.get(reverse("sweeps:export", args=[sweep.pk, "jsonl"])).streaming_content).splitlines()
    rows = [json.loads(x) for x in lines]
    runs = list(sweep.runs.order_by("pk"))
    assert [(r["run"], r["step"]) for r in rows] == [(run.pk, s) for run in runs for s in range(1, 6)]
    assert {r["seed"] for r in rows} == {0, 1, 2, 3} and rows[-1]["metrics"]["reward/mean"] == 0.1
    text = b"".join(client_in.get(reverse("sweeps:export", args=[sweep.pk, "csv"])).streaming_content).decode()
    assert text.splitlines()[0] == "run,seed,step,reward/mean" and len(text.splitlines()) == 21


def test_the_summary_ranks_runs_by_their_final_marks_the_leader_and_counts_the_savings(client_in, config,
                                                                                        django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        sweep = services.sweep_create(config=config, seeds=[0, 1, 2], concurrency=3, name="summary",
                                      grid={"lr": [1e-4, 2e-4]}, policy={"name": "manual"})
    runs = [make_running(r) for r in sweep.runs.order_by("pk")]
    # a noisy run whose best step (0.95) is not its final; the leader is the run with the best last 10 %
    curves = [[0.2] * 9 + [0.95] + [0.3] * 10, [0.5] * 20, [0.6] * 20, [0.7] * 20, [0.4] * 20, [0.45] * 10]
    for run, values in zip(runs, curves):
        log_points(run, "reward/mean", values)
    Run.objects.filter(pk=runs[5].pk).update(status=RunStatus.KILLED)
    html = client_in.get(reverse("sweeps:panel", args=[sweep.pk]), {"metric": "reward/mean"}).content.decode()
    order = [int(x) for x in re.findall(r'<tr data-run="(\d+)"', html)]
    assert order == [runs[i].pk for i in (3, 2, 1, 5, 4, 0)]  # finals 0.7, 0.6, 0.5, 0.45, 0.4, 0.3
    assert f'<tr data-run="{runs[3].pk}" data-status="running" data-seed="1" class="leader">' in html
    assert f"run {runs[3].pk}</a> (seed 1, lr=0.0002): final reward/mean 0.7" in html
    cells = dict(re.findall(r'<tr data-cell="([^"]+)"[^>]*><td>[^<]*</td><td class="cell-finished">[^<]*</td>'
                            r'<td class="cell-mean">([^<]+)</td>', html))
    assert set(cells) == {"lr=0.0001", "lr=0.0002"}
    # the finals' mean and interval cover the runs that reached their last step: the killed run is "so far"
    assert cells["lr=0.0002"].startswith("0.6 ± ") and cells["lr=0.0001"].startswith("0.4333 ± ")
    assert "0.45 so far (1 stopped)" in html
    assert '<tr data-cell="lr=0.0002" class="leader">' in html  # the better grid point first, marked
    assert "Stopped runs saved" in html and "% of the sweep" in html


def test_parallel_coordinates_of_config_vs_final(client_in, config, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        sweep = services.sweep_create(config=config, seeds=[0, 1], concurrency=4, name="grid",
                                      grid={"lr": [1e-4, 2e-4], "loss_agg": ["token-mean", "seq-mean-token-mean"]},
                                      policy={"name": "manual"})
    runs = [make_running(r) for r in sweep.runs.order_by("pk")]
    for i, run in enumerate(runs[:-1]):  # the last run logged nothing: left out
        log_points(run, "reward/mean", [0.1 * i] * 10)
    page = client_in.get(reverse("sweeps:parallel", args=[sweep.pk])).content.decode()
    dims = json.loads(re.search(r'<script id="parallel-data" type="application/json">(.*?)</script>', page).group(1))
    assert dims["runs"] == [r.pk for r in runs[:-1]]
    labels = [d["label"] for d in dims["dimensions"]]
    assert labels == ["loss_agg", "lr", "seed", "final reward/mean"]
    loss = dims["dimensions"][0]
    assert loss["ticktext"] == ['"seq-mean-token-mean"', '"token-mean"'] and set(loss["values"]) == {0, 1}
    assert dims["dimensions"][-1]["values"] == pytest.approx([0.1 * i for i in range(7)])
    assert reverse("sweeps:parallel", args=[sweep.pk]) in client_in.get(reverse("sweeps:detail", args=[sweep.pk])).content.decode()


def test_the_forms_health_guards_go_into_the_policy_and_their_errors_onto_their_fields(
        client_in, model_dir, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        response = client_in.post(reverse("sweeps:new"), form_data(
            model_dir, policy_name="manual", policy_params="", guard_entropy_below="0.05", guard_reward_drop="0.25",
            guard_for_steps="6"))
    assert response.status_code == 302, response.context["form"].errors
    sweep = Sweep.objects.get()
    assert sweep.policy == {"name": "manual", "max_steps": 20, "guards": [
        {"kind": "entropy_collapse", "below": 0.05, "for_steps": 6}, {"kind": "reward_drop", "drop": 0.25, "for_steps": 6}]}
    page = client_in.get(reverse("sweeps:detail", args=[sweep.pk])).content.decode()
    assert "guards: entropy_collapse (entropy &lt; 0.05 for 6 steps), reward_drop" in page
    for overrides, field, message in [({"guard_clipped_above": "1.5"}, "guard_clipped_above", "must lie in (0, 1)"),
                                      ({"guard_reward_drop": "0.2", "guard_for_steps": "0"}, "guard_for_steps",
                                       "must lie in [1, 100000]"),
                                      ({"guard_zero_std_above": "0.9",
                                        "policy_params": '{"guards": [{"kind": "zero_std"}]}'}, "policy_params",
                                       "at most once")]:
        response = client_in.post(reverse("sweeps:new"), form_data(model_dir, **overrides))
        errors = response.context["form"].errors
        assert response.status_code == 400 and field in errors and message in " ".join(errors[field]), errors
    assert Sweep.objects.count() == 1


def test_a_guard_stops_the_collapsed_run_of_a_live_sweep_and_the_dashboard_says_why(
        client_in, config, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        sweep = services.sweep_create(config=config, seeds=[0, 1, 2], concurrency=3, name="guarded", policy={
            "name": "median", "metric": "reward/mean", "grace_steps": 3, "min_peers": 2, "min_delta": 0.5,
            "guards": [{"kind": "entropy_collapse", "below": 0.05, "for_steps": 3}]})
    runs = [make_running(r) for r in sweep.runs.order_by("pk")]
    for i, run in enumerate(runs):
        log_points(run, "reward/mean", [0.6] * 12)
        log_points(run, "entropy", [0.5 if i != 1 or s < 4 else 0.0 for s in range(12)])
    services.sweep_apply_policy(sweep_id=sweep.pk)
    decisions = list(sweep.decisions.all())
    assert [(d.run_id, d.rule, d.action) for d in decisions] == [(runs[1].pk, "guard:entropy_collapse", "stop")]
    assert Run.objects.get(pk=runs[1].pk).kill_requested_at is not None
    assert all(Run.objects.get(pk=r.pk).kill_requested_at is None for r in (runs[0], runs[2]))
    html = client_in.get(reverse("sweeps:detail", args=[sweep.pk])).content.decode()
    assert "guard entropy_collapse: smoothed entropy" in html and "has stopped exploring" in html


def test_one_best_seed_on_the_page_a_run_stopped_early_is_not_named_best(client_in, config,
                                                                         django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        sweep = services.sweep_create(config=config, seeds=[3, 4, 5], concurrency=3, name="best",
                                      policy={"name": "manual"})
    stopped, finished, running = [make_running(r) for r in sweep.runs.order_by("pk")]
    log_points(stopped, "reward/mean", [0.32] * 14)  # stopped at step 14 of 20: its final is a partial run's
    log_points(finished, "reward/mean", [0.28] * 20)
    log_points(running, "reward/mean", [0.25] * 10)
    Run.objects.filter(pk=stopped.pk).update(status=RunStatus.KILLED)
    Run.objects.filter(pk=finished.pk).update(status=RunStatus.SUCCEEDED)
    html = client_in.get(reverse("sweeps:panel", args=[sweep.pk]), {"metric": "reward/mean"}).content.decode()
    header = re.search(r'<p id="leader-line">.*?href="[^"]*">run (\d+)</a>', html).group(1)
    highlighted = re.findall(r'<tr data-run="(\d+)"[^>]*class="leader">', html)
    table = re.findall(r'<td>run (\d+) \(seed \d+\): [^<]*</td></tr>', html)
    assert header == str(finished.pk) and highlighted == [str(finished.pk)] and table == [str(finished.pk)]
    assert f"run {finished.pk}</a> (seed 4): final reward/mean 0.28" in html
    # a running run that overtakes it is the best so far, everywhere on the page
    log_points(running, "reward/mean", [0.4] * 5, start=11)
    html = client_in.get(reverse("sweeps:panel", args=[sweep.pk]), {"metric": "reward/mean"}).content.decode()
    assert re.search(r'<p id="leader-line">.*?href="[^"]*">run (\d+)</a>', html).group(1) == str(running.pk)
    assert re.findall(r'<td>run (\d+) \(seed \d+\): [^<]*</td></tr>', html) == [str(running.pk)]
    leader = re.search(r'<p id="leader-line">.*?</p>', html, re.S).group(0)
    assert f"run {running.pk}</a> (seed 5): reward/mean so far 0.4" in leader and "at step 15 of 20" in leader, leader


def _decision_row(html: str, run_id: int) -> str:
    row = html[html.index(f'<tr data-run="{run_id}" data-action="stop">'):]
    return row[:row.index("</tr>")]


def test_a_bayes_decisions_reason_says_the_numbers_of_its_columns_within_the_metrics_range(
        client_in, config, django_capture_on_commit_callbacks):
    # a reward in [0, 1] at its floor: its interval goes below 0
    sweep, runs = bayes_sweep_one_poor(config, django_capture_on_commit_callbacks, poor=0.0)
    services.sweep_apply_policy(sweep_id=sweep.pk)
    details = sweep.decisions.get(run=runs[3]).details
    assert details["ci_low"] < 0  # the stored interval, unclipped
    row = _decision_row(client_in.get(reverse("sweeps:detail", args=[sweep.pk])).content.decode(), runs[3].pk)
    probability = re.search(r'<td class="probability">([0-9.]+) \(model loss ([0-9.]+) ≤ ([0-9.]+),', row)
    forecast = re.search(r'<td class="forecast">([-0-9.e]+) \[([-0-9.e]+), ([-0-9.e]+)\]', row)
    reason = unescape(re.search(r'<td class="reason">([^<]*)</td>', row)[1])
    assert f"P(near-best) = {probability[1]}; " in reason
    assert f"is stopped) = {probability[2]} <= {probability[3]} " in reason
    assert f"forecast reward/mean {forecast[1]} (95 % {forecast[2]} to {forecast[3]})" in reason
    assert forecast[2] == "0"  # clipped to the reward's range, in the column and the reason alike


def test_a_stored_decisions_probability_column_rounds_as_its_reason(client_in, config,
                                                                   django_capture_on_commit_callbacks):
    from webapp.sweeps.models import PolicyDecision

    with django_capture_on_commit_callbacks(execute=False):
        sweep = services.sweep_create(config=config, seeds=[0, 1], concurrency=2, name="rounding",
                                      policy={"name": "bayes", "metric": "reward/mean"})
    run = sweep.runs.order_by("pk").first()
    details = {"probability": 0.1825, "loss": 0.0125, "risk": 0.05, "model_risk": 0.0315, "forecast": 0.21,
               "ci_low": 0.1, "ci_high": 0.27}
    # the reason as the policy wrote it: Python's rounding of the stored float (0.1825 is 0.18249999...)
    PolicyDecision.objects.create(sweep=sweep, run=run, action="stop", rule="bayes", step=12, value=0.21,
                                  threshold=0.3, n_peers=1, details=details,
                                  reason="bayes: P(near-best) = 0.182; with it stopped P(every near-best seed is "
                                         "stopped) = 0.013 <= 0.032 (the model's level for risk 0.05)")
    row = _decision_row(client_in.get(reverse("sweeps:detail", args=[sweep.pk])).content.decode(), run.pk)
    assert '<td class="probability">0.182 (model loss 0.013 ≤ 0.032, its level for risk 0.05)' in row


def test_a_policy_stops_activity_row_says_the_step_it_decided_at_and_the_step_the_run_was_at(
        client_in, config, django_capture_on_commit_callbacks, monkeypatch):
    sweep, runs = bayes_sweep_one_poor(config, django_capture_on_commit_callbacks, poor=0.1)
    checked = services.policy_check

    def check_while_the_run_moves_on(**kwargs):
        check = checked(**kwargs)
        log_points(runs[3], "reward/mean", [0.1, 0.1, 0.1], start=17)  # the run logged 3 steps while it ran
        return check

    monkeypatch.setattr(services, "policy_check", check_while_the_run_moves_on)
    services.sweep_apply_policy(sweep_id=sweep.pk)
    decision = sweep.decisions.get(run=runs[3])
    assert decision.step < 19
    html = client_in.get(reverse("sweeps:activity", args=[sweep.pk])).content.decode()
    row = html[html.index('<tr data-action="run.kill">'):]
    row = row[:row.index("</tr>")]
    assert f"at step {decision.step} " in unescape(row)  # the reason
    details = row.split("</td>")[-2]  # its details, key=value (their order is the database's: jsonb sorts keys)
    assert f"decided_at_step={decision.step}" in details.split(", ") and "at_step=19" in details.split(", ")
