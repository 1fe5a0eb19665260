"""A guard that stops its run (training.reward_hacking's guard with action stop) goes through the normal
kill path from the worker's sink: the warning on the run, run_kill with killed_by guard:reward_hacking, the flag
the loop's should_stop() reads; the run page and the sweep's alerts say so with the numbers. Real database, the
sink's own methods fed what the loop sends (the real run through a worker is in tests/e2e)."""
import pytest
from django.urls import reverse

from tests.conftest import tiny_config
from training.reward_hacking import completion_signals
from webapp.runs import services
from webapp.runs.models import Run, RunStatus
from webapp.sweeps import services as sweep_services
from webapp.sweeps.selectors import sweep_alerts
from workers.runner import StopFlag
from workers.sink import DatabaseSink

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

GUARD = {"action": "stop", "rules": ["same_completion"], "for_steps": 1}


def hacked_step():
    """Six of eight completions the same rewarded text, across four prompts."""
    texts = ["100000"] * 6 + ["12", "40"]
    prompts = ["1+1=", "2+2=", "3+3=", "4+4=", "1+1=", "2+2=", "3+3=", "4+4="]
    return completion_signals([(texts, prompts, [0.9] * 6 + [0.0, 0.0], {"v": [0.9] * 6 + [0.0, 0.0]},
                                [{} for _ in texts])])


def running(config):
    sweep = sweep_services.sweep_create(config=config, seeds=[0], concurrency=1, name="length pays")
    run = sweep.runs.get()
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    return run


def test_the_guard_kills_its_run_through_the_kill_path(tiny_model_dir, client_in):
    run = running(tiny_config(eval_every=2, reward_hacking_guard=GUARD))
    sink = DatabaseSink(run.pk, echo=None, reward_hacking_guard=GUARD)
    stop = StopFlag(run.pk, every_s=0)
    sink.on_metrics(1, {"reward/mean": 0.5})
    sink.on_completion_signals(2, hacked_step())
    sink.on_metrics(2, {"reward/mean": 0.9})
    run.refresh_from_db()
    (w,) = run.warnings
    assert w["kind"] == "reward_hacking" and w["step"] == 2
    assert 'one completion, "100000", is 75 % of step 2\'s 8 completions, answering 4 different prompts' in w["message"]
    assert run.killed_by == "guard:reward_hacking" and run.kill_requested_at is not None
    assert run.kill_reason.startswith('one completion, "100000", is 75 %')
    assert stop() and stop.reason == "kill requested"  # the loop stops after this step, as for any kill

    page = client_in.get(reverse("runs:state", args=[run.pk])).content.decode()
    assert 'data-warning="reward_hacking"' in page and "reward hacking? one completion" in page
    assert "guard:reward_hacking" in page
    (alert,) = [a for a in sweep_alerts(sweep_id=run.sweep_id) if a["kind"] == "reward_hacking"]
    assert alert["run_id"] == run.pk and "75 % of step 2" in alert["message"]


def test_a_warning_guard_or_a_healthy_step_leaves_the_run_running(tiny_model_dir):
    run = running(tiny_config(eval_every=2, reward_hacking_guard={**GUARD, "action": "warn"}))
    sink = DatabaseSink(run.pk, echo=None, reward_hacking_guard={**GUARD, "action": "warn"})
    sink.on_completion_signals(1, hacked_step())
    run.refresh_from_db()
    assert [w["kind"] for w in run.warnings] == ["reward_hacking"] and run.kill_requested_at is None

    quiet = running(tiny_config(eval_every=2, reward_hacking_guard=GUARD))
    sink = DatabaseSink(quiet.pk, echo=None, reward_hacking_guard=GUARD)
    sink.on_completion_signals(1, completion_signals([(["2", "4", "6", "8"], ["1+1=", "2+2=", "3+3=", "4+4="],
                                                       [1.0] * 4, {"v": [1.0] * 4}, [{}] * 4)]))
    quiet.refresh_from_db()
    assert quiet.warnings == [] and quiet.kill_requested_at is None and quiet.status == RunStatus.RUNNING


def test_a_run_already_being_killed_keeps_that_kill(tiny_model_dir):
    run = running(tiny_config(eval_every=2, reward_hacking_guard=GUARD))
    services.run_kill(run_id=run.pk, killed_by="user:ada", reason="enough")
    DatabaseSink(run.pk, echo=None, reward_hacking_guard=GUARD).on_completion_signals(1, hacked_step())
    run.refresh_from_db()
    assert run.killed_by == "user:ada" and [w["kind"] for w in run.warnings] == ["reward_hacking"]
