"""bench/step_phases.py, the benchmarks' account of where a training run's time goes: exclusive time per phase
(nested timed calls counted once), every wrapped attribute restored, and on the tiny model a run of the real loop
whose phases are the ones its config implies (an old log-probs pass only with a reference model, one backward
per micro-batch, the optimizer once per step)."""
from __future__ import annotations

import os
import sys

import pytest

from tests.conftest import REPO

sys.path.insert(0, os.path.join(REPO, "bench"))
import step_phases  # noqa: E402
from step_phases import PhaseClock  # noqa: E402


class FakeTime:
    """perf_counter that only moves when the code under test says so: the accounting, not the machine."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


class Work:
    def __init__(self, clock_time: FakeTime):
        self.t = clock_time

    def outer(self):
        self.t.now += 1.0
        self.inner()
        self.t.now += 2.0
        self.inner()
        return "done"

    def inner(self):
        self.t.now += 10.0


class Lazy(Work):  # inherits outer and inner: the clock shadows them on this class only
    pass


def test_each_phase_gets_its_exclusive_time_and_the_phases_add_up(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(step_phases, "time", fake)
    with PhaseClock([(Work, "outer", "loss"), (Work, "inner", "backward")]) as clock:
        assert Work(fake).outer() == "done"
    assert dict(clock.seconds) == {"loss": 3.0, "backward": 20.0}
    assert dict(clock.calls) == {"loss": 1, "backward": 2}
    assert sum(clock.seconds.values()) == fake.now


def test_the_clock_puts_back_what_it_wrapped_even_when_the_call_raises(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(step_phases, "time", fake)
    own, inherited = vars(Work)["inner"], vars(Work)["outer"]

    def boom(self):
        fake.now += 5.0
        raise ValueError("verifier down")

    monkeypatch.setattr(Lazy, "inner", boom, raising=False)
    with pytest.raises(ValueError), PhaseClock([(Lazy, "outer", "other"), (Lazy, "inner", "score"),
                                                (Work, "inner", "backward")]) as clock:
        Lazy(fake).outer()
    assert clock.seconds["score"] == 5.0 and clock.seconds["other"] == 1.0 and clock.calls["backward"] == 0
    assert vars(Work)["inner"] is own and vars(Work)["outer"] is inherited
    assert vars(Lazy)["inner"] is boom and "outer" not in vars(Lazy)


def test_a_phase_named_at_call_time(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(step_phases, "time", fake)
    modes = iter(["forward", "old log-probs", "forward"])
    with PhaseClock([(Work, "inner", lambda: next(modes))]) as clock:
        Work(fake).outer()
        Work(fake).inner()
    assert dict(clock.seconds) == {"forward": 20.0, "old log-probs": 10.0}


def test_the_report_lists_every_phase_and_the_total():
    clock = PhaseClock([])
    clock.add({"seconds": {"generate": 3.0, "backward": 1.0}, "calls": {"generate": 10, "backward": 10}})
    lines = clock.table(10, title="where it goes").splitlines()
    assert lines[0] == "where it goes"
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert list(rows)[:-1] == [p.split()[0] for p in step_phases.PHASES]
    assert rows["generate"][1:4] == ["300.00", "75.0%", "10"]
    assert rows["total"][1:3] == ["400.00", "100.0%"]


@pytest.mark.parametrize("kl_coef", [0.0, 0.05])
def test_the_loop_on_the_tiny_model_runs_through_the_phases_its_config_implies(tiny_model_dir, tmp_path, kl_coef):
    import time

    import training.loop as loop
    from training.config import TrainConfig
    from training.sink import NullSink

    cfg = TrainConfig.from_dict({"total_steps": 2, "prompts_per_step": 4, "group_size": 4, "max_new_tokens": 6,
                                 "micro_batch_size": 8, "kl_coef": kl_coef, "samples_per_step": 1, "seed": 3,
                                 "dynamic_sampling": False})
    metrics = []

    class Sink(NullSink):
        def on_metrics(self, step, m):
            metrics.append(m)

    original_train = loop.train
    with PhaseClock(step_phases.seedbed_phases()) as clock:
        t0 = time.perf_counter()
        loop.train(cfg, str(tmp_path), clock.wrap_sink(Sink()))
        wall = time.perf_counter() - t0
    assert loop.train is original_train
    calls, seconds = clock.calls, clock.seconds
    assert len(metrics) == 2 and calls["generate"] == 2 and calls["score"] == 2
    assert calls["old log-probs"] == (2 if kl_coef else 0)
    assert calls["forward"] == calls["backward"] == 2 * 2  # 16 sequences in micro-batches of 8, each step
    assert calls["optimizer"] == 2 * 2  # clipping and AdamW's step
    assert calls["checkpoint"] == 1 and calls["logging"] >= 2 * 3  # metrics, samples and signals each step
    assert all(seconds[p] > 0 for p in ("setup", "generate", "score", "forward", "backward", "optimizer", "loss"))
    assert sum(seconds.values()) <= wall
    assert sum(m["step_time_s"] for m in metrics) <= sum(seconds.values())
