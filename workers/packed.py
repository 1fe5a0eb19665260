"""The training process of a packed group (docs/architecture.md#packed-seeds): several runs of one sweep trained by
``training.loop.train_group`` in the process a worker slot forked for the group's leader (``workers.runner``).

Each member keeps what a run trained alone has: its folder (claimed, its unrecorded checkpoints removed), its
``DatabaseSink``, its ``StopFlag`` (its own kill flag and claim). As a member leaves the group (its last step, or a
stop) its end is recorded at once (``runs.services.run_record_exit``: its slot goes to the sweep's next seed, which
may join this group, ``run_claim_packed``); the parent task records those still running when the process exits
(``workers.tasks.train_here``).
"""
from __future__ import annotations

import os
import signal


def train_packed(leader, worker: str, prepare, stop_flag) -> bool:
    """Train the group of run ``leader`` (its members claimed for ``worker``); ``prepare(run)``: a run's folder made
    ready as ``workers.runner`` does for a run alone ("", or why it cannot be used); ``stop_flag(run_id, claim)``:
    a member's should_stop (``workers.runner.StopFlag``). False when no member could train."""
    from training.config import TrainConfig
    from training.loop import Seed, train_group
    from webapp.runs import services
    from webapp.runs.models import Run, RunStatus
    from workers.sink import DatabaseSink

    run_of, stops = {}, []

    def seed_of(run) -> Seed | None:
        problem = prepare(run)
        if problem:  # never train into (or resume from) another run's folder: that run fails, the group goes on
            services.run_record_exit(run_id=run.pk, outcome="failed", detail=problem, worker=worker)
            return None
        claim = (run.worker, run.attempts)
        cfg = TrainConfig.from_dict(run.config)
        stop = stop_flag(run.pk, claim=claim)
        stops.append(stop)
        sink = DatabaseSink(run.pk, claim=claim, reward_hacking_guard=cfg.reward_hacking_guard,
                            eval_problems=cfg.eval_problems)
        seed = Seed(cfg, str(run.folder), sink, should_stop=stop)
        run_of[id(seed)] = run.pk
        print(f"run {run.pk}: training in {run.folder}, packed with run {leader.pk}'s group", flush=True)
        return seed

    def runs(ids) -> list:
        return [s for s in (seed_of(r) for r in Run.objects.filter(pk__in=ids).order_by("pk")) if s is not None]

    def joining(free: int) -> list:
        return runs(services.run_claim_packed(leader_id=leader.pk, worker=worker, limit=free))

    def ended(seed, result) -> None:
        print(f"run {run_of[id(seed)]}: {result.status} at step {result.step}", flush=True)
        services.run_record_exit(run_id=run_of[id(seed)], outcome=result.status, worker=worker)

    def on_signal(signum, frame) -> None:  # the worker shutting down: every member stops after its step
        for stop in stops:
            stop.on_signal(signum, frame)

    signal.signal(signal.SIGTERM, on_signal)
    members = Run.objects.filter(pack_leader_id=leader.pk, status=RunStatus.RUNNING, worker=worker)
    seeds = runs(list(members.values_list("pk", flat=True)))
    if not seeds:
        return False
    try:
        train_group(seeds, slots=leader.sweep.pack, joining=joining, on_end=ended)
    except Exception as exc:
        blame_one(exc, run_of, leader.pk, worker)
        raise
    print(f"run {leader.pk}: its packed group ended (pid {os.getpid()})", flush=True)
    return True


def blame_one(exc: Exception, run_of: dict, leader_id: int, worker: str) -> None:
    """An error that names one member (``training.step_rollouts.blamed``: its data, verifiers or metrics) fails that
    run alone; the others still running lose an attempt and resume from their checkpoints (a restart, as when a
    signal ends a run). An error of the group's own (its model calls) is left to the process's end: every member
    fails with it, as a run alone would."""
    from webapp.runs import services

    guilty = run_of.get(id(getattr(exc, "member_seed", None)))
    if guilty is None:
        return
    cause = (str(exc).splitlines() or [type(exc).__name__])[0][:500]
    for run_id in services.run_pack_members(leader_id=leader_id, worker=worker):
        if run_id == guilty:
            services.run_record_exit(run_id=run_id, outcome="failed", detail=f"{type(exc).__name__}: {cause}",
                                     worker=worker)
        else:
            services.run_record_exit(run_id=run_id, outcome="signaled", worker=worker,
                                     detail=f"run {guilty} of its packed group failed ({cause}); this run resumes "
                                            "from its checkpoint")
