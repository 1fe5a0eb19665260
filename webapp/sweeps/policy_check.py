"""One check of a sweep's early-stopping policy: what ``make_policy(sweep.policy)`` decides now from the stored
curves, feeding it only the points stored since the last check (a check of 64 runs x 100 k steps must
not read them all). Reads only; ``services.sweep_apply_policy`` stores the decisions and the state.

It reads the curves the sweep's charts read (the metric tier, ``runs.rollups``, at ``tier_width``): up to 400
planned steps every stored point; for longer runs the charts' buckets, each complete bucket's mean a point at the
bucket's last step (``_buckets_after``, ``_refill_from_buckets``: at most 400 per run and metric), and all that
follows holds of those points as of stored ones. The points go through the one simulator (``policies.simulator``).

What a check decides is the *replay*: a fresh policy fed every stored point of the policy metric in step order
across runs, ``decide`` called after each step from ``judged_up_to`` (the plan's ``policy_step``) on, so a run is
judged at every step at which its peers have values whatever the moment of the check (a fast run is compared with
the slow ones once they reach its steps). A run with a stored stop is fed up to that step (what it logs while
winding down is not evidence); runs that ended otherwise are ``mark_stopped``; applied extensions are known from
the start. Points before ``judged_up_to`` were judged by an earlier check: they are only observed.

The saved state. Nothing ``decide`` sets up (stops, rung records, extension credits) carries from one replay to
the next: each starts those afresh at ``judged_up_to``. Before its first ``decide`` a replay holds only what
observing left: each run's smoothed curve (and the threshold rule's best value so far, a fold over the curve). So a
check saves the curves as they stand once every point before ``judged_up_to`` is in (``saved_state.save_state``), and
as ``policy_step`` only grows, the next check's replay observes those same points before its first ``decide``.
That check restores the curves, reads each run's points after its last fed step (an indexed read on (run, key,
step)) and runs the replay's loop over them: it decides at the same steps, on the same curves, from the same
fresh start, so it decides the same as the replay.

A restored curve keeps of its past only what a later judgment can read (``saved_state.history_steps``): the median rule
compares a run at its last step with its peers' values there, and a run that logs nothing more (stopped, queued)
or started late stands below its peers' last steps; ASHA reads every run at its rungs; the threshold rule reads
last values only. Each curve keeps a checkpoint (value and smoother state) at those steps; a value not kept is
read again from the stored points after the nearest checkpoint before the first ``decide`` (``_refill``). A look-up
that still misses (HistoryMissing) makes the check feed every point instead.

Every point is fed, as before there was a state, when the saved state is missing, of another version or policy
config, older than a discard of stored points (a resume truncates after its checkpoint:
``services.policy_points_discarded`` moves the plan's ``policy_epoch`` on; also when that happens during the
check), or when a run it fed left the sweep, was stopped (by a concurrent check) before the last step fed, or has
fewer steps than were fed. Otherwise stored points only ever grow after a run's last one (a step is re-emitted, and
its point replaced, only after a discard: see runs.services.run_metrics_append).

What a check costs: the points after each run's last fed one, and a ``decide`` per step from ``judged_up_to`` to
the newest. That is a few steps while ``policy_step`` keeps up with the runs; while a live run lags far behind
(a seed started late holds ``policy_step`` where it was), every check replays the steps the others went on since,
as the replay does (bench/policy_check.py ``--late-start``), without the replay's reading of all the rest.

Several processes may check at once: each reads the state, computes outside any transaction, and the service
stores its decisions under the sweep's lock (once per run and action) and its state with them unless the epoch
moved. Whichever state is saved last holds exactly the points it says it fed, so a later check neither skips
points nor decides twice.
"""
from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict
from dataclasses import dataclass
from functools import reduce
from operator import or_
from typing import Optional

from django.db.models import Q

from webapp.runs import rollups
from webapp.runs.models import MetricPoint, Run, RunStatus

from .models import PolicyDecision, Sweep, SweepPlan
from .policies import EXTEND, STOP, Decision, HistoryMissing, Policy, make_policy
from .policies import saved_state
from .policies.simulator import Simulator, feed_by_step

log = logging.getLogger("seedbed.sweeps")

STATE_VERSION = 1


@dataclass
class PolicyCheck:
    """What one check proposes, and what the service stores with it."""

    decisions: list[Decision]
    """Every decision of the replay (earlier ones again among them: the service stores the new ones)."""
    complete: int
    """Every running run's points are in up to this step: the next check's ``judged_up_to``."""
    state: dict
    """The curves before this check's ``judged_up_to``, to save as the plan's ``policy_state``."""
    epoch: int
    """The plan's ``policy_epoch`` the points were read in: the state is saved only if it is still the plan's."""
    rebuilt: str = ""
    """Why every stored point was fed ("" when the check went on from the saved state)."""
    points_read: int = 0
    """Points read after each run's last fed one (all of them when ``rebuilt``)."""
    points_reread: int = 0
    """Points read again to put back values of the curves' past (``_refill``)."""
    held: dict = dataclasses.field(default_factory=dict)
    """Run -> why the policy keeps it though its rule would stop it now (``Policy.held``: the budget withheld the
    stop), as the replay's last ``decide`` left it."""


def policy_check(*, sweep: Sweep, plan: SweepPlan, rebuild: bool = False) -> PolicyCheck:
    """What ``make_policy(sweep.policy)`` decides now (the replay: see the module docstring), going on from
    ``plan.policy_state`` unless it cannot be used or ``rebuild`` says to feed every point. Stores nothing. The
    points are the chart tier's at ``tier_width`` (every stored point up to 400 planned steps)."""
    runs = {run.pk: run for run in sweep.runs.all()}
    stored = {(d.run_id, d.action): d for d in sweep.decisions.all()}
    width = tier_width(runs)
    policy, why = (None, "asked to") if rebuild else _restored(sweep, plan, runs, stored, width)
    if policy is not None:
        try:
            check = _replay(policy, sweep, plan, runs, stored, width)
        except HistoryMissing as exc:
            why = f"no value kept at step {exc.args[0]}"
        else:
            if SweepPlan.objects.filter(pk=plan.pk, policy_epoch=plan.policy_epoch).exists():
                return check
            why = "a run's points were discarded during the check"
    fresh = make_policy(sweep.policy, width)
    saved_state.keep_history_at(fresh, saved_state.history_steps(fresh))
    check = _replay(fresh, sweep, plan, runs, stored, width)
    check.rebuilt = why
    log.info("sweep %s: policy check fed all %s points (%s)", sweep.pk, check.points_read, why)
    return check


def tier_width(runs: dict[int, Run]) -> int:
    """The bucket width the sweep's charts read its curves at once its longest run has run its planned steps
    (``selectors.bucket_width``: 1, the raw points, up to 400 steps; 8 from 2,400 steps). Planned, not reached, so
    that a sweep is read at one width throughout (an extension may widen it)."""
    from .selectors import bucket_width

    return bucket_width(max([max(run.total_steps, run.last_step) for run in runs.values()] or [0]))


def _buckets_after(metrics: list[str], runs: dict[int, Run], fed: dict[int, int], width: int) -> list[tuple]:
    """The points of the replay that the curves were not fed, read from the chart tier: each run's complete buckets
    of ``width`` steps after the bucket it was fed last, as (run, the bucket's last step, its mean, metric), in
    the replay's order (step, run, metric). A live run's last bucket is fed once it is complete (its mean moves
    until then), an ended run's as it is; so what a run was fed only ever grows at its end, as with the points."""
    after = {run_id: -(-fed[run_id] // width) * width for run_id in runs if fed.get(run_id, -1) > 0}
    rows = rollups.bucketed(run_ids=list(runs), keys=metrics, width=width, after=after)
    complete_to = {pk: rollups.NO_END if run.is_ended else run.last_step for pk, run in runs.items()}
    return sorted(((run_id, b[2], b[4] / b[3], key) for (run_id, key), buckets in rows.items() for b in buckets
                   if complete_to[run_id] >= (b[0] + 1) * width),
                  key=lambda point: (point[1], point[0], point[3]))


def _stops(stored: dict) -> dict[int, PolicyDecision]:
    return {run_id: d for (run_id, action), d in stored.items() if action == STOP}


def _restored(sweep: Sweep, plan: SweepPlan, runs: dict[int, Run], stored: dict,
              width: int) -> tuple[Optional[Policy], str]:
    """The policy with the curves of the plan's saved state, or None and why that state cannot be used."""
    saved = plan.policy_state
    if not saved:
        return None, "no saved state"
    if saved.get("width", 1) != width:
        return None, f"saved from {saved.get('width', 1)}-step buckets, read now from {width}-step ones"
    if saved.get("version") != STATE_VERSION:
        return None, "saved by another version"
    if saved.get("config") != sweep.policy:
        return None, "saved for another policy config"
    if saved.get("epoch") != plan.policy_epoch:
        return None, "a run's points were discarded since it was saved"
    if saved.get("judged_up_to", 0) > plan.policy_step:
        return None, "saved past the plan's policy_step"
    policy = make_policy(sweep.policy, width)
    try:
        saved_state.load_state(policy, saved["curves"])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        return None, f"unreadable ({exc!r})"
    stops = _stops(stored)
    for run_id, fed in saved_state.last_steps(policy).items():
        run, stop = runs.get(run_id), stops.get(run_id)
        if run is None:
            return None, f"run {run_id} is no longer in the sweep"
        if stop is not None and fed > stop.step:
            return None, f"run {run_id} was fed up to step {fed}, past its stop at step {stop.step}"
        if run.last_step < fed:
            return None, f"run {run_id} has fewer steps ({run.last_step}) than were fed ({fed})"
        if width > 1 and fed % width and not run.is_ended:  # (its bucket's mean moves again: _buckets_after)
            return None, f"run {run_id} was fed its last bucket unfinished (step {fed}) and runs again"
    return policy, ""


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


def _points_after(metrics: list[str], runs: dict[int, Run], fed: dict[int, int], stops: dict, judged_up_to: int):
    """The points of the replay that the curves were not fed, in its order (step, run), of each of ``metrics`` (the
    policy's own and its guards'): each run's after its last
    fed step (a run with no curve yet: all). Of a run with a stored stop, those up to the stop, and those from
    ``judged_up_to`` on: the replay reads them without observing them, and they time its ``decide`` calls."""
    fresh = [run_id for run_id in runs if run_id not in fed and run_id not in stops]
    terms = [Q(run_id__in=fresh)] if fresh else []
    for run_id in (run_id for run_id in runs if run_id not in fresh):
        after = fed.get(run_id, -1)
        if run_id in stops:  # two ranges of the (run, key, step) index, not a filtered scan of all its points
            terms.append(Q(run_id=run_id, step__gt=after, step__lte=stops[run_id].step))
            terms.append(Q(run_id=run_id, step__gte=max(judged_up_to, after + 1)))
        else:
            terms.append(Q(run_id=run_id, step__gt=after))
    if not terms:
        return MetricPoint.objects.none().values_list("run_id", "step", "value", "key")
    keys = Q(key=metrics[0]) if len(metrics) == 1 else Q(key__in=metrics)
    return (MetricPoint.objects.filter(reduce(or_, terms), keys, value__isnull=False)
            .order_by("step", "run_id", "key").values_list("run_id", "step", "value", "key"))


def _refill(policy: Policy, metric: str) -> int:
    """Read again the stored points a restored curve needs to know its value at a step the coming decides read
    (``saved_state.missing_history``): one query per step and starting checkpoint, steps in order, so a value put back
    is the start of the next one (a run that started late moves a few steps up its peers' past per check).
    Returns how many points it read."""
    read = 0
    for step, starts in saved_state.missing_history(policy):
        by_start = defaultdict(list)
        for run_id, start in starts.items():
            by_start[start].append(run_id)
        for start, run_ids in by_start.items():
            values = defaultdict(list)
            for run_id, value in (MetricPoint.objects.filter(run_id__in=run_ids, key=metric, value__isnull=False,
                                                             step__gt=start, step__lte=step)
                                  .order_by("run_id", "step").values_list("run_id", "value")):
                values[run_id].append(value)
                read += 1
            for run_id in run_ids:
                saved_state.refill(policy, run_id, step, values[run_id])
    return read


def _snapshot(policy: Policy, sweep: Sweep, plan: SweepPlan, width: int) -> tuple[dict, int]:
    """Every point before ``judged_up_to`` is in: put back what the coming decides read, put the curves in the
    order the replay creates them in (by first step, then run id: its feed is ordered by step and run), and
    return the state the next check goes on from (and how many points were read again)."""
    reread = (_refill(policy, policy.params.metric) if width == 1
              else _refill_from_buckets(policy, policy.params.metric, width))
    saved_state.order_runs(policy, lambda run_id, curve: (curve.first_step, run_id))
    state = {"version": STATE_VERSION, "config": sweep.policy, "epoch": plan.policy_epoch,
             "judged_up_to": plan.policy_step, "curves": saved_state.save_state(policy)}
    if width > 1:
        state["width"] = width
    return state, reread


def _refill_from_buckets(policy: Policy, metric: str, width: int) -> int:
    """``_refill`` for curves fed the chart tier's buckets: the bucket means whose last step lies after the
    checkpoint and up to the step missing (the runs' whole bucket series are read: at most 400 per run)."""
    read = 0
    for step, starts in saved_state.missing_history(policy):
        rows = rollups.bucketed(run_ids=list(starts), keys=[metric], width=width)
        for run_id, start in starts.items():
            values = [b[4] / b[3] for b in rows.get((run_id, metric), []) if start < b[2] <= step]
            read += len(values)
            saved_state.refill(policy, run_id, step, values)
    return read


def _replay(policy: Policy, sweep: Sweep, plan: SweepPlan, runs: dict[int, Run], stored: dict,
            width: int = 1) -> PolicyCheck:
    """The replay's loop over the points ``policy``'s curves were not fed (all of them for a fresh policy): the
    stored points, or for ``width`` > 1 the chart tier's buckets (``_buckets_after``)."""
    judged_up_to = plan.policy_step
    stops = _stops(stored)
    _tell_known(policy, runs, stored)
    fed = saved_state.last_steps(policy)
    rows = (_points_after(policy.metrics(), runs, fed, stops, judged_up_to).iterator(chunk_size=5000) if width == 1
            else _buckets_after(policy.metrics(), runs, fed, width))
    simulator = Simulator(policy, stops={run_id: stop.step for run_id, stop in stops.items()})
    simulator.budget = _budget_use(sweep, plan)
    snapshot: list = []  # the state and the points read again, once every point before judged_up_to is in
    current_step, points = feed_by_step(simulator, rows, decide_from=judged_up_to,
                                        on_reaching=lambda: snapshot.extend(_snapshot(policy, sweep, plan, width)))
    state, reread = snapshot
    decisions = simulator.decisions
    live = [r.last_step // width * width for r in runs.values()  # (a live run's last complete bucket)
            if r.status == RunStatus.RUNNING and r.kill_requested_at is None]
    # with no run live: the last step stored (of the rows not read, only those of stopped runs between their stop
    # and judged_up_to, which can only matter below judged_up_to, where the plan's policy_step stays)
    latest = max([*fed.values(), current_step if current_step is not None else -1])
    complete = min(live) if live else max(latest, 0)
    return PolicyCheck(decisions=decisions, complete=complete, state=state, epoch=plan.policy_epoch,
                       points_read=points, points_reread=reread, held=dict(policy.held))


def _budget_use(sweep: Sweep, plan: SweepPlan):
    """The sweep's budget use now (``services.budget_use``; None without a budget): with it the policy stops a
    seed only when the freed compute starts a new one (``Policy.decide``)."""
    from .services import budget_use  # services imports this module

    return budget_use(sweep, plan)
