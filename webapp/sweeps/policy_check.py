"""One check of a sweep's early-stopping policy: what ``make_policy(sweep.policy)`` decides now from the stored
curves, a replay from scratch through the one simulator (``policies.simulator``). Reads only;
``services.sweep_apply_policy`` stores the decisions (docs/architecture.md, "Early stopping").

It reads the curves the sweep's charts read (the metric tier, ``runs.rollups``, at ``tier_width``): up to 400
planned steps every stored point; for longer runs the charts' buckets, each complete bucket's mean a point at the
bucket's last step (at most 400 per run and metric).

The replay: a fresh policy told what is known from the start (applied extensions, the stops of earlier checks,
``Policy.tell_stop``, and the runs that ended otherwise, ``mark_stopped``), fed every point of its metrics in step
order across runs, ``decide`` called after each step. A run with a stored stop is fed up to that step (what it logs
while winding down is not evidence). So a run is judged at every step at which its peers have values whatever the
moment of the check, and what a check decides is a function of the stored points and decisions alone: nothing is
saved between checks, and a resume that discards points needs nothing either.

What a check costs: every point (or bucket) once, and a ``decide`` per step. It is paced by that cost
(``services.claim_policy_check``: the next check no sooner than ``PACE`` times the last replay's duration after
it, ``SweepPlan.policy_check_s``), so a sweep's checks take at most 1/``PACE`` of one core on average
(bench/policy_check.py measures it).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from webapp.runs.models import Run

from .models import PolicyDecision, Sweep, SweepPlan
from .chart_tier import chart_buckets, chart_points, tier_width
from .history import project_history
from .risk_fits import check_fit
from .selectors import budget_use
from .policies import EXTEND, STOP, Decision, Policy, make_policy
from .policies.metric_ranges import metric_range
from .policies.registry import learns_from_history
from .policies.simulator import Simulator, feed_by_step

PACE = 10
"""A check waits at least this many times its last replay's duration after it: checks cost <= 1/PACE of a core."""


@dataclass
class PolicyCheck:
    """What one check proposes, and what the service stores with it."""

    decisions: list[Decision]
    """Every decision of the replay (earlier ones again among them: the service stores the new ones)."""
    points_read: int = 0
    """Points (or buckets) the replay read: every one of the policy's metrics."""
    held: dict = dataclasses.field(default_factory=dict)
    """Run -> why the policy keeps it though its rule would stop it now (``Policy.held``: the budget withheld the
    stop), as the replay's last ``decide`` left it."""


def policy_check(*, sweep: Sweep, plan: SweepPlan) -> PolicyCheck:
    """What ``make_policy(sweep.policy)`` decides now: the replay from scratch (see the module docstring). Stores
    nothing. The points are the chart tier's at ``tier_width`` (every stored point up to 400 planned steps)."""
    runs = {run.pk: run for run in sweep.runs.all()}
    stored = {(d.run_id, d.action): d for d in sweep.decisions.all()}
    width = tier_width(runs)
    history = sweep_history(sweep)
    policy = make_policy(sweep.policy, width, history=history, risk_fit=check_fit(sweep, history) if history else None)
    policy.bounds = metric_range(policy.params.metric, sweep.config)  # a reason's forecasts are written within it
    stops = _stops(stored)
    _tell_known(policy, runs, stored)
    rows = (chart_points(policy.metrics(), runs) if width == 1 else chart_buckets(policy.metrics(), runs, width))
    simulator = Simulator(policy, stops={run_id: stop.step for run_id, stop in stops.items()})
    simulator.budget = _budget_use(sweep, plan)
    _, points = feed_by_step(simulator, rows, decide_from=0)
    return PolicyCheck(decisions=simulator.decisions, points_read=points, held=dict(policy.held))


def sweep_history(sweep: Sweep):
    """The project's finished sweeps on the policy's metric when its rule learns from them (``history``), else
    None."""
    return project_history(sweep, sweep.policy["metric"]) if learns_from_history(sweep.policy) else None


def _stops(stored: dict) -> dict[int, PolicyDecision]:
    return {run_id: d for (run_id, action), d in stored.items() if action == STOP}


def as_decision(row: PolicyDecision) -> Decision:
    """A stored decision as the policy's ``Decision`` (what ``tell_stop`` and the extensions read; the dashboard's
    forecasts tell their policy the stored bayes stops with it)."""
    return Decision(run_id=row.run_id, action=row.action, reason=row.reason, rule=row.rule, step=row.step,
                    value=row.value, threshold=row.threshold, n_peers=row.n_peers, extra_steps=row.extra_steps,
                    details=row.details)


def _tell_known(policy: Policy, runs: dict[int, Run], stored: dict) -> None:
    """What the replay knows from the start: applied extensions (a run's horizon is its extended one), the stops
    of earlier checks (``Policy.tell_stop``: a rule whose later stops depend on them) and the runs that ended
    otherwise (never judged again; their curves still count as peers)."""
    stops = _stops(stored)
    for (run_id, action), row in stored.items():
        if action == EXTEND and row.outcome == PolicyDecision.Outcome.APPLIED:
            policy.extended[run_id] = as_decision(row)
    for run_id, row in sorted(stops.items(), key=lambda item: item[1].pk):  # stops earlier checks decided
        policy.tell_stop(as_decision(row))
    for run in runs.values():
        if run.pk not in stops and (run.is_ended or run.kill_requested_at is not None):
            policy.mark_stopped(run.pk)


def _budget_use(sweep: Sweep, plan: SweepPlan):
    """The sweep's budget use now (``selectors.budget_use``; None without a budget): with it the policy stops a
    seed only when the freed compute starts a new one, or extends survivors as far as it pays for
    (``Policy.decide``)."""
    return budget_use(sweep, plan)
