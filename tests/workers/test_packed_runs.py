"""Packed seeds through a real worker (docs/architecture.md#packed-seeds): a sweep whose ``pack`` is above 1 has a
slot train several of its seeds in one process, each still a run of its own (its metrics, checkpoints, kill)."""
from __future__ import annotations

import pytest

from tests.conftest import tiny_config, wait_for
from webapp.runs import services
from webapp.runs.models import Checkpoint, MetricPoint, Run, RunStatus
from webapp.sweeps import services as sweep_services

# (postgres too: the claims of a packed group's members are row-locked claims racing the other slot's)
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]
TIMEOUT = 300


def ended(run_ids) -> bool:
    return all(s in ("succeeded", "failed", "killed", "lost")
               for s in Run.objects.filter(pk__in=run_ids).values_list("status", flat=True))


def curve(run_id: int, key: str = "reward/mean") -> list[tuple[int, float]]:
    return list(MetricPoint.objects.filter(run_id=run_id, key=key).order_by("step").values_list("step", "value"))


def test_a_packed_sweeps_seeds_share_a_process_and_train_as_if_alone(celery_worker):
    config = tiny_config(total_steps=5, preset="dapo")
    sweep = sweep_services.sweep_create(config=config, seeds=[0, 1, 2], concurrency=3, pack=3, policy={})
    runs = list(sweep.runs.order_by("seed"))
    alone = services.run_create(config={**config, "seed": 1})  # seed 1 again, in a process of its own
    wait_for(lambda: ended([r.pk for r in runs] + [alone.pk]), timeout=TIMEOUT, what="the runs to end")
    runs = list(sweep.runs.order_by("seed"))
    assert [r.status for r in runs] == ["succeeded"] * 3, [r.error for r in runs]
    groups = groups_of(runs)
    # the two slots took the three seeds in at most two processes (which slot claims first decides the split)
    assert len(groups) <= 2 and max(len(g) for g in groups.values()) >= 2, groups
    for r in runs:
        assert sorted(r.packed_with) == sorted(o for o in groups[r.pack_leader_id] if o != r.pk)
        assert [s for s, _ in curve(r.pk)] == [1, 2, 3, 4, 5]
        assert Checkpoint.objects.filter(run=r, step=5).exists()
    assert Run.objects.get(pk=alone.pk).packed_with == []
    # the packed seed 1 learned what seed 1 alone learned, step by step
    for (step, packed), (_, solo) in zip(curve(runs[1].pk, "entropy"), curve(alone.pk, "entropy")):
        assert packed == pytest.approx(solo, rel=1e-5), step
    assert [v for _, v in curve(runs[1].pk)] == pytest.approx([v for _, v in curve(alone.pk)], rel=1e-5)


def test_a_killed_seed_leaves_its_group_and_the_next_seed_takes_its_place(celery_worker, client_in):
    config = tiny_config(total_steps=25)
    sweep = sweep_services.sweep_create(config=config, seeds=[0, 1, 2, 3], concurrency=3, pack=3, policy={})
    runs = list(sweep.runs.order_by("seed"))
    started = [r.pk for r in runs[:3]]

    def training_pair():  # two slots, three seeds: one process has two; both training (not yet at their end)
        groups = groups_of(Run.objects.filter(pk__in=started, status=RunStatus.RUNNING))
        return next((g for g in groups.values() if len(g) >= 2 and all(len(curve(m)) >= 2 for m in g)), None)

    members = wait_for(training_pair, timeout=TIMEOUT, what="two packed seeds to train")
    victim, neighbour = members[-1], members[0]
    page = client_in.get(f"/runs/{victim}/").content.decode()
    assert 'id="packed-with"' in page and f'href="/runs/{neighbour}/"' in page
    services.run_kill(run_id=victim, killed_by="policy", reason="test")
    wait_for(lambda: ended([victim]), timeout=60, what="the killed seed to end")
    assert Run.objects.get(pk=victim).status == RunStatus.KILLED
    wait_for(lambda: ended([r.pk for r in runs]), timeout=TIMEOUT, what="the others to end")
    for r in Run.objects.filter(pk__in=[r.pk for r in runs]).exclude(pk=victim):
        assert r.status == RunStatus.SUCCEEDED, r.error
        assert [s for s, _ in curve(r.pk)] == list(range(1, 26))  # untouched by a neighbour's kill
    # the fourth seed started once the kill freed a place: in the freed place of that group, or (another slot
    # was faster to claim it) in a process of its own; either way from its own step 0
    fourth = Run.objects.get(pk=runs[3].pk)
    assert fourth.attempts == 1 and [s for s, _ in curve(fourth.pk)] == list(range(1, 26))


def groups_of(runs) -> dict[int, list[int]]:
    """Each training process (its leader's id) -> the runs it trained (a run alone is its own)."""
    groups: dict[int, list[int]] = {}
    for r in sorted(runs, key=lambda r: r.pk):
        groups.setdefault(r.pack_leader_id or r.pk, []).append(r.pk)
    return groups


def test_an_error_of_one_member_fails_that_run_and_the_others_resume(no_worker_reports):
    """``blame_one``: the member the error names fails with it; its neighbour loses an attempt (back to the queue,
    to resume from its checkpoint), as when a signal ends a run."""
    from training.loop import Seed
    from training.sink import NullSink
    from workers.packed import blame_one

    # (queue gpu: no worker of the session's takes these runs while the test claims them itself)
    sweep = sweep_services.sweep_create(config=tiny_config(), seeds=[0, 1], concurrency=1, pack=2, policy={},
                                        queue="gpu")
    first, second = sweep.runs.order_by("seed")
    for run in (first, second):
        assert services.run_start(run_id=run.pk, worker="w:1") == "start"
    Run.objects.filter(pk__in=[first.pk, second.pk]).update(pack_leader_id=first.pk)
    seeds = [Seed(None, "", NullSink()), Seed(None, "", NullSink())]
    exc = ValueError("verifier errors: 16 of 16 completions could not be judged")
    exc.member_seed = seeds[1]
    blame_one(exc, {id(seeds[0]): first.pk, id(seeds[1]): second.pk}, first.pk, "w:1")
    first, second = Run.objects.get(pk=first.pk), Run.objects.get(pk=second.pk)
    assert second.status == RunStatus.FAILED and "16 of 16 completions" in second.error
    assert first.status == RunStatus.QUEUED and first.restarts == 1


def test_a_killed_leader_resumed_rejoins_the_process_it_started(celery_worker):
    """One slot free (a long run holds the other): the sweep's two seeds share its process. Its leader is killed
    and resumed: it goes back into the free place of that same process, from its checkpoint, beside its neighbour."""
    filler = services.run_create(config=tiny_config(total_steps=5000, seed=9))
    wait_for(lambda: len(curve(filler.pk)) >= 1, timeout=TIMEOUT, what="the filler to hold a slot")
    sweep = sweep_services.sweep_create(config=tiny_config(total_steps=60), seeds=[0, 1], concurrency=2, pack=2,
                                        policy={})
    leader, neighbour = sweep.runs.order_by("seed")
    wait_for(lambda: len(curve(leader.pk)) >= 2 and len(curve(neighbour.pk)) >= 2, timeout=TIMEOUT,
             what="the two seeds to train")
    assert groups_of(Run.objects.filter(pk__in=[leader.pk, neighbour.pk])) == {leader.pk: [leader.pk, neighbour.pk]}
    services.run_kill(run_id=leader.pk, killed_by="user", reason="test")
    wait_for(lambda: ended([leader.pk]), timeout=60, what="the leader's kill")
    stopped_at = Run.objects.get(pk=leader.pk).last_step
    services.run_resume(run_id=leader.pk)
    wait_for(lambda: Run.objects.get(pk=leader.pk).status == RunStatus.RUNNING, timeout=60,
             what="the resumed leader to run")
    back = Run.objects.get(pk=leader.pk)
    assert back.attempts == 2 and back.pack_leader_id == leader.pk and back.packed_with == [neighbour.pk]
    assert not ended([neighbour.pk])  # rejoined its process while the neighbour trains (not after it ended)
    services.run_kill(run_id=filler.pk, killed_by="user", reason="test done")
    wait_for(lambda: ended([leader.pk, neighbour.pk, filler.pk]), timeout=TIMEOUT, what="the runs to end")
    back, neighbour = Run.objects.get(pk=leader.pk), Run.objects.get(pk=neighbour.pk)
    assert back.status == neighbour.status == RunStatus.SUCCEEDED, (back.error, neighbour.error)
    steps = [s for s, _ in curve(back.pk)]
    assert steps == list(range(1, 61)) and stopped_at < 60  # resumed from its checkpoint: every step once
