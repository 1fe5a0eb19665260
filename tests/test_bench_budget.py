"""bench/budget_table.py: the peers' scheduler loop starts new seeds by the same rule as the what-if replay
(policies.budget.may_start_seed), and the table picks the best seed found the way a user would."""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import budget_table  # noqa: E402

N = 10


class Pool(dict):
    def __init__(self, levels):
        super().__init__({f"s{i}": [(step, level) for step in range(1, N + 1)] for i, level in enumerate(levels)})
        self.worth = {f"s{i}": level for i, level in enumerate(levels)}
        self.beyond = {}

    def worth_at(self, run_id, steps):
        return self.worth[run_id] + (0.1 if steps > N else 0.0)  # trained longer: worth more


class StopAt:
    """A stopper that stops every seed once it reaches ``step`` (never, when None)."""

    def __init__(self, step):
        self.step = step

    def start(self, run_id):
        pass

    def report(self, run_id, step, value):
        return self.step is not None and step >= self.step

    def end(self, run_id, step, value):
        pass


def test_without_stops_the_loop_runs_8_seeds_to_their_end_as_the_replay_does():
    pool = Pool([0.5] * 20)
    steps_run, stopped = budget_table.run_peer(pool, lambda steps: StopAt(None))
    replayed, replay_stopped = budget_table.seedbed({"name": "manual"})(pool)
    assert steps_run == replayed == {f"s{i}": N for i in range(8)} and stopped == replay_stopped == set()


def test_stops_free_compute_for_new_seeds_but_never_past_the_budget():
    pool = Pool([0.5] * 40)
    steps_run, stopped = budget_table.run_peer(pool, lambda steps: StopAt(3))
    # each seed costs 3 of the budget's 80 points; a new one starts only while a full run (10) still fits
    assert sum(steps_run.values()) <= budget_table.BUDGET_RUNS * N
    assert stopped == set(steps_run) and len(steps_run) > 8  # the freed compute started new seeds
    # the what-if replay, its threshold rule stopping every seed at the same step, starts the same seeds
    replay = budget_table.seedbed({"name": "threshold", "upper_bound": 0.4, "smoothing": "none", "grace_steps": 3,
                                   "min_peers": 0})
    replayed, replay_stopped = replay(pool)
    assert (replayed, replay_stopped) == (steps_run, stopped)


def test_the_best_seed_found_is_the_best_observed_final_among_those_that_ran_to_their_end():
    pool = Pool([0.2, 0.9, 0.5])
    assert budget_table.best_found(pool, {"s0": N, "s1": 4, "s2": N}, {"s1"}) == 0.5
    mean, low, high = budget_table.mean_interval([0.0, 0.2, 0.4])
    assert abs(mean - 0.2) < 1e-12 and low < mean < high


def test_the_gate_reads_seedbeds_budget_policy_only_and_prints_its_interval():
    lines: list[str] = []
    others = {"seedbed manual (8 seeds to the end)": (0.0, 0.0, 0.0), "seedbed median": (-0.01, -0.02, 0.0),
              "optuna median (warmup=grace)": (-0.02, -0.03, -0.01)}
    assert budget_table.gate({**others, budget_table.GATED: (0.003, 0.001, 0.005)}, lines.append)
    assert lines[0] == (f"  must hold (gated), mean gain > 0 with its 95 % interval above 0 for "
                        f"{budget_table.GATED}: +0.0030 [95 % +0.0010, +0.0050]: holds")
    assert lines[1].startswith("  reported, not gated: median -0.0100")
    # a positive mean whose interval holds 0 is not enough
    assert not budget_table.gate({**others, budget_table.GATED: (0.001, -0.002, 0.004)}, lines.append)
    assert "FAILS" in lines[2]
    assert not budget_table.gate(others, lines.append)  # the gated row missing holds nothing


def test_an_extended_survivor_is_picked_on_its_extended_end_and_scored_there():
    pool = Pool([0.2, 0.5])
    pool.beyond = {"s0": [(N + k, 0.9) for k in range(1, 6)], "s1": [(N + k, 0.3) for k in range(1, 6)]}
    # s0 ran 5 steps past its curve: its observed final is its last 10 % (0.9) and its worth the extended one
    assert budget_table.best_found(pool, {"s0": N + 5, "s1": N}, set()) == 0.2 + 0.1


def test_the_generators_continue_each_curve_past_t_and_leave_its_first_t_steps_as_they_were():
    import other_sweeps
    import synthetic_sweeps

    for make, seed in ((synthetic_sweeps.synthetic_sweeps, 2), (other_sweeps.other_sweeps, 12)):
        plain = make(seed, 3)
        synthetic_sweeps.CONTINUE = 3
        try:
            longer = make(seed, 3)
        finally:
            synthetic_sweeps.CONTINUE = 1
        for short, long in zip(plain, longer):
            assert dict(short) == dict(long) and short.worth == long.worth and not short.beyond
            for run_id, points in long.items():
                steps = len(points)
                assert [s for s, _ in long.beyond[run_id]] == list(range(steps + 1, 3 * steps + 1))
                assert long.worth_at(run_id, steps) == long.worth[run_id]
                window = -(-2 * steps // 10)  # the last 10 % of the 2 T steps it ran
                assert abs(long.worth_at(run_id, 2 * steps) - long.mu[run_id][2 * steps - window:2 * steps].mean()) \
                    < 1e-12
