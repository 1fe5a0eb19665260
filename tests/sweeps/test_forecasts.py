"""The dashboard's forecasts (webapp/sweeps/forecasts.py: the JSON the chart draws, the runs table's two columns) and
the replay of a policy on a finished sweep (webapp/sweeps/what_if.py, the replay page), through Django's test
client and against the policy's own numbers."""
from __future__ import annotations

import random
import re

import pytest
from django.core.cache import cache
from django.urls import reverse

from tests.conftest import logged_in
from tests.sweeps.conftest import log_points, make_running
from webapp.runs.models import Run, RunStatus
from webapp.sweeps import services
from webapp.sweeps.models import PolicyDecision
from webapp.sweeps.policies import make_policy, parse_config
from webapp.sweeps.policies.bayes import policy_numbers
from webapp.sweeps.policies.forecast_paths import sweep_forecasts

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

BAYES = {"name": "bayes", "metric": "reward/mean", "grace_steps": 4}
LEVELS = [0.8, 0.75, 0.7, 0.3]


def curve(level: float, steps: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [level * (1 - 0.5 ** (t / 8)) + rng.gauss(0, 0.02) for t in range(1, steps + 1)]


@pytest.fixture(autouse=True)
def fresh_cache():
    cache.clear()


def make_sweep(config, policy=BAYES, seeds=4, total_steps=60):
    return services.sweep_create(config={**config, "total_steps": total_steps}, seeds=list(range(seeds)),
                                 concurrency=seeds, policy=policy)


@pytest.fixture
def live_sweep(config, django_capture_on_commit_callbacks):
    """4 running seeds at step 30 of 60 (reward/mean), the last far below the others; a 5th run killed at step 20."""
    with django_capture_on_commit_callbacks(execute=False):
        sweep = make_sweep(config, seeds=5)
    runs = [make_running(r) for r in sweep.runs.order_by("pk")]
    for i, (run, level) in enumerate(zip(runs, LEVELS + [0.9])):
        log_points(run, "reward/mean", curve(level, 20 if i == 4 else 30, seed=i))
    Run.objects.filter(pk=runs[4].pk).update(status=RunStatus.KILLED, killed_by="user:ada")
    return sweep, runs


def test_the_forecasts_are_the_policys_numbers_and_the_killed_run_is_out_of_the_race(client_in, live_sweep):
    sweep, runs = live_sweep
    answer = client_in.get(reverse("sweeps:forecast", args=[sweep.pk]), {"metric": "reward/mean"}).json()
    assert answer["bayes"] is True and answer["width"] == 1 and answer["tolerance"] == 0.02
    # the reference: the same points through the pure module that tests/sweeps/test_forecast_paths.py checks against
    # BayesPolicy itself
    curves = {r.pk: [(t, v) for t, v in enumerate(curve(level, 20 if i == 4 else 30, seed=i), 1)]
              for i, (r, level) in enumerate(zip(runs, LEVELS + [0.9]))}
    params = parse_config({**BAYES, "mode": "max", "max_steps": 60})
    expected = sweep_forecasts(curves, params=params, horizons={}, out_of_race={runs[4].pk}, bounds=(0.0, 1.0))
    assert answer["range"] == [0.0, 1.0]  # reward/mean of the task's own verifier
    for run in runs[:4]:
        got, want = answer["runs"][str(run.pk)], expected[run.pk]
        assert got["final"] == pytest.approx(want.final.mean, rel=1e-5)
        assert got["ci"] == pytest.approx(list(want.final.ci), rel=1e-5)
        assert got["p"] == pytest.approx(want.probability, rel=1e-5, abs=1e-9)
        assert got["path"]["x"][0] == 30 and got["path"]["x"][-1] == 60 and len(got["path"]["y"]) == 24
        assert all(0 <= lo <= y <= hi <= 1 for lo, y, hi in zip(got["path"]["lo"], got["path"]["y"], got["path"]["hi"]))
        # the path ends on the row's forecast worth, the band on its interval
        assert [got["path"][k][-1] for k in ("y", "lo", "hi")] == [got["final"], *got["ci"]]
    killed = answer["runs"][str(runs[4].pk)]
    assert killed["final"] is None and killed["p"] is None and not killed["in_race"]
    assert killed["path"]["x"] == []  # killed by a user: no forecast, and none drawn
    # the policy fed the same points gives the same P(near-best): the probability column is the policy's number
    policy = make_policy(params.__dict__ | {"name": "bayes", "guards": []})
    for run_id, points in curves.items():
        for step, value in points:
            policy.observe(run_id, step, value)
    policy.mark_stopped(runs[4].pk)
    for run_id, p in policy_numbers(policy).p.items():
        assert answer["runs"][str(run_id)]["p"] == pytest.approx(p, rel=1e-5, abs=1e-9)
    assert set(policy_numbers(policy).p) == {r.pk for r in runs[:4]}


def test_the_runs_table_shows_forecast_final_and_p_near_best(client_in, live_sweep):
    sweep, runs = live_sweep
    html = client_in.get(reverse("sweeps:panel", args=[sweep.pk]), {"metric": "reward/mean"}).content.decode()
    assert "Forecast worth (95 % interval)" in html and "P(near-best)" in html
    # the probability in plain words, on the page
    assert ("P(near-best) = the chance this seed ends within 0.02 of the best seed&#x27;s final, by the bayes "
            "policy&#x27;s calibrated forecast") in html
    forecast = client_in.get(reverse("sweeps:forecast", args=[sweep.pk])).json()["runs"]
    for run in runs[:4]:
        row = re.search(rf'<tr data-run="{run.pk}".*?</tr>', html, re.S).group(0)
        f = forecast[str(run.pk)]
        cell = re.search(r'<td class="forecast">(.*?)</td>', row).group(1)
        assert cell == (f'<span class="worth">{f["final"]:.4g}</span> <span class="ci">({f["ci"][0]:.4g} to '
                        f'{f["ci"][1]:.4g})</span>')
        assert re.search(r'<td class="p-near-best">(.*?)</td>', row).group(1) == f'<span class="p">{f["p"]:.2f}</span>'
    killed = re.search(rf'<tr data-run="{runs[4].pk}".*?</tr>', html, re.S).group(0)
    assert '<td class="forecast">–</td>' in killed and '<td class="p-near-best">–</td>' in killed
    # the dashboard page: the toggle, on for a bayes sweep
    page = client_in.get(reverse("sweeps:detail", args=[sweep.pk])).content.decode()
    assert re.search(r'id="forecast-toggle" checked', page)


def test_a_stopped_run_shows_the_numbers_of_its_stop_frozen(client_in, live_sweep):
    """A seed stopped by bayes at step 30 (its decision as the policy makes it, stored): its row and its path show
    the decision's forecast, interval and P(near-best) "at its stop (step 30)", and still do once the others have
    run on and the sweep's forecasts are computed again."""
    sweep, runs = live_sweep
    sweep.policy = {**sweep.policy, "risk": 0.5, "min_peers": 2}
    sweep.save(update_fields=["policy"])
    policy = make_policy({**sweep.policy, "max_steps": 60})
    for i, (run, level) in enumerate(zip(runs[:4], LEVELS)):
        for step, value in enumerate(curve(level, 30, seed=i), 1):
            policy.observe(run.pk, step, value)
    stop = policy.decide()[0]  # the least likely near-best seed (the policy's choice, whichever it is)
    stopped = Run.objects.get(pk=stop.run_id)
    PolicyDecision.objects.create(sweep=sweep, run=stopped, action="stop", rule="bayes", step=stop.step,
                                  value=stop.value, threshold=stop.threshold, n_peers=stop.n_peers,
                                  details=stop.details, reason=stop.reason)
    Run.objects.filter(pk=stopped.pk).update(status=RunStatus.KILLED, killed_by="policy:bayes")
    d, seen = stop.details, []
    for _ in range(2):
        answer = client_in.get(reverse("sweeps:forecast", args=[sweep.pk])).json()["runs"][str(stopped.pk)]
        html = client_in.get(reverse("sweeps:panel", args=[sweep.pk])).content.decode()
        row = re.search(rf'<tr data-run="{stopped.pk}".*?</tr>', html, re.S).group(0)
        assert answer["at_stop"] == stop.step == 30 and answer["path"]["x"][0] == 30 and answer["path"]["x"][-1] == 60
        assert [answer["path"][k][-1] for k in ("y", "lo", "hi")] == [answer["final"], *answer["ci"]]
        assert row.count("at its stop (step 30)") == 2  # the forecast cell and the probability cell
        # the decisions table shows the stop's forecast within the reward's range too, as the row does
        cell = re.search(rf'<tr data-run="{stopped.pk}" data-action="stop">.*?<td class="forecast">(.*?)</td>',
                         html, re.S).group(1)
        assert cell == f'{answer["final"]:.4g} [{answer["ci"][0]:.4g}, {answer["ci"][1]:.4g}]'
        seen.append((answer["final"], answer["ci"], answer["p"]))
        for i, (run, level) in enumerate(zip(runs[:4], LEVELS)):  # the others run on to step 50, and better
            if run.pk != stopped.pk:
                log_points(run, "reward/mean", [v + 0.1 for v in curve(level, 50, seed=i)[30:]], start=31)
        cache.clear()
    clip = lambda x: min(max(x, 0.0), 1.0)  # noqa: E731 (reward/mean of the task's verifier: in [0, 1])
    want = (pytest.approx(clip(d["forecast"]), rel=1e-5), pytest.approx([clip(d["ci_low"]), clip(d["ci_high"])],
                                                                        rel=1e-5),
            pytest.approx(d["probability"], rel=1e-5))
    assert seen[0] == want and seen[1] == want


def test_forecasts_are_cached_until_a_run_moves(client_in, live_sweep, django_assert_max_num_queries):
    from webapp.sweeps.forecasts import sweep_forecast

    sweep, runs = live_sweep
    first = sweep_forecast(sweep=sweep, metric="reward/mean", mode="max")
    with django_assert_max_num_queries(2):  # where the runs stand, the finished sweeps its prior learns from; the
        # points are not read again
        assert sweep_forecast(sweep=sweep, metric="reward/mean", mode="max") == first
    log_points(runs[0], "reward/mean", [0.9], start=31)
    moved = sweep_forecast(sweep=sweep, metric="reward/mean", mode="max")
    assert moved["runs"][runs[0].pk]["path"]["x"][0] == 31


def test_any_sweep_gets_forecasts_with_the_bayes_defaults(client_in, config, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        sweep = make_sweep(config, policy={"name": "median", "metric": "reward/mean", "min_peers": 1}, seeds=2)
    a, b = [make_running(r) for r in sweep.runs.order_by("pk")]
    log_points(a, "reward/mean", curve(0.8, 30, 0))
    log_points(b, "reward/mean", curve(0.3, 30, 1))
    answer = client_in.get(reverse("sweeps:forecast", args=[sweep.pk]), {"metric": "reward/mean"}).json()
    assert answer["bayes"] is False and answer["max_steps"] == 60
    assert answer["runs"][str(b.pk)]["p"] < 0.5 < answer["runs"][str(a.pk)]["p"]  # min_peers 1: one peer
    page = client_in.get(reverse("sweeps:detail", args=[sweep.pk])).content.decode()
    assert 'id="forecast-toggle">' in page  # there, but off
    # said plainly: no policy of this sweep decides on these numbers
    assert "the bayes model&#x27;s calibrated forecast; this sweep&#x27;s policy (median) does not decide on it" in page


# --- replay --------------------------------------------------------------------------------------------------

@pytest.fixture
def finished_sweep(config, django_capture_on_commit_callbacks):
    """A median sweep of 4 seeds x 60 steps that ran to its end; seed 2 ends best, seed 3 far below."""
    with django_capture_on_commit_callbacks(execute=False):
        sweep = make_sweep(config, policy={"name": "median", "metric": "reward/mean"}, seeds=4)
    runs = [make_running(r) for r in sweep.runs.order_by("pk")]
    for i, (run, level) in enumerate(zip(runs, [0.7, 0.75, 0.8, 0.3])):
        log_points(run, "reward/mean", curve(level, 60, seed=i))
    Run.objects.filter(sweep=sweep).update(status=RunStatus.SUCCEEDED)
    return sweep, runs


def replay_url(sweep, **params):
    return reverse("sweeps:replay", args=[sweep.pk]), {"policy_metric": "reward/mean", "policy_mode": "max", **params}


def test_a_replay_shows_what_the_policy_would_have_done_and_touches_nothing(client_in, finished_sweep):
    sweep, runs = finished_sweep
    before = list(Run.objects.filter(sweep=sweep).order_by("pk").values_list("status", "kill_requested_at",
                                                                              "killed_by", "last_step"))
    url, data = replay_url(sweep, policy_name="bayes", policy_params='{"grace_steps": 5, "min_peers": 2}')
    response = client_in.get(url, data)
    html = response.content.decode()
    assert response.status_code == 200, html
    stops = re.findall(r'<tr data-run="(\d+)" data-step="(\d+)">', html)
    stopped = {int(run_id): int(step) for run_id, step in stops}
    assert runs[3].pk in stopped and 5 <= stopped[runs[3].pk] < 60 and runs[2].pk not in stopped
    saved = sum(60 - step for step in stopped.values()) / 240
    assert f'data-saved="{round(saved, 4)}"' in html and f"Compute saved: {round(saved * 100)} %" in html
    assert f'data-kept="{runs[2].pk}"' in html and 'data-verdict="best"' in html
    # nothing of the sweep changed
    assert PolicyDecision.objects.filter(sweep=sweep).count() == 0
    assert list(Run.objects.filter(sweep=sweep).order_by("pk").values_list(
        "status", "kill_requested_at", "killed_by", "last_step")) == before


def test_a_replay_that_stops_the_best_seed_says_so(client_in, finished_sweep):
    sweep, runs = finished_sweep
    # keep only the top 1 in 4 at step 3, when the best seed (seed 2) is not yet ahead of seed 1 by its noise
    from webapp.sweeps import what_if

    result = what_if.sweep_replay(sweep=sweep, policy={"name": "asha", "metric": "reward/mean", "min_steps": 2,
                                                       "eta": 4, "grace_steps": 2, "min_peers": 3,
                                                       "smoothing": "none"})
    assert len(result["stops"]) == 3 and len(result["survivors"]) == 1
    kept = result["survivors"][0]["run_id"]
    assert result["kept"]["run_id"] == kept and result["best"]["run_id"] == runs[2].pk
    assert result["kept_is_best"] == (kept == runs[2].pk)
    assert result["saved"] == pytest.approx(1 - (60 + sum(s["step"] for s in result["stops"])) / 240, abs=1e-4)


@pytest.mark.parametrize("params, field, message", [
    ({"policy_name": "bayes", "policy_params": '{"risk": 2}'}, "policy_params", "risk: must lie in (0, 0.5]"),
    ({"policy_name": "median", "policy_params": '{"risk": 0.05}'}, "policy_params", "risk: only bayes has a probability model"),
    ({"policy_name": "median", "policy_params": '{"grace": 2}'}, "policy_params", "grace: unknown key"),
    ({"policy_name": "median", "policy_params": "{nope"}, "policy_params", "not valid JSON"),
    ({"policy_name": "nope"}, "policy_name", "nope"),
    ({"policy_name": "median", "policy_mode": "sideways"}, "policy_mode", "sideways"),
])
def test_bad_replay_input_is_shown_on_its_field(client_in, finished_sweep, params, field, message):
    sweep, _ = finished_sweep
    url, data = replay_url(sweep, **params)
    response = client_in.get(url, data)
    assert response.status_code == 400
    errors = re.search(rf'<ul class="errorlist" data-field="{field}">(.*?)</ul>', response.content.decode(), re.S)
    assert errors and message in errors.group(1).replace("&#x27;", "'")


def test_a_sweep_still_running_is_not_replayed(client_in, live_sweep):
    sweep, _ = live_sweep
    url, data = replay_url(sweep, policy_name="median")
    response = client_in.get(url, data)
    assert response.status_code == 400 and "once every run of it has ended" in response.content.decode()
    assert "replay-section" not in client_in.get(reverse("sweeps:detail", args=[sweep.pk])).content.decode()


def test_the_finished_dashboard_offers_the_replay_form(client_in, finished_sweep):
    sweep, _ = finished_sweep
    html = client_in.get(reverse("sweeps:detail", args=[sweep.pk])).content.decode()
    assert 'id="replay-section"' in html and f'action="{reverse("sweeps:replay", args=[sweep.pk])}"' in html


def test_forecasts_and_replays_are_not_found_outside_the_project(finished_sweep, django_user_model):
    sweep, _ = finished_sweep
    stranger = logged_in(django_user_model.objects.create_user(username="mallory", password="x"))
    url, data = replay_url(sweep, policy_name="median")
    assert stranger.get(url, data).status_code == 404
    assert stranger.get(reverse("sweeps:forecast", args=[sweep.pk])).status_code == 404


def test_long_runs_are_forecast_from_the_chart_buckets(client_in, config, django_capture_on_commit_callbacks):
    """Runs of 1,000 steps read as buckets of 3: each path still starts at the run's last step, and the forecasts
    agree with the ones from every raw point."""
    with django_capture_on_commit_callbacks(execute=False):
        sweep = make_sweep(config, total_steps=3000, seeds=4)
    runs = [make_running(r) for r in sweep.runs.order_by("pk")]
    raw = {}
    for i, (run, level) in enumerate(zip(runs, LEVELS)):
        values = [level * (1 - 0.5 ** (t / 150)) + v for t, v in enumerate(curve(0, 1000, seed=i), 1)]
        log_points(run, "reward/mean", values)
        raw[run.pk] = list(enumerate(values, 1))
    answer = client_in.get(reverse("sweeps:forecast", args=[sweep.pk])).json()
    assert answer["width"] == 3
    exact = sweep_forecasts(raw, params=parse_config({**BAYES, "mode": "max", "max_steps": 3000}), horizons={},
                            out_of_race=set(), bounds=(0.0, 1.0))
    for run in runs:
        got = answer["runs"][str(run.pk)]
        assert got["path"]["x"][0] == 1000 and got["path"]["x"][-1] == 3000 and got["path"]["y"][-1] == got["final"]
        assert got["final"] == pytest.approx(exact[run.pk].final.mean, abs=0.01)
        assert got["ci"][1] - got["ci"][0] == pytest.approx(exact[run.pk].final.ci[1] - exact[run.pk].final.ci[0],
                                                           rel=0.25)


def test_a_run_the_sweep_stopped_but_the_replay_keeps_has_no_known_final(client_in, finished_sweep):
    """The sweep killed its best seed at step 20 (by hand); a manual replay stops nothing: that seed survives with
    an unknown final, the kept run is the best of those that ran to their end, and the sweep's own saving is said."""
    from webapp.runs.models import MetricPoint
    from webapp.sweeps import what_if

    sweep, runs = finished_sweep
    MetricPoint.objects.filter(run=runs[2], step__gt=20).delete()
    Run.objects.filter(pk=runs[2].pk).update(status=RunStatus.KILLED, last_step=20)
    from webapp.runs import rollups
    from django.db import connection

    with connection.cursor() as cursor:
        rollups.rebuild_run(cursor, run_id=runs[2].pk)
    result = what_if.sweep_replay(sweep=sweep, policy={"name": "manual", "metric": "reward/mean"})
    assert result["stops"] == [] and result["saved"] == 0.0
    assert [u["run_id"] for u in result["unknown"]] == [runs[2].pk]
    assert result["kept"]["run_id"] == result["best"]["run_id"] == runs[1].pk and result["kept_is_best"]
    assert result["stored_steps"] == 200 and result["actual_saved"] == pytest.approx(40 / 240, abs=1e-4)
    url, data = replay_url(sweep, policy_name="manual")
    html = client_in.get(url, data).content.decode()
    assert 'id="replay-unknown"' in html and f"run {runs[2].pk} (seed 2)" in html and "It stops no run." in html
