"""The reward dry-run at submit: a run or sweep on a dataset file whose first reference answer its own
verifier does not score 1 — written as the prompt's answer_instruction asks — is refused with a field error on
``rewards`` that gives the verifier's score and reason, on the form, the API and the CLI; verifiers that would
start the code sandbox or call a judge are not dry-run; the check is time-limited."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from django.urls import reverse

from tests.runs.test_views import field_errors, form_post
from tests.sweeps.test_views import form_data
from training.config import TrainConfig
from training.fields import FieldErrors
from training.reward_dry_run import dry_run_rewards, reward_dry_run_error
from training.verifiers import VerifierResult, register_verifier
from webapp.runs.models import Run
from webapp.sweeps import services as sweep_services
from webapp.sweeps.models import Sweep

pytestmark = pytest.mark.django_db

BOXED = "Put your final answer within \\boxed{}."
BARE_REASON = 'the math verifier scores the first row\'s reference answer "42" 0.0 ("no final answer found")'


def child_pids() -> set[int]:
    """This process's children (Linux: /proc/<pid>/task/<tid>/children; a thread that ended between the listing and
    the read has none)."""
    import glob
    import os

    pids = set()
    for path in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        try:
            with open(path) as fh:
                pids |= {int(p) for p in fh.read().split()}
        except FileNotFoundError:
            continue
    return pids


@pytest.fixture
def bare_answers(tmp_path):
    """A dataset whose answers are bare numbers (the issue's: every reward 0 under math's default form)."""
    path = tmp_path / "bare.jsonl"
    path.write_text("".join(json.dumps({"q": f"What is 6 * 7 + {i}?", "a": str(42 + i)}) + "\n" for i in range(5)))
    return str(path)


def file_config(path, **overrides) -> dict:
    return {"task": "file", "data_path": path, "prompt_field": "q", "answer_field": "a", **overrides}


def test_the_form_names_the_verifier_its_score_and_reason_and_launches_nothing(client_in, model_dir, bare_answers):
    response = client_in.post(reverse("runs:new"), form_post(model_path=model_dir, **file_config(bare_answers)))
    assert response.status_code == 400
    errors = field_errors(response)
    assert BARE_REASON.replace('"', "&quot;").replace("'", "&#x27;") in errors["rewards"], errors
    assert "answer_instruction names no answer form" in errors["rewards"]
    assert not Run.objects.exists()
    # asked for the form math reads, the same dataset launches
    response = client_in.post(reverse("runs:new"), form_post(model_path=model_dir, answer_instruction=BOXED,
                                                             **file_config(bare_answers)))
    assert response.status_code == 302 and Run.objects.count() == 1


@pytest.mark.parametrize("overrides, accepted", [
    ({}, False),
    ({"answer_instruction": BOXED}, True),
    ({"answer_instruction": "Reply with the number only.",
      "rewards": [{"name": "math", "params": {"extract": "last_number"}}]}, True),
    ({"answer_instruction": "Answer inside <answer></answer>."}, False),  # asks for a tag math's boxed form skips
    ({"answer_instruction": "Answer inside <answer></answer>.",
      "rewards": [{"name": "math", "params": {"extract": "answer_tag"}}]}, True),
    ({"rewards": [{"name": "exact"}]}, True),
    ({"rewards": [{"name": "exact"}], "answer_instruction": BOXED}, False),  # exact compares the whole reply
    ({"rewards": [{"name": "exact"}], "answer_field": "q"}, True),  # (a silly mapping, but its reference scores)
])
def test_the_reply_takes_the_form_the_instruction_asks_for(bare_answers, overrides, accepted):
    config = TrainConfig.from_dict(file_config(bare_answers, **overrides), dry_run=False)
    problem = reward_dry_run_error(config)
    assert (problem == "") == accepted, problem


def test_the_error_reads_as_the_issue_asks(bare_answers):
    with pytest.raises(FieldErrors) as err:
        TrainConfig.from_dict(file_config(bare_answers), dry_run=True)
    assert set(err.value.errors) == {"rewards"}
    message = err.value.errors["rewards"]
    assert message.startswith(BARE_REASON) and "A correct answer would not be rewarded" in message
    with pytest.raises(FieldErrors) as err:  # the instruction asks for a tag; exact sees the tag too
        TrainConfig.from_dict(file_config(bare_answers, rewards=[{"name": "exact"}],
                                          answer_instruction="Answer in <answer></answer>."), dry_run=True)
    assert err.value.errors["rewards"].startswith(
        'the exact verifier scores the first row\'s reference answer "42" (given as "<answer>42</answer>") 0.0 '
        '(expected "42", got "<answer>42</answer>")')
    # without dry_run (a worker re-reading a stored config, an evaluation) nothing is run
    assert TrainConfig.from_dict(file_config(bare_answers), dry_run=False).task == "file"


def test_a_verifier_that_cannot_judge_the_row_is_named(bare_answers):
    with pytest.raises(FieldErrors) as err:  # a file row is not a reasoning-gym entry: every sample would fail
        TrainConfig.from_dict(file_config(bare_answers, rewards=[{"name": "reasoning_gym"}],
                                          answer_instruction="Answer in <answer></answer>."), dry_run=True)
    assert "the reasoning_gym verifier cannot judge the first row's reference answer" in err.value.errors["rewards"]
    assert "not a reasoning-gym entry" in err.value.errors["rewards"]


def test_a_latex_reference_goes_through_math_verify_and_scores():
    from training.reward_dry_run import dry_run_verifier

    # outside the fast grammar: math-verify in the verifier's worker process, without the dry-run's time limit
    assert dry_run_verifier({"name": "math"}, {"answer": "\\frac{\\pi}{2}"}, BOXED) == ""
    assert "0.0" in dry_run_verifier({"name": "math"}, {"answer": "\\frac{\\pi}{2}"}, "")  # bare: no marker


def test_code_and_judge_verifiers_are_not_dry_run_and_start_no_process(tmp_path):
    path = tmp_path / "code.jsonl"
    path.write_text(json.dumps({"q": "Write f.", "a": "def f(): return 1", "t": "assert f() == 2"}) + "\n")
    config = TrainConfig.from_dict(file_config(str(path), data_fields={"tests": "t"},
                                               rewards=[{"name": "code"}, {"name": "ifeval"}]), dry_run=False)
    before = child_pids()
    started = time.monotonic()
    # the reference program fails its own test, yet nothing complains: the sandbox was never asked
    assert reward_dry_run_error(config) == ""
    assert time.monotonic() - started < 1.0
    assert child_pids() <= before


@register_verifier("_dry_run_slow")
def _slow(completion, example):
    time.sleep(3)  # the slow verifier itself (what the time limit is for), not a wait in the test
    return VerifierResult(0.0, {"reason": "too late to matter"})


def test_the_dry_run_is_time_limited(monkeypatch):
    monkeypatch.setattr("training.reward_dry_run.DRY_RUN_VERIFIERS", ("_dry_run_slow",))
    started = time.monotonic()
    assert dry_run_rewards([{"name": "_dry_run_slow"}], {"answer": "1"}, "", timeout_s=0.3) == ""
    assert time.monotonic() - started < 1.5
    assert "too late" not in dry_run_rewards([{"name": "_dry_run_slow"}], {"answer": "1"}, "", timeout_s=0.3)


def test_a_sweep_is_refused_on_the_form_and_a_grid_point_that_breaks_it_is_named(client_in, model_dir, bare_answers,
                                                                                 user):
    response = client_in.post(reverse("sweeps:new"), form_data(model_dir, **file_config(bare_answers)))
    assert response.status_code == 400
    assert BARE_REASON in " ".join(response.context["form"].errors["rewards"])
    assert not Sweep.objects.exists()
    good = {**file_config(bare_answers), "model_path": model_dir, "answer_instruction": BOXED}
    with pytest.raises(FieldErrors) as err:  # the base is fine; one point of the grid is not
        sweep_services.sweep_create(config=good, seeds=[0], concurrency=1, user=user,
                                    grid={"answer_instruction": [BOXED, "Just the number."]})
    assert err.value.errors["grid"].startswith("answer_instruction='Just the number.': ")
    assert BARE_REASON in err.value.errors["grid"]
    sweep = sweep_services.sweep_create(config=good, seeds=[0, 1], concurrency=1, user=user,
                                        grid={"answer_instruction": [BOXED, "Answer: <n>, last."], "lr": [1e-4]})
    assert sweep.runs.count() == 4


def test_the_training_cli_refuses_the_config_naming_the_field(tmp_path, bare_answers, model_dir):
    config = tmp_path / "run.json"
    config.write_text(json.dumps({**file_config(bare_answers), "model_path": model_dir}))
    result = subprocess.run([sys.executable, "-m", "training", "run", str(config), "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert f"rewards: {BARE_REASON}" in result.stderr, result.stderr
    assert not (tmp_path / "out").exists()
