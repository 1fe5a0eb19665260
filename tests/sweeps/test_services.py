"""webapp.sweeps.services on the real database (SQLite, and PostgreSQL in the suite's second pass)."""
from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.db.models import Q

from tests.sweeps.conftest import log_points, make_running
from training.fields import FieldErrors
from webapp.runs import services as run_services
from webapp.runs.models import Run, RunStatus
from webapp.sweeps import services
from webapp.sweeps.models import Alert, FreeSlotUse, PolicyDecision, SweepPlan

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

MEDIAN = {"name": "median", "metric": "reward/mean", "grace_steps": 2, "min_peers": 2, "smoothing": "none"}


def holding(sweep) -> int:
    """Runs holding a slot: running, or queued and already sent to the broker (runs.services' rule)."""
    return sweep.runs.filter(Q(status=RunStatus.RUNNING) | Q(status=RunStatus.QUEUED, enqueued_at__isnull=False)).count()


def launch(config, seeds, concurrency, capture, **kwargs):
    with capture(execute=False) as callbacks:
        sweep = services.sweep_create(config=config, seeds=seeds, concurrency=concurrency, **kwargs)
    return sweep, callbacks


def test_a_grid_times_seeds_launches_every_run_queued_and_only_concurrency_of_them_sent(
        config, django_capture_on_commit_callbacks):
    sweep, callbacks = launch(config, [3, 4], 2, django_capture_on_commit_callbacks,
                              grid={"lr": [1e-4, 2e-4], "eps_high": [0.28]}, policy=MEDIAN)
    runs = list(sweep.runs.order_by("pk"))
    assert [(r.seed, r.config["lr"], r.config["eps_high"]) for r in runs] == [
        (3, 1e-4, 0.28), (3, 2e-4, 0.28), (4, 1e-4, 0.28), (4, 2e-4, 0.28)]
    assert all(r.status == RunStatus.QUEUED for r in runs)
    assert len(callbacks) == 3 and holding(sweep) == 2  # two runs sent, and the first check (its feasibility note)
    assert sweep.policy == {**MEDIAN, "max_steps": 20}  # the horizon is the runs' total_steps
    assert SweepPlan.objects.get(sweep=sweep).grid == {"lr": [1e-4, 2e-4], "eps_high": [0.28]}


@pytest.mark.parametrize("kwargs, field, message", [
    ({"grid": {"no_such_knob": [1]}}, "grid", "not a config knob"),
    ({"grid": {"seed": [1, 2]}}, "grid", "cannot be varied"),
    ({"grid": {"lr": [1e-4, -1.0]}}, "grid", "lr=-1.0"),
    ({"grid": {"lr": [1], "eps_low": [0.1], "eps_high": [0.3], "kl_coef": [0.0]}}, "grid", "at most 3 knobs"),
    ({"policy": {**MEDIAN, "min_peers": 0}}, "policy.min_peers", "at least 1"),
    ({"policy": {**MEDIAN, "grace": 3}}, "policy.grace", "unknown key"),
    ({"policy": {"name": "threshold", "metric": "entropy"}}, "policy.lower_bound", "set at least one"),
    ({"seeds": [1, 1]}, "seeds", "distinct"),
    ({"concurrency": 0}, "concurrency", "at least 1"),
    ({"free_slot_use": "extend"}, "extend_steps", "at least 1"),
    ({"alert_bounds": {"entropy_floor": 0.1}}, "alert_bounds", "unknown alert bound"),
])
def test_bad_sweeps_are_refused_naming_the_field(config, kwargs, field, message):
    args = {"config": config, "seeds": [1, 2], "concurrency": 2, **kwargs}
    with pytest.raises(FieldErrors) as exc:
        services.sweep_create(**args)
    assert field in exc.value.errors and message in exc.value.errors[field]
    assert not Run.objects.exists()


def four_running_and_one_queued(config, capture, **kwargs):
    sweep, _ = launch(config, [0, 1, 2, 3, 4], 4, capture, policy=MEDIAN, **kwargs)
    runs = list(sweep.runs.order_by("pk"))
    for run in runs[:4]:
        make_running(run)
    for run, value in zip(runs[:4], (0.5, 0.5, 0.5, 0.1)):
        log_points(run, "reward/mean", [value] * 5)
    return sweep, runs


def test_the_policy_stops_the_poor_seed_once_with_its_numbers_and_the_queued_seed_takes_the_slot(
        config, django_capture_on_commit_callbacks):
    sweep, runs = four_running_and_one_queued(config, django_capture_on_commit_callbacks)
    poor, waiting = runs[3], runs[4]

    decisions = services.sweep_apply_policy(sweep_id=sweep.pk)
    assert [(d.run_id, d.action, d.rule, d.step, d.value, d.threshold, d.n_peers) for d in decisions] == [
        (poor.pk, "stop", "median", 2, 0.1, 0.5, 3)]  # the first step past the grace period
    assert decisions[0].outcome == "applied" and f"run {waiting.pk}" in decisions[0].note
    poor.refresh_from_db()
    assert poor.kill_requested_at is not None and poor.killed_by == "policy:median"
    assert "below the median 0.5 of 3 peers" in poor.kill_reason

    # applied again (the next flush, the beat, another process): the same curves decide nothing new
    log_points(poor, "reward/mean", [0.05], start=6)  # logged while it winds down: not evidence
    assert services.sweep_apply_policy(sweep_id=sweep.pk) == []
    assert services.sweep_apply_policy(sweep_id=sweep.pk) == []
    assert PolicyDecision.objects.filter(sweep=sweep).count() == 1

    # the loop honours the kill: the slot goes to the queued seed at once, never above the limit
    assert holding(sweep) == 4
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run_services.run_finish(run_id=poor.pk, status=RunStatus.KILLED)
    waiting.refresh_from_db()
    assert waiting.enqueued_at is not None and len(callbacks) == 1
    assert holding(sweep) == 4


def test_a_poor_run_ahead_of_its_peers_is_judged_once_they_reach_its_steps(config, django_capture_on_commit_callbacks):
    sweep, _ = launch(config, [0, 1, 2], 3, django_capture_on_commit_callbacks, policy=MEDIAN)
    fast, slow, slower = [make_running(r) for r in sweep.runs.order_by("pk")]
    log_points(fast, "reward/mean", [0.1] * 10)
    log_points(slow, "reward/mean", [0.6])
    # nobody else has reached the fast run's steps past the grace period: no peers, no decision yet
    assert services.sweep_apply_policy(sweep_id=sweep.pk) == []
    log_points(slow, "reward/mean", [0.6] * 5, start=2)
    log_points(slower, "reward/mean", [0.5] * 4)
    [decision] = services.sweep_apply_policy(sweep_id=sweep.pk)
    # judged at step 2 (grace), where its peers now have values, although it has reached step 10
    assert (decision.run_id, decision.step, decision.n_peers, decision.threshold) == (fast.pk, 2, 2, 0.55)


def test_a_decision_is_stored_once_per_run_and_action(config, django_capture_on_commit_callbacks):
    sweep, runs = four_running_and_one_queued(config, django_capture_on_commit_callbacks)
    fields = dict(sweep=sweep, run=runs[0], action="stop", rule="median", step=3, value=0.1, threshold=0.5,
                  reason="r")
    PolicyDecision.objects.create(**fields)
    with pytest.raises(IntegrityError), transaction.atomic():
        PolicyDecision.objects.create(**fields)


def test_runs_ended_otherwise_are_never_judged_but_still_count_as_peers(config, django_capture_on_commit_callbacks):
    sweep, runs = four_running_and_one_queued(config, django_capture_on_commit_callbacks)
    run_services.run_kill(run_id=runs[3].pk, killed_by="user:ada", reason="by hand")
    assert services.sweep_apply_policy(sweep_id=sweep.pk) == []
    assert Run.objects.get(pk=runs[3].pk).killed_by == "user:ada"


def test_manual_sweeps_decide_nothing(config, django_capture_on_commit_callbacks):
    sweep, _ = launch(config, [0, 1, 2], 3, django_capture_on_commit_callbacks, policy={"name": "manual"})
    for run, value in zip(sweep.runs.all(), (0.9, 0.9, 0.0)):
        log_points(make_running(run), "reward/mean", [value] * 6)
    assert sweep.policy == {} and services.sweep_apply_policy(sweep_id=sweep.pk) == []


def three_running(config, capture, **kwargs):
    sweep, _ = launch(config, [0, 1, 2], 3, capture, policy=MEDIAN, **kwargs)
    runs = [make_running(r) for r in sweep.runs.order_by("pk")]
    for run, value in zip(runs, (0.5, 0.4, 0.1)):
        log_points(run, "reward/mean", [value] * 5)
    return sweep, runs


def test_with_no_seed_queued_a_freed_slot_starts_a_fresh_seed_the_budget_can_pay_for(
        config, django_capture_on_commit_callbacks):
    # 3 runs of 20 steps at step 5, a budget of 4 runs = 80 steps
    sweep, runs = three_running(config, django_capture_on_commit_callbacks, free_slot_use=FreeSlotUse.NEW_SEED,
                                budget=4)
    [decision] = services.sweep_apply_policy(sweep_id=sweep.pk)
    assert decision.run_id == runs[2].pk
    fresh = sweep.runs.order_by("pk").last()
    assert fresh.seed == 3 and fresh.status == RunStatus.QUEUED and fresh.enqueued_at is None
    assert fresh.config["total_steps"] == 20 and "fresh seed 3" in decision.note and "budget 4 runs: " in decision.note
    sweep.refresh_from_db()
    assert sweep.seeds == [0, 1, 2, 3] and SweepPlan.objects.get(sweep=sweep).new_seeds_started == 1
    use = services.budget_use(sweep, SweepPlan.objects.get(sweep=sweep))
    # spent: what every run ran; committed: the two live runs' rest and the fresh seed's 20 (not the stopped one's)
    steps = [Run.objects.get(pk=r.pk).last_step for r in runs]
    assert (use.spent, use.committed) == (sum(steps), 20 - steps[0] + 20 - steps[1] + 20)
    assert use.spent + use.committed <= 80 and use.may_start_seed == (use.left >= 20)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run_services.run_finish(run_id=runs[2].pk, status=RunStatus.KILLED)
    fresh.refresh_from_db()
    assert fresh.enqueued_at is not None and len(callbacks) == 1 and sweep.runs.count() == 4


def test_a_freed_slot_starts_no_seed_the_budget_cannot_pay_for_to_its_end(config, django_capture_on_commit_callbacks):
    sweep, runs = three_running(config, django_capture_on_commit_callbacks, free_slot_use=FreeSlotUse.NEW_SEED,
                                budget=3)
    # the median rule ranks run 2 last, but its 15 steps left cannot start a 20-step seed within 3 runs: with a
    # budget a ranking stop is made only when it funds a new seed (policies.budget.stops_fund_a_seed), since a
    # stopped seed's unused rest buys nothing and loses its chance of ending best
    assert services.sweep_apply_policy(sweep_id=sweep.pk) == []
    assert sweep.runs.count() == 3 and {r.status for r in sweep.runs.all()} == {RunStatus.RUNNING}
    use = services.budget_use(sweep, SweepPlan.objects.get(sweep=sweep))
    assert not use.may_start_seed


def test_a_stop_the_budget_withholds_is_said_on_the_kept_runs_row(config, django_capture_on_commit_callbacks,
                                                                  client_in):
    from django.urls import reverse

    from webapp.sweeps.selectors import sweep_panel

    sweep, runs = three_running(config, django_capture_on_commit_callbacks, free_slot_use=FreeSlotUse.NEW_SEED,
                                budget=3)
    assert services.sweep_apply_policy(sweep_id=sweep.pk) == []
    why = ("would be stopped at step 5 (median), but no new seed could use its steps: budget 3 runs: 0.8 spent, "
           "2.2 committed; the 0.8 runs it frees and the 0.0 left are less than the 1 run a new seed needs")
    assert SweepPlan.objects.get(sweep=sweep).policy_held == {str(runs[2].pk): why}
    rows = {row["id"]: row for row in sweep_panel(sweep=sweep, metric="reward/mean")["runs"]}
    assert [rows[r.pk]["held"] for r in runs] == [None, None, why]
    html = client_in.get(reverse("sweeps:panel", args=[sweep.pk]), {"metric": "reward/mean"}).content.decode()
    assert f'<span class="held">kept: {why}</span>' in html and html.count('class="held"') == 1
    # once the run ends otherwise its row says how it ended, not why it was kept
    run_services.run_finish(run_id=runs[2].pk, status=RunStatus.FAILED, error="out of memory")
    rows = {row["id"]: row for row in sweep_panel(sweep=sweep, metric="reward/mean")["runs"]}
    assert rows[runs[2].pk]["held"] is None


def test_a_run_that_ends_otherwise_with_budget_left_gives_its_slot_to_a_fresh_seed(config, django_capture_on_commit_callbacks):
    sweep, runs = three_running(config, django_capture_on_commit_callbacks, free_slot_use=FreeSlotUse.NEW_SEED,
                                budget=5)
    with django_capture_on_commit_callbacks(execute=False):
        run_services.run_finish(run_id=runs[0].pk, status=RunStatus.FAILED, error="out of memory")
    fresh = sweep.runs.order_by("pk").last()
    assert (fresh.seed, fresh.enqueued_at is not None) == (3, True)
    assert SweepPlan.objects.get(sweep=sweep).new_seeds_started == 1


def test_with_no_seed_queued_a_freed_slot_extends_the_best_survivor_which_then_resumes(
        config, django_capture_on_commit_callbacks):
    sweep, runs = three_running(config, django_capture_on_commit_callbacks, free_slot_use=FreeSlotUse.EXTEND,
                                extend_steps=10)
    assert sweep.policy["extend_survivors_by"] == 10
    decisions = services.sweep_apply_policy(sweep_id=sweep.pk)
    assert [(d.run_id, d.action, d.outcome) for d in decisions] == [
        (runs[2].pk, "stop", "applied"), (runs[0].pk, "extend", "applied")]
    best = Run.objects.get(pk=runs[0].pk)
    assert best.total_steps == 30 and decisions[1].extra_steps == 10
    assert services.sweep_apply_policy(sweep_id=sweep.pk) == []  # once

    # the loop finishes the 20 steps it started with: the run goes back to the queue to resume to 30
    log_points(best, "reward/mean", [0.5] * 15, start=6)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run_services.run_finish(run_id=best.pk, status=RunStatus.SUCCEEDED)
    best.refresh_from_db()
    assert best.status == RunStatus.QUEUED and best.enqueued_at is not None and len(callbacks) == 1
    # a run that was not extended simply succeeds
    log_points(runs[1], "reward/mean", [0.4] * 15, start=6)
    run_services.run_finish(run_id=runs[1].pk, status=RunStatus.SUCCEEDED)
    assert Run.objects.get(pk=runs[1].pk).status == RunStatus.SUCCEEDED


def test_an_extension_is_skipped_while_a_seed_is_queued(config, django_capture_on_commit_callbacks):
    sweep, runs = four_running_and_one_queued(config, django_capture_on_commit_callbacks,
                                              free_slot_use=FreeSlotUse.EXTEND, extend_steps=5)
    decisions = services.sweep_apply_policy(sweep_id=sweep.pk)
    assert [(d.action, d.outcome) for d in decisions] == [("stop", "applied"), ("extend", "skipped")]
    assert "queued seed" in decisions[1].note
    assert all(r.total_steps == 20 for r in sweep.runs.all())


@pytest.mark.parametrize("extend_steps, outcome", [(15, "applied"), (16, "skipped")])
def test_with_a_budget_a_survivor_is_extended_only_while_the_budget_pays_for_its_extra_steps(
        config, django_capture_on_commit_callbacks, extend_steps, outcome):
    # 3 runs of 20 steps at step 5, budget 3 runs = 60 steps: spent 15, the two kept runs commit 30 (the stopped
    # one's rest goes back): 15 steps left pay for an extension of 15, not of 16
    sweep, runs = three_running(config, django_capture_on_commit_callbacks, free_slot_use=FreeSlotUse.EXTEND,
                                extend_steps=extend_steps, budget=3)
    decisions = services.sweep_apply_policy(sweep_id=sweep.pk)
    assert [(d.run_id, d.action, d.outcome) for d in decisions] == [
        (runs[2].pk, "stop", "applied"), (runs[0].pk, "extend", outcome)]
    assert Run.objects.get(pk=runs[0].pk).total_steps == (20 + extend_steps if outcome == "applied" else 20)
    if outcome == "skipped":
        assert decisions[1].note == (f"the budget cannot pay for {extend_steps} more steps (budget 3 runs: 0.8 "
                                     f"spent, 1.5 committed, 0.8 left)")


def test_multi_kill_refuses_runs_that_already_ended_or_belong_elsewhere(config, django_capture_on_commit_callbacks):
    sweep, runs = three_running(config, django_capture_on_commit_callbacks)
    Run.objects.filter(pk=runs[0].pk).update(last_step=20)  # it logged all its steps
    run_services.run_finish(run_id=runs[0].pk, status=RunStatus.SUCCEEDED)
    killed, refused = services.sweep_kill_runs(sweep_id=sweep.pk, run_ids=[runs[0].pk, runs[1].pk, 99999],
                                               killed_by="user:ada", reason="poor")
    assert killed == [runs[1].pk]
    assert "already ended" in refused[runs[0].pk] and "not part of sweep" in refused[99999]
    assert Run.objects.get(pk=runs[1].pk).kill_reason == "poor"


def test_alerts_are_raised_once_per_run_and_kind(config, django_capture_on_commit_callbacks):
    sweep, runs = three_running(config, django_capture_on_commit_callbacks)
    log_points(runs[0], "entropy", [0.6, 0.02, 0.0, 0.0, 0.0])
    log_points(runs[1], "entropy", [0.6, 0.5, 0.55, 0.6, 0.58])
    log_points(runs[1], "length/clipped_frac", [0.9] * 5)
    new = services.sweep_check_alerts(sweep_id=sweep.pk)
    assert sorted((a.run_id, a.kind) for a in new) == sorted(
        [(runs[0].pk, "entropy_collapse"), (runs[1].pk, "length_at_cap")])
    assert services.sweep_check_alerts(sweep_id=sweep.pk) == []
    assert Alert.objects.filter(sweep=sweep).count() == 2


def test_a_flush_requests_a_check_at_most_once_a_second_per_sweep_and_the_check_applies_the_policy(
        config, django_capture_on_commit_callbacks):
    from datetime import timedelta

    from django.utils import timezone

    sweep, runs = three_running(config, django_capture_on_commit_callbacks)
    now = timezone.now()
    with django_capture_on_commit_callbacks() as sent:
        assert services.sweep_request_check(run_id=runs[0].pk, now=now)
        # another run of the same sweep (another process) half a second later: already requested
        assert not services.sweep_request_check(run_id=runs[1].pk, now=now + timedelta(seconds=0.5))
        assert services.sweep_request_check(run_id=runs[1].pk, now=now + timedelta(seconds=1.1))
        run_alone = run_services.run_create(config=config, name="alone")
        assert not services.sweep_request_check(run_id=run_alone.pk)  # not in a sweep
    assert len(sent) == 3  # two checks and the lone run's own dispatch
    assert PolicyDecision.objects.filter(sweep=sweep).count() == 0  # requesting decides nothing
    stopped = services.sweep_check(sweep_id=sweep.pk)  # what the sweep_check task runs
    assert PolicyDecision.objects.filter(sweep=sweep).count() == 1
    assert stopped == [PolicyDecision.objects.get(sweep=sweep).run_id]


def test_checks_are_paced_by_the_last_replays_cost_and_the_maintenance_pass_claims_its_check_too(
        config, django_capture_on_commit_callbacks):
    from datetime import timedelta

    from django.utils import timezone

    from webapp.sweeps.policy_check import PACE

    sweep, runs = three_running(config, django_capture_on_commit_callbacks)
    services.sweep_apply_policy(sweep_id=sweep.pk)
    cost = SweepPlan.objects.get(sweep=sweep).policy_check_s
    assert 0 < cost < 60  # the replay's measured seconds
    SweepPlan.objects.filter(sweep=sweep).update(policy_check_s=0.5)  # a replay of half a second: one per 5 s
    now = timezone.now()
    assert services.claim_policy_check(sweep_id=sweep.pk, now=now)
    assert not services.claim_policy_check(sweep_id=sweep.pk, now=now + timedelta(seconds=PACE * 0.5 - 0.1))
    assert services.claim_policy_check(sweep_id=sweep.pk, now=now + timedelta(seconds=PACE * 0.5 + 0.1))
    # the beat's pass (claim=True) replays nothing while a check is not due (the cost stored stays), then does
    with django_capture_on_commit_callbacks(execute=True):
        services.sweep_check(sweep_id=sweep.pk, claim=True)
    assert SweepPlan.objects.get(sweep=sweep).policy_check_s == 0.5
    SweepPlan.objects.filter(sweep=sweep).update(policy_checked_at=now - timedelta(seconds=60))
    with django_capture_on_commit_callbacks(execute=True):
        services.sweep_check(sweep_id=sweep.pk, claim=True)
    assert SweepPlan.objects.get(sweep=sweep).policy_check_s != 0.5


def test_sweep_respects_its_concurrency_and_hands_slots_on(config, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        sweep = services.sweep_create(config=config, seeds=[0, 1, 2, 3], concurrency=2, name="s")
    runs = list(sweep.runs.order_by("pk"))
    assert [r.seed for r in runs] == [0, 1, 2, 3]
    assert [r.enqueued_at is not None for r in runs] == [True, True, False, False]
    assert len(callbacks) == 2
    make_running(runs[0])
    Run.objects.filter(pk=runs[0].pk).update(last_step=20)  # it logged all its steps
    with django_capture_on_commit_callbacks() as callbacks:
        run_services.run_finish(run_id=runs[0].pk, status=RunStatus.FAILED, error="out of memory")
    assert len(callbacks) == 1
    assert Run.objects.get(pk=runs[2].pk).enqueued_at is not None
    assert Run.objects.get(pk=runs[3].pk).enqueued_at is None
    # killing a queued, not yet sent run frees nothing: still two hold a slot (runs 1 and 2)
    with django_capture_on_commit_callbacks() as callbacks:
        run_services.run_kill(run_id=runs[3].pk, killed_by="user:ada")
    assert callbacks == []


def test_sweep_create_refuses_bad_seeds_and_concurrency(config):
    with pytest.raises(FieldErrors) as err:
        services.sweep_create(config=config, seeds=[1, 1], concurrency=2)
    assert "seeds" in err.value.errors
    with pytest.raises(FieldErrors) as err:
        services.sweep_create(config=config, seeds=[1, 2], concurrency=0)
    assert "concurrency" in err.value.errors
    assert Run.objects.count() == 0
