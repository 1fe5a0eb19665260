"""What a run that has not trained yet waits for, in words a person can act on (docs/architecture.md, "A run's
life"): a queued run waits for a slot (its sweep's concurrency, or a worker of its queue), a run a worker took waits
for the built-in model's build before its first step.

``queue_reasons`` says, for each queued run, which run holds the slot it will get and about how long that one has
left ("slot held by run 5, SmolLM2 demo, about 20 min left"), naming the run and its time left only where the
viewer may read it; a slot held by a run the viewer may not read is only said to be busy ("cpu slot busy"): that
run's progress (its time left) belongs to its project. ``build_wait`` is the display state of a run waiting for the build: it
stays ``running`` in the database (a worker holds it; its status machine is unchanged) and shows as
``waiting: <reason>``. Read-only: nothing here writes.
"""
from __future__ import annotations

import math
from datetime import timedelta
from typing import Iterable, Optional

from django.db.models import Q
from django.utils import timezone

from .models import Run, RunStatus, WorkerCapacity


def seconds_left(*, last_step: int, total_steps: int, trained_s: float) -> Optional[float]:
    """A run's time to its last step at its own pace so far: ``(total_steps - last_step) * trained_s / last_step``
    (``trained_s``: seconds since its first step began). None before its first step (no pace yet).

    >>> seconds_left(last_step=26, total_steps=80, trained_s=260.0)
    540.0
    >>> seconds_left(last_step=0, total_steps=80, trained_s=12.0) is None
    True
    """
    if last_step <= 0:
        return None
    return max(0, total_steps - last_step) * max(trained_s, 0.0) / last_step


def left_text(seconds: Optional[float]) -> str:
    """``"about 9 min left"``, ``"under a minute left"``, ``"time left unknown (no step yet)"``.

    >>> left_text(540.0), left_text(541.0), left_text(20.0), left_text(None)
    ('about 9 min left', 'about 10 min left', 'under a minute left', 'time left unknown (no step yet)')
    """
    if seconds is None:
        return "time left unknown (no step yet)"
    if seconds < 60:
        return "under a minute left"
    return f"about {math.ceil(seconds / 60)} min left"


def _left(run: Run, now) -> Optional[float]:
    origin = run.first_step_at or run.started_at
    if origin is None:
        return None
    return seconds_left(last_step=run.last_step, total_steps=run.total_steps,
                        trained_s=(now - origin).total_seconds())


def _holder_text(run: Run, readable: set[int], now, what: str) -> str:
    """Who holds the slot and its time left, for a run the viewer may read; only ``"<what> busy"`` otherwise (not
    even the time left: it tells another project's progress)."""
    if run.pk not in readable:
        return f"{what} busy"
    if run.name:
        who = f"run {run.pk}, {run.name}"
    elif run.sweep_id is not None:
        who = f"run {run.pk} (seed {run.seed})"
    else:
        who = f"run {run.pk}"
    return f"{what} held by {who}, {left_text(_left(run, now))}"


def _line_up(waiting: list[Run], holders: list[Run], readable: set[int], now, what: str) -> dict[int, str]:
    """The k-th run in line gets the slot of the k-th holder to finish; the ones beyond wait for a later slot."""
    holders = sorted(holders, key=lambda r: (_left(r, now) is None, _left(r, now) or 0.0, r.pk))
    out = {}
    for k, run in enumerate(waiting):
        if k < len(holders):
            out[run.pk] = _holder_text(holders[k], readable, now, what)
        else:
            out[run.pk] = f"waiting for a {what}: {k} run{'s' if k != 1 else ''} ahead of it, every slot taken"
    return out


def queue_reasons(*, runs: Iterable[Run], viewer) -> dict[int, str]:
    """run id -> what each queued run of ``runs`` waits for ("" is never returned: a run missing from the answer
    waits for nothing a person can see, e.g. a free worker about to take it).

    - a sweep's run not sent yet ("sweep slot held by run 3, seed 2, about 9 min left") (``enqueued_at`` empty) waits for its sweep's concurrency: the sweep's runs that
      hold a slot (running, or queued and sent: ``sweeps.services.sweep_fill_slots``);
    - a sent run waits for a worker slot of its queue: the running runs of that queue, when they fill every slot
      the queue's workers report (``WorkerCapacity``); with no worker reporting, it says so.
    The runs in line are taken in the order they were created (sweep) or sent (queue)."""
    from webapp.projects.selectors import visible

    from .capacity import FRESH_FOR_S

    now = timezone.now()
    queued = [r for r in runs if r.status == RunStatus.QUEUED and r.kill_requested_at is None]
    if not queued:
        return {}
    sweeps = {r.sweep_id for r in queued if r.sweep_id is not None and r.enqueued_at is None}
    queues = {r.queue for r in queued if r.enqueued_at is not None}
    by_sweep = {sweep_id: [] for sweep_id in sweeps}
    sweep_holders = {sweep_id: [] for sweep_id in sweeps}
    if sweeps:
        for run in Run.objects.filter(sweep_id__in=sweeps).filter(
                Q(status=RunStatus.RUNNING) | Q(status=RunStatus.QUEUED)).order_by("pk"):
            if run.status == RunStatus.QUEUED and run.enqueued_at is None:
                by_sweep[run.sweep_id].append(run)
            else:
                sweep_holders[run.sweep_id].append(run)
    queue_runs = {queue: [] for queue in queues}
    queue_holders = {queue: [] for queue in queues}
    if queues:
        for run in Run.objects.filter(queue__in=queues).filter(
                Q(status=RunStatus.RUNNING) | Q(status=RunStatus.QUEUED, enqueued_at__isnull=False)) \
                .order_by("enqueued_at", "pk"):
            (queue_holders if run.status == RunStatus.RUNNING else queue_runs)[run.queue].append(run)
        for queue in queues:  # the packed seeds of one process hold one slot (docs/architecture.md#packed-seeds)
            seen: set[int] = set()
            queue_holders[queue] = [r for r in queue_holders[queue]
                                    if (r.pack_leader_id or r.pk) not in seen and not seen.add(r.pack_leader_id or r.pk)]
    everyone = [r.pk for group in (*sweep_holders.values(), *queue_holders.values()) for r in group]
    readable = set(visible(Run.objects.filter(pk__in=everyone), viewer).values_list("pk", flat=True))

    out: dict[int, str] = {}
    for sweep_id in sweeps:
        out.update(_line_up(by_sweep[sweep_id], sweep_holders[sweep_id], readable, now, "sweep slot"))
    fresh = timezone.now() - timedelta(seconds=FRESH_FOR_S)
    reports = list(WorkerCapacity.objects.filter(updated_at__gte=fresh))
    for queue in queues:
        slots = sum(w.slots for w in reports if queue in w.queues)
        if not slots:
            for run in queue_runs[queue]:
                out[run.pk] = f"waiting for a worker: no worker of queue {queue} has reported lately"
            continue
        free = slots - len(queue_holders[queue])
        line = queue_runs[queue][max(free, 0):]  # the first ``free`` runs in line are being taken now
        out.update(_line_up(line, queue_holders[queue], readable, now, f"{queue} slot"))
    out.update(_queued_for_build(queued))
    wanted = {r.pk for r in queued}
    return {pk: text for pk, text in out.items() if pk in wanted}


def _queued_for_build(queued: list[Run]) -> dict[int, str]:
    """The queued runs that train the built-in model while it is being built: they wait for the build, not for a
    slot (a worker that takes one gives its slot back: ``services.run_defer_for_build``)."""
    could = [run for run in queued if uses_builtin_model(run.config)]
    if not could:
        return {}
    from training.config import default_tiny_model_dir
    from training.tiny import tiny_build_state

    state = tiny_build_state(default_tiny_model_dir())
    if state.get("state") != "building":
        return {}
    text = build_wait(Run(status=RunStatus.RUNNING, last_step=0, config={}), state).removeprefix("waiting: ")
    return {run.pk: f"{text}; it holds no worker slot meanwhile" for run in could}


def build_wait(run: Run, build_state: dict) -> str:
    """The reason a run a worker took shows as ``waiting`` instead of ``running``: it has no step yet and the
    built-in model it trains is being built (``training.tiny.tiny_build_state``); "" otherwise.

    >>> r = Run(status="running", last_step=0, config={"model_path": ""})
    >>> build_wait(r, {"state": "building", "step": 120, "pass1": 0.08, "target": 0.15})
    'waiting: the built-in model is being built (SFT step 120, pass@1 0.080 of 0.15)'
    >>> build_wait(r, {"state": "ready"})
    ''
    """
    if run.status != RunStatus.RUNNING or run.last_step > 0 or build_state.get("state") != "building":
        return ""
    if not uses_builtin_model(run.config):
        return ""
    progress = ""
    if "step" in build_state:
        progress = (f" (SFT step {build_state['step']}, pass@1 {float(build_state.get('pass1') or 0):.3f} of "
                    f"{build_state.get('target', 0.15)})")
    return f"waiting: the built-in model is being built{progress}"


def build_waits(runs: Iterable[Run]) -> dict[int, str]:
    """Run id -> ``build_wait``'s reason, for those of ``runs`` that wait for the built-in model's build (the
    build's state read once, and only when one of them could): the one label the runs list, the sweeps list and
    the sweep dashboard show for such a run ("waiting", not "running")."""
    could = [run for run in runs if run.status == RunStatus.RUNNING and not run.last_step]
    if not could:
        return {}
    from training.config import default_tiny_model_dir
    from training.tiny import tiny_build_state

    state = tiny_build_state(default_tiny_model_dir())
    return {run.pk: reason for run in could if (reason := build_wait(run, state))}


def uses_builtin_model(config: dict) -> bool:
    """A config trains the built-in tiny model when its ``model_path`` is empty or the built-in model's folder."""
    import os

    from training.config import default_tiny_model_dir

    path = config.get("model_path") or ""
    return not path or os.path.abspath(path) == os.path.abspath(default_tiny_model_dir())
