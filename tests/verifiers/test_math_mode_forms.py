"""The math verifier's ``mode`` where users write a reward spec: the run form and the evaluation form show what
it chooses; an unknown mode is an error on the ``rewards`` field naming ``mode``; pass@k's correctness
(``training.evaluate.is_correct``) reads prose answers in mode lenient (Django tests on the real database)."""
from __future__ import annotations

import html as html_lib
import json

import pytest
from django.urls import reverse

from tests.evals.conftest import run_with_checkpoints  # noqa: F401  (a fixture)
from tests.evals.test_views import form_data
from tests.runs.test_views import field_errors, form_post
from training.evaluate import is_correct
from training.verifiers import build_reward, check_reward_spec
from webapp.evals.models import EvalJob
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db
LENIENT = [{"name": "math", "params": {"mode": "lenient"}}]


def test_the_run_form_shows_what_mode_chooses(client_in):
    page = html_lib.unescape(client_in.get(reverse("runs:new")).content.decode())
    assert "math: mode — strict (default, for training)" in page and "lenient: the last mathematical" in page


def test_an_unknown_mode_is_a_rewards_error_naming_mode_and_launches_nothing(client_in, model_dir):
    bad = json.dumps([{"name": "math", "params": {"mode": "loose"}}])
    response = client_in.post(reverse("runs:new"), form_post(model_path=model_dir, rewards=bad))
    assert response.status_code == 400
    errors = {k: html_lib.unescape(v) for k, v in field_errors(response).items()}
    assert "mode must be one of strict, lenient; got 'loose'" in errors["rewards"], errors
    assert not Run.objects.exists()


def test_strict_only_params_with_mode_lenient_are_named():
    problem = check_reward_spec([{"name": "math", "params": {"mode": "lenient", "extract": "hash"}}])
    assert "extract apply to mode 'strict' only" in problem
    assert check_reward_spec(LENIENT) == ""
    assert check_reward_spec([{"name": "math", "params": {"mode": "strict", "extract": "hash"}}]) == ""


def test_the_evaluation_form_offers_lenient_and_takes_it(client_in, run_with_checkpoints):  # noqa: F811
    url = reverse("evals:new") + f"?run={run_with_checkpoints.pk}"
    page = html_lib.unescape(client_in.get(url).content.decode())
    assert '"mode": "lenient"' in page and "math: mode" in page
    bad = client_in.post(url, form_data(run_with_checkpoints, rewards=json.dumps([{"name": "math", "params":
                                                                                  {"mode": "sloppy"}}])))
    assert bad.status_code == 400 and "mode must be one of strict, lenient" in html_lib.unescape(bad.content.decode())
    assert EvalJob.objects.count() == 0
    good = client_in.post(url, form_data(run_with_checkpoints, rewards=json.dumps(LENIENT)))
    assert good.status_code == 302 and EvalJob.objects.get().rewards == LENIENT


def test_pass_at_k_counts_a_base_models_prose_answer_in_mode_lenient_only():
    completions = ["Adding them gives 12 apples.", "So 3 + 4 = 7, and twice that is 14", r"It is \boxed{12}."]
    examples = [{"answer": "12"}, {"answer": "14"}, {"answer": "12"}]
    lenient = build_reward(LENIENT)(completions, examples)
    strict = build_reward([{"name": "math"}])(completions, examples)
    assert [is_correct(lenient, i) for i in range(3)] == [True, True, True]
    assert [is_correct(strict, i) for i in range(3)] == [False, False, True]
