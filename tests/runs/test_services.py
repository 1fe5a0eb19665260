from datetime import timedelta

import pytest
from django.utils import timezone

from training.fields import FieldErrors
from webapp.projects.models import AuditEvent
from webapp.runs import services
from webapp.runs.models import Checkpoint, MetricPoint, Run, RunStatus, Sample

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def make_running(run, *, heartbeat_age_s=0.0):
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=timezone.now(),
                                         heartbeat_at=timezone.now() - timedelta(seconds=heartbeat_age_s))
    run.refresh_from_db()
    return run


def test_run_create_stores_the_validated_config_and_enqueues_after_commit(config, user,
                                                                         django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        run = services.run_create(config={**config, "seed": "42"}, user=user, name="first")
    assert run.status == RunStatus.QUEUED
    assert run.seed == 42 and run.config["seed"] == 42
    assert run.config["kl_coef"] == 0.04  # the grpo preset was applied
    assert run.config["eps_high"] == 0.2 and run.queue == "cpu"
    assert run.enqueued_at is not None
    assert len(callbacks) == 1


def test_run_create_rejects_a_bad_config_and_creates_nothing(config, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks, pytest.raises(FieldErrors) as err:
        services.run_create(config={**config, "eps_low": 0.3, "eps_high": 0.2, "group_size": 1})
    assert set(err.value.errors) == {"eps_high", "group_size"}
    assert Run.objects.count() == 0 and callbacks == []


def test_run_start_claims_a_queued_run_once(config):
    run = services.run_create(config=config)
    assert services.run_start(run_id=run.pk, worker="w:1") == "start"
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.worker == "w:1" and run.attempts == 1
    # a re-delivered copy of the task while the first one heartbeats: nothing to do
    assert services.run_start(run_id=run.pk, worker="w:2") == "skip"
    run.refresh_from_db()
    assert run.worker == "w:1" and run.attempts == 1


def test_run_start_resumes_a_run_whose_worker_died(config, settings):
    run = make_running(services.run_create(config=config), heartbeat_age_s=settings.SEEDBED_LOST_AFTER_S + 5)
    assert services.run_start(run_id=run.pk, worker="w:2") == "resume"
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.worker == "w:2" and run.attempts == 1


@pytest.mark.parametrize("status", [RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.KILLED])
def test_run_start_does_nothing_for_a_finished_run(config, status):
    run = services.run_create(config=config)
    Run.objects.filter(pk=run.pk).update(status=status)
    assert services.run_start(run_id=run.pk, worker="w") == "skip"
    run.refresh_from_db()
    assert run.status == status


def test_illegal_transitions_are_refused_loudly(config):
    run = services.run_create(config=config)
    with pytest.raises(services.TransitionError, match="queued; it cannot become succeeded"):
        services.run_finish(run_id=run.pk, status=RunStatus.SUCCEEDED)
    make_running(run)
    Run.objects.filter(pk=run.pk).update(last_step=run.total_steps)  # it logged all its steps
    services.run_finish(run_id=run.pk, status=RunStatus.SUCCEEDED)
    with pytest.raises(services.TransitionError, match="already ended"):
        services.run_kill(run_id=run.pk, killed_by="user:ada")
    with pytest.raises(services.TransitionError):
        services.run_finish(run_id=run.pk, status=RunStatus.FAILED)
    with pytest.raises(services.TransitionError):
        services.run_resume(run_id=run.pk)
    with pytest.raises(ValueError, match="not an end status"):
        services.run_finish(run_id=run.pk, status=RunStatus.RUNNING)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED


def test_kill_of_a_running_run_only_raises_the_flag(config):
    run = make_running(services.run_create(config=config))
    services.run_kill(run_id=run.pk, killed_by="user:ada", reason="flat reward")
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING  # the loop ends it (or the worker after the grace period)
    assert run.kill_requested_at is not None and run.killed_by == "user:ada" and run.kill_reason == "flat reward"
    with pytest.raises(services.TransitionError, match="already being killed"):
        services.run_kill(run_id=run.pk, killed_by="user:bob")
    services.run_finish(run_id=run.pk, status=RunStatus.KILLED)
    run.refresh_from_db()
    assert run.status == RunStatus.KILLED and run.killed_by == "user:ada" and run.ended_at is not None


def test_kill_of_a_queued_run_ends_it_at_once(config):
    run = services.run_create(config=config)
    services.run_kill(run_id=run.pk, killed_by="user:ada")
    run.refresh_from_db()
    assert run.status == RunStatus.KILLED and run.ended_at is not None
    assert services.run_start(run_id=run.pk, worker="w") == "skip"


def test_stale_heartbeats_mark_runs_lost_and_fresh_ones_do_not(config):
    config = {**config, "max_restarts": 0}  # (no automatic restart: see the next test)
    stale = make_running(services.run_create(config=config), heartbeat_age_s=61)
    fresh = make_running(services.run_create(config=config), heartbeat_age_s=30)
    assert services.runs_mark_lost() == [stale.pk]
    stale.refresh_from_db(), fresh.refresh_from_db()
    assert stale.status == RunStatus.LOST and "no heartbeat" in stale.error and stale.failure_kind == "lost_worker"
    assert fresh.status == RunStatus.RUNNING
    assert services.run_heartbeat(run_id=stale.pk) is False  # a lost run's worker must stop
    assert services.run_heartbeat(run_id=fresh.pk) is True


def test_a_lost_worker_restarts_the_run_from_its_checkpoint_with_backoff_then_gives_up(
        config, django_capture_on_commit_callbacks):
    from webapp.projects.models import AuditEvent

    run = make_running(services.run_create(config={**config, "max_restarts": 2}), heartbeat_age_s=61)
    Checkpoint.objects.create(run=run, step=3, path="/x/step_000003")
    for restart, delay in ((1, 10), (2, 20)):
        assert services.runs_mark_lost() == [run.pk]
        run.refresh_from_db()
        assert run.status == RunStatus.QUEUED and run.restarts == restart and run.worker == ""
        assert run.dispatch_note.startswith(f"restart {restart} of 2 in {delay} s, from step 3: worker lost")
        assert abs((run.retry_at - run.enqueued_at).total_seconds() - delay) < 1
        event = AuditEvent.objects.filter(action="run.restart", target_id=run.pk).latest("pk")
        assert event.actor_name == "reconciler" and event.detail["from_step"] == 3
        with django_capture_on_commit_callbacks() as sent:
            assert services.runs_redispatch(older_than_s=0) == []  # not before its backoff
        assert sent == []
        Run.objects.filter(pk=run.pk).update(retry_at=timezone.now())
        with django_capture_on_commit_callbacks() as sent:
            assert services.runs_redispatch(older_than_s=0) == [run.pk]
        assert len(sent) == 1
        assert services.run_start(run_id=run.pk, worker="w2") == "start"
        run = make_running(run, heartbeat_age_s=61)
    assert services.runs_mark_lost() == [run.pk]
    run.refresh_from_db()
    assert run.status == RunStatus.LOST and "gave up after 2 automatic restart(s)" in run.error


def test_metrics_append_replaces_a_steps_points_and_tracks_the_last_step(config):
    run = services.run_create(config=config)
    services.run_metrics_append(run_id=run.pk, points=[(1, "reward/mean", 0.1), (1, "entropy", 2.0),
                                                       (2, "reward/mean", float("nan"))])
    services.run_metrics_append(run_id=run.pk, points=[(2, "reward/mean", 0.3)])
    run.refresh_from_db()
    assert run.last_step == 2
    assert dict(run.metrics.filter(key="reward/mean").values_list("step", "value")) == {1: 0.1, 2: 0.3}
    services.run_metrics_append(run_id=run.pk, points=[(3, "entropy", float("inf"))])
    assert MetricPoint.objects.get(run=run, step=3).value is None  # non-finite: stored as a gap


def test_discard_after_forgets_what_follows_a_checkpoint(config):
    run = services.run_create(config=config)
    services.run_metrics_append(run_id=run.pk, points=[(s, "reward/mean", s / 10) for s in range(1, 6)])
    services.run_samples_append(run_id=run.pk, step=4, rows=[{"prompt": "1+1=", "completion": "2", "reward": 1.0}])
    services.run_checkpoint_add(run_id=run.pk, step=3, path="/x/ckpt-3")
    services.run_discard_after(run_id=run.pk, step=3)
    run.refresh_from_db()
    assert sorted(run.metrics.values_list("step", flat=True)) == [1, 2, 3]
    assert Sample.objects.filter(run=run).count() == 0 and run.last_step == 3
    assert Checkpoint.objects.get(run=run).step == 3


def test_resume_puts_a_killed_run_back_in_the_queue(config, django_capture_on_commit_callbacks):
    run = services.run_create(config=config)
    services.run_kill(run_id=run.pk, killed_by="user:ada")
    with django_capture_on_commit_callbacks() as callbacks:
        services.run_resume(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and run.kill_requested_at is None and run.killed_by == ""
    assert len(callbacks) == 1
    # who killed it, why and at which step stays in the run's history (its Activity on the run page)
    resumed = AuditEvent.objects.get(action="run.resume", target_id=run.pk)
    assert resumed.detail == {"was": "killed", "at_step": 0, "killed_by": "user:ada"}


@pytest.mark.parametrize("outcome, forced, kill, expected, error", [
    ("succeeded", False, False, RunStatus.SUCCEEDED, ""),
    ("failed", False, False, RunStatus.FAILED, "exit code 1"),
    ("stopped", False, False, RunStatus.QUEUED, "worker shut down"),
    ("stopped", False, True, RunStatus.KILLED, ""),
    ("failed", True, True, RunStatus.KILLED, "terminated after the kill grace period"),
])
def test_the_exit_of_a_training_process_is_turned_into_the_runs_end(config, outcome, forced, kill, expected, error,
                                                                      django_capture_on_commit_callbacks):
    run = make_running(services.run_create(config=config))
    Run.objects.filter(pk=run.pk).update(last_step=run.total_steps)
    if kill:
        services.run_kill(run_id=run.pk, killed_by="user:ada")
    with django_capture_on_commit_callbacks() as sent:
        status = services.run_record_exit(run_id=run.pk, outcome=outcome, forced=forced, detail="exit code 1")
    run.refresh_from_db()
    assert status == run.status == expected and error in run.error
    assert len(sent) == (1 if expected == RunStatus.QUEUED else 0)  # a requeued run is sent again


def test_an_exit_reported_for_a_run_that_is_no_longer_running_changes_nothing(config):
    run = make_running(services.run_create(config={**config, "max_restarts": 0}))
    services.runs_mark_lost(older_than_s=-1)
    assert services.run_record_exit(run_id=run.pk, outcome="failed", detail="late") == RunStatus.LOST
    run.refresh_from_db()
    assert run.status == RunStatus.LOST and "late" not in run.error


@pytest.mark.parametrize("status", [RunStatus.RUNNING, RunStatus.QUEUED, RunStatus.SUCCEEDED])
def test_only_a_killed_lost_or_failed_run_can_be_resumed(config, status, django_capture_on_commit_callbacks):
    run = services.run_create(config=config)
    Run.objects.filter(pk=run.pk).update(status=status, kill_requested_at=timezone.now(), killed_by="user:ada")
    with django_capture_on_commit_callbacks() as sent, pytest.raises(services.TransitionError, match="can be resumed"):
        services.run_resume(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == status and run.kill_requested_at is not None and not sent  # nothing changed


def test_a_failed_run_resumes_from_its_checkpoint(config, django_capture_on_commit_callbacks):
    run = make_running(services.run_create(config=config))
    services.run_finish(run_id=run.pk, status=RunStatus.FAILED, error="CUDA out of memory")
    with django_capture_on_commit_callbacks() as sent:
        services.run_resume(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and run.error == "" and len(sent) == 1


@pytest.mark.parametrize("metric, best", [("reward/mean", {2, 4}), ("min:reward/mean", {1, 3})])
def test_checkpoint_retention_also_keeps_the_best_by_a_metric(config, settings, tmp_path, metric, best):
    settings.SEEDBED_RUNS_DIR = str(tmp_path / "runs")
    run = services.run_create(config={**config, "keep_checkpoints": 1, "keep_best": 2, "keep_best_metric": metric})
    rewards = {1: 0.1, 2: 0.9, 3: 0.2, 4: 0.8, 5: 0.5, 6: 0.3}
    services.run_metrics_append(run_id=run.pk, points=[(s, "reward/mean", v) for s, v in rewards.items()])
    for step in range(1, 7):
        folder = run.folder / "checkpoints" / f"step_{step:06d}"
        folder.mkdir(parents=True)
        services.run_checkpoint_add(run_id=run.pk, step=step, path=str(folder))
    # the newest (6) and the two best by the metric at their step among the others
    assert set(Checkpoint.objects.filter(run=run).values_list("step", flat=True)) == best | {6}
    with pytest.raises(FieldErrors) as caught:
        services.run_create(config={**config, "keep_best_metric": "__import__('os')"})
    assert "keep_best_metric" in caught.value.errors


def test_checkpoint_retention_keeps_the_newest_and_what_runs_and_evaluations_read(config, settings, tmp_path):
    from webapp.evals.models import EvalJob, EvalModel

    settings.SEEDBED_RUNS_DIR = str(tmp_path / "runs")
    run = services.run_create(config={**config, "keep_checkpoints": 2})
    folders = {}
    for step in (1, 2, 3):
        folders[step] = run.folder / "checkpoints" / f"step_{step:06d}"
        folders[step].mkdir(parents=True)
        (folders[step] / "config.json").write_text("{}")
        services.run_checkpoint_add(run_id=run.pk, step=step, path=str(folders[step]))
    assert sorted(Checkpoint.objects.filter(run=run).values_list("step", flat=True)) == [2, 3]
    assert not folders[1].exists() and folders[2].exists()
    # a new run started from step 2, and an evaluation of step 3: both are kept when newer ones land
    services.run_create(config={**config, "model_path": str(folders[2])}, parent_run=run, parent_step=2)
    job = EvalJob.objects.create(project=run.project, task="arithmetic", problems=4, n=2, ks=[1])
    EvalModel.objects.create(job=job, position=0, label="step 3", path=str(folders[3]),
                             checkpoint=Checkpoint.objects.get(run=run, step=3))
    for step in (4, 5):
        folders[step] = run.folder / "checkpoints" / f"step_{step:06d}"
        folders[step].mkdir(parents=True)
        services.run_checkpoint_add(run_id=run.pk, step=step, path=str(folders[step]))
    assert sorted(Checkpoint.objects.filter(run=run).values_list("step", flat=True)) == [2, 3, 4, 5]
    assert folders[2].exists() and folders[3].exists()
    # a folder outside the run's own is never removed, only forgotten
    outside = run.folder.parent / "elsewhere"
    outside.mkdir()
    services.run_checkpoint_add(run_id=run.pk, step=0, path=str(outside))
    assert outside.exists() and not Checkpoint.objects.filter(run=run, step=0).exists()


def test_a_runs_wall_time_starts_at_its_first_step(config):
    run = services.run_create(config=config)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=timezone.now() - timedelta(minutes=7))
    before = timezone.now()
    services.run_metrics_append(run_id=run.pk, points=[(1, "reward/mean", 0.5), (1, "step_time_s", 2.5)])
    run.refresh_from_db()
    # its first step began 2.5 s before its metrics were stored: not 7 minutes ago, when a worker took it
    assert before - timedelta(seconds=2.6) <= run.first_step_at <= timezone.now() - timedelta(seconds=2.4)
    first = run.first_step_at
    services.run_metrics_append(run_id=run.pk, points=[(2, "reward/mean", 0.6), (2, "step_time_s", 1.0)])
    run.refresh_from_db()
    assert run.first_step_at == first  # set once
