"""A sweep's budget in full runs (webapp.sweeps.policies.budget): the rule that says when a freed slot may start
a new seed, the what-if replay that simulates it (the same rule), and the migration from ``max_new_seeds``."""
from __future__ import annotations

import random

import numpy as np
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from webapp.sweeps.policies import replay
from webapp.sweeps.policies.budget import (BudgetUse, budget_error, committed_steps, may_extend, may_start_seed,
                                           stops_fund_a_seed)
from webapp.sweeps.policies.bayes import FRESH_SEED_MARGIN
from webapp.sweeps.policies.calibrated import continuing_gain, fresh_seed_gain, worth_continuing

pytestmark = pytest.mark.postgres  # the migration test: again on PostgreSQL

N = 20  # points of a full run
MEDIAN = {"name": "median", "metric": "m", "max_steps": N, "grace_steps": 3, "min_peers": 1, "smoothing": "none",
          "min_delta": 0.05}


def flat(level: float, n: int = N) -> list[tuple[int, float]]:
    return [(step, level) for step in range(1, n + 1)]


# --- the rule ---------------------------------------------------------------------------------------------------

def test_a_seed_starts_only_when_a_full_run_fits_in_what_is_left():
    # budget 3 runs of 10 steps = 30: spent 14 + committed 6 leaves 10, one run exactly
    assert may_start_seed(budget_runs=3, run_steps=10, spent=14, committed=6)
    assert not may_start_seed(budget_runs=3, run_steps=10, spent=14, committed=7)
    assert not may_start_seed(budget_runs=0, run_steps=10, spent=0, committed=0)


def test_committed_is_the_rest_of_each_run_under_way_and_the_summary_reads_in_runs():
    assert committed_steps([(40, 100), (0, 100), (120, 100)]) == 60 + 100 + 0
    use = BudgetUse(budget_runs=8, run_steps=100, spent=530, committed=200)
    assert (use.left, use.may_start_seed) == (70, False)
    assert use.summary() == "budget 8 runs: 5.3 spent, 2.0 committed, 0.7 left"


@pytest.mark.parametrize("budget, initial, new_seeds, message", [
    (None, 4, True, "give the budget in full runs"),
    (3, 4, True, "must be at least the 4 runs the sweep starts with"),
    (5000, 4, True, "must lie in [4, 4096] runs; got 5000"),
    (8, 4, False, "only used when freed slots start new seeds or extend survivors"),
])
def test_a_bad_budget_says_why(budget, initial, new_seeds, message):
    assert message in budget_error(budget, initial_runs=initial, new_seeds=new_seeds)


def test_a_budget_from_the_initial_runs_up_is_valid_and_none_is_valid_without_new_seeds():
    assert budget_error(4, initial_runs=4, new_seeds=True) == budget_error(None, initial_runs=4, new_seeds=False) == ""


def test_stops_are_worth_making_only_when_what_they_free_starts_a_new_seed():
    use = BudgetUse(budget_runs=8, run_steps=100, spent=500, committed=250)  # 50 steps left
    assert stops_fund_a_seed(use, freed=50) and not stops_fund_a_seed(use, freed=49)


# --- the value of compute (bayes with a budget) ---------------------------------------------------------------------

def test_a_seeds_gain_is_its_expected_improvement_on_the_other_kept_seeds_best():
    # 2 draws x 3 seeds; seed 0 beats the others' best (0.6) by 0.1 in the second draw only
    worths = np.array([[0.5, 0.6, 0.2], [0.7, 0.6, 0.3]])
    assert continuing_gain(worths, 0, kept=[0, 1, 2]) == pytest.approx(0.05)
    assert continuing_gain(worths, 1, kept=[0, 1, 2]) == pytest.approx(0.05)  # 0.6 - 0.5, then nothing
    assert continuing_gain(worths, 2, kept=[0, 1, 2]) == 0.0
    assert continuing_gain(worths, 0, kept=[0, 2]) == pytest.approx((0.3 + 0.4) / 2)  # seed 1 stopped: vs seed 2


def test_a_fresh_seed_is_a_draw_of_every_seed_in_the_race_the_stopped_ones_included():
    draws = 2000
    # seed 0 (stopped: not kept) would end at 0.9, seed 1 (kept) at 0.5: a fresh seed is seed 0's like half the time
    worths = np.tile([0.9, 0.5], (draws, 1))
    gain = fresh_seed_gain(worths, kept=[1])
    assert gain == pytest.approx(0.5 * 0.4, abs=0.03)
    # a sweep whose seeds all end alike: a fresh seed adds nothing
    assert fresh_seed_gain(np.full((draws, 3), 0.7), kept=[0, 1, 2]) == 0.0


def test_the_value_of_compute_rule_compares_gains_per_step():
    # g_j / steps left >= g_new / run steps
    assert worth_continuing(0.01, 50, 0.02, 100)        # 2e-4 per step either way: keep
    assert not worth_continuing(0.0099, 50, 0.02, 100)
    assert worth_continuing(0.0, 0, 0.02, 100)           # nothing left to save


def test_the_margin_stops_a_seed_only_when_a_fresh_seed_buys_1_over_margin_times_as_much_per_step():
    # a fresh seed buys 2e-4 per step, the seed's rest 1e-4: stopped at margin 1 and 0.5, kept below 0.5
    assert not worth_continuing(0.005, 50, 0.02, 100, margin=1.0)
    assert not worth_continuing(0.0049, 50, 0.02, 100, margin=0.5)
    assert worth_continuing(0.005, 50, 0.02, 100, margin=0.5)
    assert worth_continuing(0.001, 50, 0.02, 100, margin=0.0)   # margin 0: never stop
    assert 0 < FRESH_SEED_MARGIN <= 1


# --- the replay simulates it --------------------------------------------------------------------------------------

def test_without_stops_a_budget_of_8_runs_with_4_slots_runs_8_seeds_to_their_ends():
    curves = {f"s{i}": flat(0.5) for i in range(12)}
    result = replay({"name": "manual", "metric": "m", "max_steps": N}, curves, concurrency=4, budget=8, initial=4)
    assert sorted(result.steps_run) == sorted(f"s{i}" for i in range(8))
    assert set(result.steps_run.values()) == {N}


def test_freed_slots_start_pool_seeds_only_while_each_can_finish_within_the_budget():
    # seed "good" runs to its end; every other curve is stopped at the grace step: its rest goes back to the budget
    curves = {"good": flat(1.0), "bad": flat(0.0), **{f"pool{i}": flat(0.0) for i in range(10)}}
    result = replay(MEDIAN, curves, concurrency=2, budget=3, initial=2)
    started = [run_id for run_id in curves if run_id in result.steps_run]
    assert "pool0" in started and set(result.stopped_at) >= {"bad", "pool0"}
    # never past the budget: what ran, plus nothing committed at the end (every run ended or was stopped)
    assert sum(result.steps_run.values()) <= 3 * N
    # each pool seed started when the good run's rest, the runs' points so far and a full run fitted in 3 runs:
    # the pool is not used up (10 curves), so the last start left less than a full run
    assert len(started) < len(curves)
    assert sum(result.steps_run.values()) + N > 3 * N - (N - max(result.stopped_at.values()))


def test_a_late_seed_whose_stop_would_leave_its_compute_unused_runs_to_its_end_and_is_found_best():
    # 2 slots, a budget of 2.2 runs (44 points). "bad" stops at the grace step and frees a slot for "late", the
    # last seed the budget can pay for; "late" blooms at step 11 (0.95, above "good"'s 0.8). At its grace step it
    # is below its peers' median (0.8 and 0.0 at step 3): the median rule stopped it, though its 17 steps left
    # plus the 1 step the budget had left could not start another seed. Now it runs to its end and is the best.
    late = [(step, 0.1 if step <= 10 else 0.95) for step in range(1, N + 1)]
    curves = {"good": flat(0.8), "bad": flat(0.0), "late": late, "never": flat(0.5)}
    result = replay(MEDIAN, curves, concurrency=2, budget=2.2, initial=2)
    assert set(result.stopped_at) == {"bad"} and result.steps_run == {"good": N, "bad": 3, "late": N}
    assert sum(result.steps_run.values()) <= 2.2 * N
    # without a budget's say (every stop made) the same rule stops it at its grace step
    unbudgeted = replay(MEDIAN, {k: curves[k] for k in ("good", "bad", "late")}, concurrency=2)
    assert unbudgeted.stopped_at == {"bad": 3, "late": 3}


EXTENDING = {**MEDIAN, "extend_survivors_by": 10}


def test_an_extension_runs_the_survivor_past_its_curve_on_the_points_beyond_it_within_the_budget():
    # "bad" stops at the grace step (3): its 17 steps left go back; "good" is the best survivor and gets 10 more
    # steps from its continuation: a budget of 3 runs (60 steps) less 9 spent and 34 committed leaves 17 for them
    curves = {"good": flat(0.9), "mid": flat(0.88), "bad": flat(0.0)}
    beyond = {run_id: [(N + k, 0.95) for k in range(1, 31)] for run_id in curves}
    result = replay(EXTENDING, curves, concurrency=3, budget=3, beyond=beyond)
    assert result.stopped_at == {"bad": 3}
    assert result.steps_run == {"good": N + 10, "mid": N, "bad": 3}
    assert [d.action for d in result.decisions] == ["stop", "extend"]
    # 2.6 runs (52 steps) leave 52 - 9 - 34 = 9 < 10: the extension is skipped
    tight = replay(EXTENDING, curves, concurrency=3, budget=2.6, beyond=beyond)
    assert tight.steps_run == {"good": N, "mid": N, "bad": 3}
    # the budget, not the number of stops, pays for extensions: 4 runs (80 steps) leave 37 after the stop, so
    # both survivors get 10 more steps from one stop
    generous = replay(EXTENDING, curves, concurrency=3, budget=4, beyond=beyond)
    assert generous.steps_run == {"good": N + 10, "mid": N + 10, "bad": 3}
    # without a budget one stop pays for one extension; without points beyond, it has none to run (as before)
    assert replay(EXTENDING, curves, concurrency=3, beyond=beyond).steps_run["good"] == N + 10
    assert replay(EXTENDING, curves, concurrency=3).steps_run["good"] == N
    assert may_extend(BudgetUse(3, N, 23, 20), 17) and not may_extend(BudgetUse(3, N, 23, 20), 18)


def test_no_budget_replays_every_curve_as_before():
    curves = {"good": flat(1.0), "bad": flat(0.0), "other": flat(0.9)}
    assert set(replay(MEDIAN, curves, concurrency=2).steps_run) == set(curves)
    with pytest.raises(ValueError, match="initial"):
        replay(MEDIAN, curves, concurrency=2, budget=3, initial=0)


# --- the migration ------------------------------------------------------------------------------------------------

def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_the_migration_turns_max_new_seeds_into_a_budget_of_the_initial_runs_plus_it_and_back():
    # every other app at its newest (so the old models have today's run columns), sweeps just before the budget
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    before = [node for node in leaves if node[0] != "sweeps"] + [("sweeps", "0009_sweepplan_warnings")]
    old = migrate(before)
    Sweep, Run, Plan = (old.get_model("sweeps", "Sweep"), old.get_model("runs", "Run"),
                        old.get_model("sweeps", "SweepPlan"))
    Project = old.get_model("projects", "Project")
    project = Project.objects.create(name="p")
    sweeps = [Sweep.objects.create(name=f"s{i}", project=project, config={"total_steps": 4}, seeds=[0, 1, 2],
                                   concurrency=2) for i in range(2)]
    for sweep in sweeps:
        for seed in (0, 1, 2):
            Run.objects.create(name=f"seed {seed}", sweep=sweep, project=project, config={"total_steps": 4}, seed=seed)
    # 3 runs, one of them a fresh seed already started: 2 initial + 2 allowed = a budget of 4
    Plan.objects.create(sweep=sweeps[0], free_slot_use="new_seed", max_new_seeds=2, new_seeds_started=1)
    Plan.objects.create(sweep=sweeps[1], free_slot_use="nothing", max_new_seeds=0)

    new = migrate([*before[:-1], ("sweeps", "0010_sweepplan_budget")])
    budgets = dict(new.get_model("sweeps", "SweepPlan").objects.values_list("sweep_id", "budget"))
    assert budgets == {sweeps[0].pk: 4, sweeps[1].pk: None}

    back = migrate(before)
    allowed = dict(back.get_model("sweeps", "SweepPlan").objects.values_list("sweep_id", "max_new_seeds"))
    assert allowed == {sweeps[0].pk: 2, sweeps[1].pk: 0}
    migrate(leaves)


def test_with_a_budget_every_bayes_stop_is_one_a_fresh_seed_pays_for_and_says_so():
    # 12 seeds of one config (levels 0.3-0.8, noisy), 4 slots, a budget of 8 runs: every stop bayes makes obeys
    # g_j / steps left < FRESH_SEED_MARGIN x g_new / max_steps, and its reason and details give both gains
    rng = random.Random(0)
    curves = {f"s{i}": [(step, min(1.0, max(0.0, (0.3 + 0.5 * rng.random()) * (1 - 0.6 ** step) + rng.gauss(0, 0.02))))
                        for step in range(1, N + 1)] for i in range(12)}
    config = {"name": "bayes", "metric": "m", "max_steps": N, "grace_steps": 3, "min_peers": 1, "risk": 0.5}
    result = replay(config, curves, concurrency=4, budget=8, initial=4)
    stops = [d for d in result.decisions if d.action == "stop"]
    assert stops and len(result.steps_run) > 8  # stops made, and they started new seeds
    for d in stops:
        left = d.details["horizon"] - d.step
        assert d.details["gain"] * N < FRESH_SEED_MARGIN * d.details["fresh_gain"] * left
        assert f"a fresh seed adds at least {1 / FRESH_SEED_MARGIN:g}x as much per step" in d.reason
    assert sum(result.steps_run.values()) <= 8 * N


def test_a_stop_no_new_seed_could_use_is_held_and_the_policy_says_why():
    # the 4 first seeds of the test above, fed up to the step of bayes' first stop: with room for a new seed the
    # stop is made; with none left (a budget of the 4 runs) it is withheld, and ``held`` says why on its row
    from webapp.sweeps.policies import make_policy

    rng = random.Random(0)
    curves = {f"s{i}": [(step, min(1.0, max(0.0, (0.3 + 0.5 * rng.random()) * (1 - 0.6 ** step) + rng.gauss(0, 0.02))))
                        for step in range(1, N + 1)] for i in range(12)}
    config = {"name": "bayes", "metric": "m", "max_steps": N, "grace_steps": 3, "min_peers": 1, "risk": 0.5}
    first = next(d for d in replay(config, curves, concurrency=4, budget=8, initial=4).decisions)
    for budget, stopped in ((8, [first.run_id]), (4, [])):
        policy = make_policy(config)
        for run_id in list(curves)[:4]:
            for step, value in curves[run_id][:first.step]:
                policy.observe(run_id, step, value)
        use = BudgetUse(budget, N, spent=4 * first.step, committed=4 * (N - first.step))
        assert [d.run_id for d in policy.decide(use)] == stopped
        assert list(policy.held) == ([] if stopped else [first.run_id])
    assert policy.held[first.run_id].startswith(f"would be stopped at step {first.step} (bayes), but no new seed "
                                                f"could use its steps: budget 4 runs: ")
    assert policy.decide(None) and policy.held == {}  # without a budget the stop is made
