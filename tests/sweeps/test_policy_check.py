"""A policy check is a replay from scratch: it decides exactly what a fresh policy fed every stored point decides
(the oracle kept here), whenever the checks happen and whatever was discarded in between: on random sweeps driven
through the real run services, and on hand-made cases."""
from __future__ import annotations

import math
import random
from unittest import mock

import pytest

from webapp.runs import services as run_services
from webapp.runs.models import MetricPoint, Run, RunStatus
from webapp.sweeps import policy_check as check_module
from webapp.sweeps import services
from webapp.sweeps.models import FreeSlotUse, SweepPlan
from webapp.sweeps.policies import EXTEND, STOP, Decision, make_policy

# on PostgreSQL again (docs/architecture.md#tests-and-benchmarks): the hand-made cases, and of the random replays the
# two that cover what the engine answers (extensions, guards, new seeds, resumes); the other
# replays vary only the policy's arithmetic over the same queries and run on SQLite
pytestmark = [pytest.mark.django_db]

METRIC = "reward/mean"
TOTAL = 24


def full_replay(*, sweep, plan) -> check_module.PolicyCheck:
    """The oracle: a fresh policy fed every stored point of the metric in step order across runs, deciding after
    each step."""
    policy = make_policy(sweep.policy)
    runs = {run.pk: run for run in sweep.runs.all()}
    stored = {(d.run_id, d.action): d for d in sweep.decisions.all()}
    stops = {run_id: d for (run_id, action), d in stored.items() if action == STOP}
    for (run_id, action), d in stored.items():
        if action == EXTEND and d.outcome == "applied":
            policy.extended[run_id] = Decision(run_id=run_id, action=d.action, reason=d.reason, rule=d.rule,
                                               step=d.step, value=d.value, threshold=d.threshold,
                                               n_peers=d.n_peers, extra_steps=d.extra_steps)
    for run_id, d in sorted(stops.items(), key=lambda item: item[1].pk):
        policy.tell_stop(check_module.as_decision(d))
    for run in runs.values():
        if run.pk not in stops and (run.is_ended or run.kill_requested_at is not None):
            policy.mark_stopped(run.pk)
    decisions, current_step, budget = [], None, services.budget_use(sweep, plan)  # read once per check, as it does
    for run_id, step, value, key in (MetricPoint.objects.filter(run_id__in=list(runs), key__in=policy.metrics(),
                                                                value__isnull=False)
                                     .order_by("step", "run_id", "key").values_list("run_id", "step", "value", "key")):
        if step != current_step and current_step is not None:
            decisions += policy.decide(budget)
        current_step = step
        if run_id not in stops or step <= stops[run_id].step:
            policy.observe(run_id, step, value, key)
    decisions += policy.decide(budget)
    return check_module.PolicyCheck(decisions=decisions)


def apply_with(check):
    """sweep_apply_policy with ``check`` in place of policy_check, recording what each check returned."""
    seen = []

    def spy(**kwargs):
        seen.append(check(**kwargs))
        return seen[-1]

    def apply(sweep):
        with mock.patch.object(services, "policy_check", spy):
            services.sweep_apply_policy(sweep_id=sweep.pk)
    return apply, seen


def decisions_of(sweep) -> list[tuple]:
    index = {pk: i for i, pk in enumerate(sweep.runs.order_by("pk").values_list("pk", flat=True))}
    return [(index[d.run_id], d.action, d.rule, d.step, d.value, d.threshold, d.n_peers, d.extra_steps,
             d.reason, d.outcome, _details(d.details, index)) for d in sweep.decisions.order_by("pk")]


def _details(details: dict, index: dict) -> dict:
    """A decision's details with the peers' run ids as indexes (the copies' runs have other ids), also in the
    levels a bayes stop keeps."""
    if "peers" not in details:
        return details
    out = {**details, "peers": [[index[run_id], *rest] for run_id, *rest in details["peers"]]}
    if "levels" in details:
        out["levels"] = [[index[run_id], *rest] for run_id, *rest in details["levels"]]
    return out


def runs_of(sweep) -> list[Run]:
    return list(sweep.runs.order_by("pk"))


class Seeds:
    """The values every copy of a random sweep logs: run i's step s in its a-th attempt (a resumed run logs
    different values after its checkpoint), a few NaNs (stored as gaps)."""

    def __init__(self, seed: int):
        self.seed = seed

    def value(self, i: int, step: int, attempt: int) -> float:
        level = random.Random(f"{self.seed}/{i}")
        base, trend = level.uniform(0.2, 0.8), level.uniform(-0.4, 0.4)
        noise = random.Random(f"{self.seed}/{i}/{step}/{attempt}")
        if noise.random() < 0.04:
            return math.nan
        return base + trend * (1 - 0.85 ** step) + noise.gauss(0, 0.08)

    def entropy(self, i: int, step: int, attempt: int) -> float:
        """Run i's entropy: some runs collapse (toward 0) at a random step, the others stay near their level."""
        level = random.Random(f"{self.seed}/{i}/entropy")
        start, collapse_at = level.uniform(0.3, 1.0), level.choice([None, None, 6, 10, 14])
        noise = random.Random(f"{self.seed}/{i}/{step}/{attempt}/entropy").gauss(0, 0.02)
        if collapse_at is not None and step >= collapse_at:
            return max(0.0, start * 0.5 ** (step - collapse_at + 1) + noise)
        return start + noise


def tick(rng: random.Random, copies: list, seeds: Seeds, attempts: dict, concurrency: int) -> None:
    """One random tick applied the same way to every copy (each copy's runs in pk order are the same runs):
    runs log 0-3 steps in a random interleaving, wind down and end when killed, finish, are killed by a user,
    requeued by their worker or resumed after a kill, and queued runs start (a resumed one truncates its points
    after a random earlier checkpoint and logs new values from there)."""
    first = runs_of(copies[0])
    for i in rng.sample(range(len(first)), len(first)):
        run, roll = first[i], rng.random()
        if run.status == RunStatus.RUNNING and run.kill_requested_at is not None:
            action = ("log", 1) if roll < 0.5 and run.last_step < run.total_steps else ("finish", RunStatus.KILLED)
        elif run.status == RunStatus.RUNNING:
            if roll < 0.04:
                action = ("kill",)
            elif roll < 0.08:
                action = ("requeue",)
            elif run.last_step >= run.total_steps:
                action = ("finish", RunStatus.SUCCEEDED)
            else:
                action = ("log", rng.choice([0, 1, 1, 2, 3]))
        elif run.status == RunStatus.QUEUED:
            running = sum(r.status == RunStatus.RUNNING for r in runs_of(copies[0]))
            start = running < concurrency and roll < 0.7
            action = ("start", rng.randint(max(0, run.last_step - 5), run.last_step)) if start else ("wait",)
        elif run.status == RunStatus.KILLED and roll < 0.1:
            action = ("resume",)  # by a user, also after the policy stopped it
        else:
            action = ("wait",)
        if action[0] == "start":
            attempts[i] = attempts.get(i, 0) + 1
        for copy in copies:
            act(runs_of(copy)[i], action, i, seeds, attempts.get(i, 0))


def act(run: Run, action: tuple, i: int, seeds: Seeds, attempt: int) -> None:
    kind = action[0]
    if kind == "log":
        steps = range(run.last_step + 1, min(run.last_step + action[1], run.total_steps) + 1)
        if steps:
            run_services.run_metrics_append(run_id=run.pk, points=[
                point for s in steps for point in ((s, METRIC, seeds.value(i, s, attempt)),
                                                   (s, "entropy", seeds.entropy(i, s, attempt)))])
    elif kind == "finish":
        run_services.run_finish(run_id=run.pk, status=action[1])
    elif kind == "kill":
        run_services.run_kill(run_id=run.pk, killed_by="user:ada")
    elif kind == "requeue":
        run_services.run_requeue(run_id=run.pk, reason="worker shut down")
    elif kind == "resume":
        run_services.run_resume(run_id=run.pk)
    elif kind == "start" and run_services.run_start(run_id=run.pk, worker="test:1") != "skip":
        run_services.run_discard_after(run_id=run.pk, step=action[1])  # the loop (re)starts at its checkpoint


POLICIES = {
    "median-ema": ({"name": "median", "grace_steps": 4, "min_peers": 2, "min_delta": 0.02}, {}),
    "median-mean-every-2-extend": ({"name": "median", "grace_steps": 3, "min_peers": 1, "smoothing": "mean",
                                    "smoothing_window": 3, "eval_every": 2, "min_delta": 0.0},
                                   {"free_slot_use": FreeSlotUse.EXTEND, "extend_steps": 6}),
    "median-none-min": ({"name": "median", "mode": "min", "grace_steps": 5, "min_peers": 2, "smoothing": "none",
                         "min_delta": 0.05}, {"free_slot_use": FreeSlotUse.NEW_SEED, "budget": 8}),
    "asha-ema": ({"name": "asha", "min_steps": 3, "eta": 2, "min_peers": 1, "grace_steps": 2}, {}),
    "asha-none-min-extend": ({"name": "asha", "mode": "min", "min_steps": 4, "eta": 2, "min_peers": 1,
                              "smoothing": "none"}, {"free_slot_use": FreeSlotUse.EXTEND, "extend_steps": 8}),
    "threshold-bound-patience-ema": ({"name": "threshold", "lower_bound": 0.3, "patience": 5, "grace_steps": 3,
                                      "smoothing_weight": 0.6}, {}),
    "threshold-patience-mean": ({"name": "threshold", "patience": 4, "min_delta": 0.01, "min_peers": 1,
                                 "smoothing": "mean", "smoothing_window": 4},
                                {"free_slot_use": FreeSlotUse.EXTEND, "extend_steps": 5}),
    "bayes-defaults": ({"name": "bayes", "grace_steps": 3, "min_peers": 1, "risk": 0.2}, {}),
    "bayes-min-extend": ({"name": "bayes", "mode": "min", "grace_steps": 4, "min_peers": 2, "risk": 0.3,
                          "half_life": 3, "tolerance": 0.05},
                         {"free_slot_use": FreeSlotUse.EXTEND, "extend_steps": 6}),
    "bayes-high-risk": ({"name": "bayes", "grace_steps": 3, "min_peers": 1, "risk": 0.5,
                         "tolerance": 0.1}, {"free_slot_use": FreeSlotUse.NEW_SEED, "budget": 8}),
    "median-with-guards": ({"name": "median", "grace_steps": 4, "min_peers": 2, "min_delta": 0.05,
                            "guards": [{"kind": "entropy_collapse", "below": 0.1, "for_steps": 3},
                                       {"kind": "reward_drop", "drop": 0.15, "for_steps": 4}]}, {}),
    "manual-with-guards": ({"name": "manual", "grace_steps": 3,
                            "guards": [{"kind": "entropy_collapse", "below": 0.08, "for_steps": 2}]},
                           {"free_slot_use": FreeSlotUse.NEW_SEED, "budget": 8}),
    "threshold-upper-none": ({"name": "threshold", "upper_bound": 0.7, "smoothing": "none", "grace_steps": 2},
                             {"free_slot_use": FreeSlotUse.NEW_SEED, "budget": 9}),
}


REPLAYS_ON_POSTGRES = {("bayes-min-extend", 1), ("manual-with-guards", 2)}


@pytest.mark.parametrize("name, seed", [
    pytest.param(name, seed, id=f"{name}-{seed}",
                 marks=[pytest.mark.postgres] if (name, seed) in REPLAYS_ON_POSTGRES else [])
    for name in sorted(POLICIES) for seed in (1, 2)])
def test_every_check_decides_what_a_fresh_policy_fed_every_stored_point_decides(config, name, seed):
    policy, kwargs = POLICIES[name]
    rng, seeds, attempts = random.Random(seed), Seeds(seed), {}
    copies = [services.sweep_create(config={**config, "total_steps": TOTAL}, seeds=range(6), concurrency=4,
                                    policy={**policy, "metric": METRIC}, **kwargs) for _ in range(2)]
    live, checks = apply_with(check_module.policy_check)
    replayed, _ = apply_with(full_replay)
    for _ in range(60):
        tick(rng, copies, seeds, attempts, concurrency=4)
        if rng.random() < 0.6:
            live(copies[0])
            replayed(copies[1])
            assert decisions_of(copies[0]) == decisions_of(copies[1])
        assert ([(r.status, r.kill_requested_at is None, r.total_steps) for r in runs_of(copies[0])]
                == [(r.status, r.kill_requested_at is None, r.total_steps) for r in runs_of(copies[1])])
    assert checks and all(c.points_read > 0 for c in checks[1:])
    if "guards" in name:  # the guards acted (and so were compared with the replay), not just stayed quiet
        assert any(rule.startswith("guard:") for _, _, rule, *_ in decisions_of(copies[0])), decisions_of(copies[0])
    if "needed" in name:  # several stops, the later ones spending on top of the earlier checks' (tell_stop)
        assert sum(action == STOP for _, action, *_ in decisions_of(copies[0])) >= 2, decisions_of(copies[0])


def running_sweep(config, levels, start=None, **kwargs):
    """A median sweep of len(levels) runs, the first ``start`` (default: all) running."""
    sweep = services.sweep_create(config={**config, "total_steps": 40}, seeds=range(len(levels)),
                                  concurrency=len(levels), policy={"name": "median", "metric": METRIC, "grace_steps": 4,
                                                                   "min_peers": 2, **kwargs})
    runs = runs_of(sweep)
    for run in runs[:start]:
        run_services.run_start(run_id=run.pk, worker="test:1")
    return sweep, runs


def log(run, steps, level):
    run_services.run_metrics_append(run_id=run.pk, points=[(s, METRIC, level + 0.01 * (s % 3)) for s in steps])


@pytest.mark.postgres
def test_every_check_reads_every_stored_point_and_the_plan_keeps_no_curves(config):
    sweep, runs = running_sweep(config, [0.5, 0.5, 0.5])
    for run in runs:
        log(run, range(1, 11), 0.5)
    services.sweep_apply_policy(sweep_id=sweep.pk)
    for run in runs:
        log(run, range(11, 14), 0.5)
    plan = SweepPlan.objects.get(sweep=sweep)
    assert check_module.policy_check(sweep=sweep, plan=plan).points_read == 3 * 13  # not only the 3 x 3 new ones
    assert not {"policy_state", "policy_step", "policy_epoch"} & {f.name for f in SweepPlan._meta.get_fields()}
    assert plan.policy_check_s > 0  # the last replay's duration, which paces the next check


@pytest.mark.postgres
def test_after_a_resume_that_discards_points_the_check_decides_on_the_points_stored_now(config):
    sweep, runs = running_sweep(config, [0.5, 0.5, 0.5, 0.5])
    for run in runs:
        log(run, range(1, 9), 0.5)
    assert services.sweep_apply_policy(sweep_id=sweep.pk) == []
    run_services.run_discard_after(run_id=runs[3].pk, step=3)  # resumed from its checkpoint at step 3 ...
    log(runs[3], range(4, 9), 0.1)  # ... it logs other values for the same steps
    plan = SweepPlan.objects.get(sweep=sweep)
    check = check_module.policy_check(sweep=sweep, plan=plan)
    assert check.decisions == full_replay(sweep=sweep, plan=plan).decisions
    [decision] = services.sweep_apply_policy(sweep_id=sweep.pk)
    assert (decision.run_id, decision.step) == (runs[3].pk, 4)  # its first step judged after the resume is poor


@pytest.mark.postgres
def test_a_run_that_starts_late_is_judged_from_its_first_judged_step_against_its_peers_there(config):
    sweep, runs = running_sweep(config, [0.5, 0.5, 0.5, 0.1], start=3)
    late = runs[3]
    for run in runs[:3]:
        log(run, range(1, 31), 0.5)
    services.sweep_apply_policy(sweep_id=sweep.pk)
    run_services.run_start(run_id=late.pk, worker="test:1")
    log(late, range(1, 7), 0.1)
    plan = SweepPlan.objects.get(sweep=sweep)
    check = check_module.policy_check(sweep=sweep, plan=plan)
    oracle = full_replay(sweep=sweep, plan=plan)
    assert [d for d in check.decisions if d.run_id == late.pk] == [d for d in oracle.decisions if d.run_id == late.pk]
    [stop] = [d for d in check.decisions if d.run_id == late.pk]
    # at the grace step 4, against its peers' values at step 4: the same whenever the checks happened
    assert (stop.step, stop.n_peers) == (4, 3)


@pytest.mark.postgres
def test_runs_are_judged_in_the_replays_order_also_when_a_run_with_a_smaller_id_starts_later(config):
    # the replay creates curves in (first step, run id) order, and judges (and lists its stops) in that order
    sweep, runs = running_sweep(config, [0.5] * 5, start=0, smoothing="none")
    first_late, peers, second_late = runs[0], runs[1:3] + runs[4:], runs[3]
    for run in peers:
        run_services.run_start(run_id=run.pk, worker="test:1")
        log(run, range(1, 11), 0.5)
    services.sweep_apply_policy(sweep_id=sweep.pk)
    run_services.run_start(run_id=second_late.pk, worker="test:1")
    log(second_late, [1, 2], 0.1)  # before the grace period: not judged yet
    services.sweep_apply_policy(sweep_id=sweep.pk)
    run_services.run_start(run_id=first_late.pk, worker="test:1")
    log(first_late, range(1, 6), 0.1)
    log(second_late, range(3, 6), 0.1)
    plan = SweepPlan.objects.get(sweep=sweep)
    check = check_module.policy_check(sweep=sweep, plan=plan)
    assert check.decisions == full_replay(sweep=sweep, plan=plan).decisions
    assert [d.run_id for d in services.sweep_apply_policy(sweep_id=sweep.pk)] == [first_late.pk, second_late.pk]


@pytest.mark.postgres
def test_a_check_that_stores_its_older_decisions_after_a_newer_check_leaves_later_checks_exact(config):
    # two processes check at once: the slower one computed on older points and stores last
    copies = [services.sweep_create(config={**config, "total_steps": TOTAL}, seeds=range(5), concurrency=5,
                                    policy={"name": "median", "metric": METRIC, "grace_steps": 3, "min_peers": 2})
              for _ in range(2)]
    seeds = Seeds(7)
    checks = [apply_with(check_module.policy_check)[0], apply_with(full_replay)[0]]

    def log_to(step):
        for copy in copies:
            for i, run in enumerate(runs_of(copy)):
                if run.status == RunStatus.RUNNING and run.kill_requested_at is None:
                    act(run, ("log", step - run.last_step), i, seeds, 0)

    def check_both():
        for copy, check in zip(copies, checks):
            check(copy)
        assert decisions_of(copies[0]) == decisions_of(copies[1])

    for copy in copies:
        for run in runs_of(copy):
            run_services.run_start(run_id=run.pk, worker="test:1")
    log_to(6)
    check_both()
    log_to(10)
    stale = [check_module.policy_check(sweep=copies[0], plan=SweepPlan.objects.get(sweep=copies[0])),
             full_replay(sweep=copies[1], plan=SweepPlan.objects.get(sweep=copies[1]))]
    log_to(14)
    check_both()
    for copy, old in zip(copies, stale):
        apply_with(lambda **_: old)[0](copy)  # stored after the newer check: its decisions
    assert decisions_of(copies[0]) == decisions_of(copies[1])
    for step in (16, 19, 23):
        log_to(step)
        check_both()
    assert len(decisions_of(copies[0])) >= 2
