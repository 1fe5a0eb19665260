"""A sweep's forecasts and the replay of a policy through the token API (/api/v1/sweeps/{id}/forecast and /replay):
the same selectors as the dashboard, the same field errors as the sweep form, 404 outside the caller's projects."""
from __future__ import annotations

import random

import pytest

from tests.sweeps.conftest import log_points, make_running
from webapp.runs.models import Run, RunStatus
from webapp.sweeps.models import PolicyDecision

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def curve(level: float, steps: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [level * (1 - 0.5 ** (t / 8)) + rng.gauss(0, 0.02) for t in range(1, steps + 1)]


@pytest.fixture
def sweep_id(alice, config, django_capture_on_commit_callbacks):
    """alice's bayes sweep of 4 seeds x 60 steps, each run at step 30 (seed 3 far below the others)."""
    with django_capture_on_commit_callbacks(execute=False):
        body = alice.post("/sweeps", {"config": {**config, "total_steps": 60}, "seeds": 4, "concurrency": 4,
                                      "policy": {"name": "bayes"}}).json()
    for i, (run_id, level) in enumerate(zip(body["runs"], [0.8, 0.75, 0.7, 0.3])):
        log_points(make_running(Run.objects.get(pk=run_id)), "reward/mean", curve(level, 30, i))
    return body["id"]


def finish(sweep_id: int) -> None:
    for i, (run, level) in enumerate(zip(Run.objects.filter(sweep_id=sweep_id).order_by("pk"), [0.8, 0.75, 0.7, 0.3])):
        log_points(run, "reward/mean", curve(level, 60, i)[30:], start=31)
    Run.objects.filter(sweep_id=sweep_id).update(status=RunStatus.SUCCEEDED)


def test_forecasts_through_the_api(alice, bob, sweep_id):
    body = alice.get(f"/sweeps/{sweep_id}/forecast").json()
    assert body["metric"] == "reward/mean" and body["bayes"] is True and len(body["runs"]) == 4
    runs = list(Run.objects.filter(sweep_id=sweep_id).order_by("pk").values_list("pk", flat=True))
    low, top = body["runs"][str(runs[3])], body["runs"][str(runs[0])]
    # P(near-best) of every run in the race, the calibrated forecast worth inside its 95 % interval
    assert all(0 <= body["runs"][str(r)]["p"] <= 1 for r in runs) and low["ci"][0] < low["final"] < low["ci"][1]
    assert top["ci"][0] < top["final"] < top["ci"][1]
    assert low["path"]["x"][0] == 30 and low["path"]["x"][-1] == 60
    assert bob.get(f"/sweeps/{sweep_id}/forecast").status_code == 404


def test_a_replay_through_the_api(alice, bob, sweep_id):
    refused = alice.post(f"/sweeps/{sweep_id}/replay", {"policy": {"name": "median"}})
    assert refused.status_code == 400 and "sweep" in refused.json()["errors"]  # still running
    finish(sweep_id)
    for policy, key in (({"name": "bayes", "risk": 3}, "policy.risk"), ({"name": "median", "nope": 1}, "policy.nope"),
                        ({"name": "bayes", "p_stop": 0.05}, "policy.p_stop"), ({"name": "guess"}, "policy.name")):
        bad = alice.post(f"/sweeps/{sweep_id}/replay", {"policy": policy})
        assert bad.status_code == 400 and key in bad.json()["errors"], bad.json()
    for name in ("median", "asha", "manual"):
        bad = alice.post(f"/sweeps/{sweep_id}/replay", {"policy": {"name": name, "risk": 0.05}})
        assert bad.status_code == 400, bad.json()
        assert bad.json()["errors"]["policy.risk"].startswith("only bayes has a probability model"), bad.json()
    assert alice.post(f"/sweeps/{sweep_id}/replay", {"policy": {"name": "bayes", "risk": 0.05}}).status_code == 200
    response = alice.post(f"/sweeps/{sweep_id}/replay", {"policy": {"name": "median", "grace_steps": 5,
                                                                    "min_peers": 2}})
    assert response.status_code == 200, response.content
    result = response.json()
    runs = list(Run.objects.filter(sweep_id=sweep_id).order_by("pk").values_list("pk", flat=True))
    assert runs[3] in [s["run_id"] for s in result["stops"]] and result["kept"]["run_id"] == runs[0]
    assert result["kept_is_best"] is True and 0 < result["saved"] < 1 and result["stored_steps"] == 240
    assert PolicyDecision.objects.filter(sweep_id=sweep_id).count() == 0
    assert bob.post(f"/sweeps/{sweep_id}/replay", {"policy": {"name": "median"}}).status_code == 404


def test_a_launch_takes_a_risk_for_bayes_only(alice, config, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        ok = alice.post("/sweeps", {"config": {**config, "total_steps": 60}, "seeds": 4, "concurrency": 4,
                                    "policy": {"name": "bayes", "risk": 0.05}})
        assert ok.status_code in (200, 201), ok.content
        for name in ("median", "asha", "threshold", "manual"):
            bad = alice.post("/sweeps", {"config": {**config, "total_steps": 60}, "seeds": 4, "concurrency": 4,
                                         "policy": {"name": name, "risk": 0.05, "patience": 5}})
            assert bad.status_code == 400, bad.content
            assert bad.json()["errors"]["policy.risk"].startswith("only bayes has a probability model"), bad.json()
        bad = alice.post("/sweeps", {"config": {**config, "total_steps": 60}, "seeds": 4, "concurrency": 4,
                                     "policy": {"name": "bayes", "risk": 0.6}})
        assert bad.status_code == 400 and "policy.risk" in bad.json()["errors"], bad.content
