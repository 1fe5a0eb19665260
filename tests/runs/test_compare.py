"""The compare page (webapp/runs/compare.py): runs from two sweeps, their summary rows, a config diff of only
the keys that differ, and membership (a run of another project is 'not found', never shown)."""
import re

import pytest
from django.urls import reverse

from tests.sweeps.conftest import log_points, make_running
from webapp.runs.compare import config_diff, parse_ids
from webapp.runs.models import Run, RunStatus
from webapp.sweeps import services as sweep_services

pytestmark = pytest.mark.postgres


def test_ids_and_the_diff():
    assert parse_ids("3, 17 42 3") == ([3, 17, 42], "")
    assert parse_ids(" ".join(str(i) for i in range(1, 30)))[1].startswith("ids: at most 20 runs")
    assert config_diff({1: {"a": 1, "b": [1, 2]}, 2: {"a": 1, "b": [1, 3]}, 3: {"a": 1}}) == [
        {"key": "b", "values": ["[1, 2]", "[1, 3]", "null"]}]


@pytest.mark.django_db
@pytest.mark.parametrize("ids", ["12345678901234567890123", "3 ²", "0", "9223372036854775808"])
def test_an_id_that_cannot_be_a_run_is_a_field_error(client_in, ids):
    """23 digits overflowed the database's integer and "²" passed ``isdigit`` but not ``int``: both were 500s."""
    response = client_in.get(reverse("runs:compare"), {"ids": ids})
    assert response.status_code == 400
    assert "is not a run id" in response.content.decode()
    assert client_in.post(reverse("runs:bulk"), {"run": [ids.split()[-1]], "action": "archive"}).status_code == 302


@pytest.mark.django_db
def test_runs_of_two_sweeps_side_by_side(client_in, config, django_capture_on_commit_callbacks, django_user_model):
    with django_capture_on_commit_callbacks(execute=False):
        one = sweep_services.sweep_create(config={**config, "lr": 1e-4}, seeds=[0], concurrency=1, name="one",
                                          policy={"name": "manual"})
        two = sweep_services.sweep_create(config={**config, "lr": 3e-4}, seeds=[5], concurrency=1, name="two",
                                          policy={"name": "manual"})
    a, b = make_running(one.runs.get()), make_running(two.runs.get())
    log_points(a, "reward/mean", [0.1] * 9 + [0.9] + [0.2] * 10)
    log_points(b, "reward/mean", [0.5] * 20)
    Run.objects.filter(pk__in=[a.pk, b.pk]).update(status=RunStatus.SUCCEEDED)  # ended: their finals shown
    html = client_in.get(reverse("runs:compare"), {"ids": f"{a.pk} {b.pk} 999999"}).content.decode()
    row_a = html[html.index(f'<tr data-run="{a.pk}">'):].split("</tr>")[0]
    assert '<td class="final">0.2</td>' in row_a and '<td class="best">0.9</td>' in row_a  # final, not the spike
    assert '<td class="mean">0.19</td>' in row_a  # (9 x 0.1 + 0.9 + 10 x 0.2) / 20
    assert '<td class="auc">3.8</td>' in row_a  # 9 x 0.1 + 0.9 + 10 x 0.2: the sum over its 20 steps
    # the default smoothing (debiased EMA 0.6), the sweep policies' own as reference
    from webapp.sweeps.policies.smoothing import debiased_ema

    smoothed = debiased_ema([0.1] * 9 + [0.9] + [0.2] * 10, 0.6)
    assert f'<td class="smoothed-final">{smoothed[-1]:.4g}</td>' in row_a
    assert f'<td class="best-smoothed">{max(smoothed):.4g}</td>' in row_a and max(smoothed) < 0.9 * 0.5
    assert '<td class="steps">20 / 6</td>' in row_a
    assert ">one</a>" in row_a and f'<tr data-run="{b.pk}">' in html and ">two</a>" in html
    assert re.findall(r'<tr data-key="([^"]+)">', html) == ["lr", "seed"]  # only the keys that differ
    assert "Not found (or not in your projects): 999999" in html
    assert 'id="compare-curves"' in html and "compare-unknown-metric" not in html
    typo = client_in.get(reverse("runs:compare"), {"ids": f"{a.pk} {b.pk}", "metric": "reward/meen"}).content.decode()
    assert '<p class="warning" id="compare-unknown-metric">no such metric: reward/meen; these runs log reward/mean</p>' \
        in typo
    # another user's view: the runs are 'not found', their numbers never shown
    outsider = django_user_model.objects.create_user(username="eve", password="pw-for-tests-only")
    client_in.force_login(outsider)
    html = client_in.get(reverse("runs:compare"), {"ids": f"{a.pk} {b.pk}"}).content.decode()
    assert f'<tr data-run="{a.pk}">' not in html and f"Not found (or not in your projects): {a.pk}, {b.pk}" in html


def test_the_default_smoothing_and_compute(db, config):
    from webapp.runs.compare import compute_seconds, debiased_ema as compare_ema
    from webapp.sweeps.policies.smoothing import debiased_ema

    values = [0.3, 0.1, 0.9, 0.4, 0.4, 0.0, 1.0]
    for weight in (0.0, 0.6, 0.95):
        assert compare_ema(values, weight) == pytest.approx(debiased_ema(values, weight))
    assert compute_seconds(30.0, {**config, "nproc_per_node": 2, "nnodes": 3}) == 180.0


@pytest.mark.django_db
def test_compute_is_wall_time_times_ranks(client_in, config, django_capture_on_commit_callbacks):
    from datetime import timedelta

    from webapp.runs.models import Run

    with django_capture_on_commit_callbacks(execute=False):
        sweep = sweep_services.sweep_create(config={**config, "nproc_per_node": 2, "strategy": "ddp"}, seeds=[0],
                                            concurrency=1, name="ddp", policy={"name": "manual"})
    run = make_running(sweep.runs.get())
    log_points(run, "loss/policy", [0.5, 0.3, 0.4])
    Run.objects.filter(pk=run.pk).update(first_step_at=run.started_at, ended_at=run.started_at + timedelta(seconds=50))
    html = client_in.get(reverse("runs:compare"), {"ids": str(run.pk), "metric": "loss/policy"}).content.decode()
    row = html[html.index(f'<tr data-run="{run.pk}">'):].split("</tr>")[0]
    assert '<td class="compute">100 rank·s</td>' in row and "<td>50 s</td>" in row
    assert 'data-mode="min"' in html and '<td class="best">0.3</td>' in row  # a loss: lowest is best
