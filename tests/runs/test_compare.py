"""The compare page (webapp/runs/compare.py): runs from two sweeps, their summary rows, a config diff of only
the keys that differ, and membership (a run of another project is 'not found', never shown)."""
import re

import pytest
from django.urls import reverse

from tests.sweeps.conftest import log_points, make_running
from webapp.runs.compare import config_diff, parse_ids
from webapp.sweeps import services as sweep_services


def test_ids_and_the_diff():
    assert parse_ids("3, 17 42 3") == ([3, 17, 42], "")
    assert parse_ids(" ".join(str(i) for i in range(1, 30)))[1].startswith("ids: at most 20 runs")
    assert config_diff({1: {"a": 1, "b": [1, 2]}, 2: {"a": 1, "b": [1, 3]}, 3: {"a": 1}}) == [
        {"key": "b", "values": ["[1, 2]", "[1, 3]", "null"]}]


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
    html = client_in.get(reverse("runs:compare"), {"ids": f"{a.pk} {b.pk} 999999"}).content.decode()
    row_a = html[html.index(f'<tr data-run="{a.pk}">'):].split("</tr>")[0]
    assert '<td class="final">0.2</td>' in row_a and '<td class="best">0.9</td>' in row_a  # final, not the spike
    assert '<td class="mean">0.19</td>' in row_a  # (9 x 0.1 + 0.9 + 10 x 0.2) / 20
    assert ">one</a>" in row_a and f'<tr data-run="{b.pk}">' in html and ">two</a>" in html
    assert re.findall(r'<tr data-key="([^"]+)">', html) == ["lr", "seed"]  # only the keys that differ
    assert "Not found (or not in your projects): 999999" in html
    assert 'id="compare-curves"' in html
    # another user's view: the runs are 'not found', their numbers never shown
    outsider = django_user_model.objects.create_user(username="eve", password="pw-for-tests-only")
    client_in.force_login(outsider)
    html = client_in.get(reverse("runs:compare"), {"ids": f"{a.pk} {b.pk}"}).content.decode()
    assert f'<tr data-run="{a.pk}">' not in html and f"Not found (or not in your projects): {a.pk}, {b.pk}" in html
