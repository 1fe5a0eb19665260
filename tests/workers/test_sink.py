"""DatabaseSink batching and the runner's should_stop(), against the real database (fake clocks only)."""
import pytest

from tests.conftest import tiny_config
from webapp.runs import services
from webapp.runs.models import Checkpoint, MetricPoint, Run, RunStatus, Sample
from workers.runner import StopFlag
from workers.sink import DatabaseSink

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def run(tiny_model_dir):
    run = services.run_create(config=tiny_config())
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    return run


def stored_steps(run):
    return sorted(set(MetricPoint.objects.filter(run=run).values_list("step", flat=True)))


def test_metrics_are_written_in_batches_and_flush_writes_the_rest(run):
    clock = Clock()
    sink = DatabaseSink(run.pk, flush_every_s=0.5, clock=clock, echo=None)
    sink.on_metrics(1, {"reward/mean": 0.1, "entropy": 2.0})  # first emission: written at once
    assert stored_steps(run) == [1]
    clock.now += 0.1
    sink.on_samples(2, [{"prompt": "1+1=", "completion": "2", "answer": "2", "reward": 1.0, "details": {}}])
    sink.on_metrics(2, {"reward/mean": 0.2, "entropy": 1.9})
    clock.now += 0.1
    sink.on_metrics(3, {"reward/mean": 0.3, "entropy": 1.8})
    assert stored_steps(run) == [1]  # buffered: less than 0.5 s since the last write
    clock.now += 0.4
    sink.on_metrics(4, {"reward/mean": 0.4, "entropy": 1.7})
    assert stored_steps(run) == [1, 2, 3, 4]  # one bulk insert of three steps
    assert Sample.objects.get(run=run).step == 2
    clock.now += 0.1
    sink.on_metrics(5, {"reward/mean": 0.5, "entropy": 1.6})
    sink.flush()
    assert stored_steps(run) == [1, 2, 3, 4, 5]
    run.refresh_from_db()
    assert run.last_step == 5


def test_a_buffer_that_fills_up_is_written_before_the_interval(run):
    clock = Clock()
    sink = DatabaseSink(run.pk, flush_every_s=10, max_points=4, clock=clock, echo=None)
    sink.on_metrics(1, {"a": 1.0})
    sink.on_metrics(2, {"a": 1.0, "b": 2.0})
    assert stored_steps(run) == [1]
    sink.on_metrics(3, {"a": 1.0, "b": 2.0})
    assert stored_steps(run) == [1, 2, 3]


def test_checkpoint_flushes_first_and_truncate_forgets_later_steps(run):
    sink = DatabaseSink(run.pk, flush_every_s=10, clock=Clock(), echo=None)
    for step in range(1, 6):
        sink.on_metrics(step, {"reward/mean": step / 10})
    sink.on_checkpoint(5, "/runs/x/checkpoints/step-5")
    assert stored_steps(run) == [1, 2, 3, 4, 5] and Checkpoint.objects.get(run=run).step == 5
    # a new attempt resumes from a checkpoint at step 3: steps 4 and 5 are emitted again
    resumed = DatabaseSink(run.pk, clock=Clock(), echo=None)
    resumed.truncate_after(3)
    assert stored_steps(run) == [1, 2, 3]
    resumed.on_metrics(4, {"reward/mean": 0.44})
    resumed.flush()
    assert MetricPoint.objects.get(run=run, step=4).value == 0.44


def test_should_stop_reads_the_kill_flag_at_most_every_interval(run, django_assert_num_queries):
    clock = Clock()
    stop = StopFlag(run.pk, every_s=0.3, clock=clock)
    with django_assert_num_queries(1):
        assert stop() is False
        clock.now += 0.1
        assert stop() is False  # within 0.3 s: answered without a query
    services.run_kill(run_id=run.pk, killed_by="user:test")
    clock.now += 0.1
    assert stop() is False  # the flag is seen at the next read, not before
    clock.now += 0.2
    assert stop() is True and stop.reason == "kill requested"


def test_should_stop_when_the_run_was_declared_lost(run):
    Run.objects.filter(pk=run.pk).update(status=RunStatus.LOST)
    stop = StopFlag(run.pk, clock=Clock())
    assert stop() is True and stop.reason == "run is lost"


def test_a_process_whose_run_was_taken_over_stops_and_writes_nothing(run):
    """A training process holds its run by the claim (worker, attempt) its task made. Once another worker holds
    the run (it was declared lost and resumed elsewhere, or a new run got the same id after the old one was
    deleted), the old process stops, and none of its metrics, samples, checkpoints or truncations land."""
    Run.objects.filter(pk=run.pk).update(worker="host:1", attempts=1)
    claim = ("host:1", 1)
    mine = DatabaseSink(run.pk, flush_every_s=0, clock=Clock(), echo=None, claim=claim)
    mine.on_metrics(1, {"reward/mean": 0.5})
    assert stored_steps(run) == [1] and StopFlag(run.pk, clock=Clock(), claim=claim)() is False

    Run.objects.filter(pk=run.pk).update(worker="host:2", attempts=2)  # another worker resumed it
    mine.on_metrics(2, {"reward/mean": 0.9})
    mine.on_samples(2, [{"prompt": "p", "completion": "c", "reward": 1.0}])
    mine.on_checkpoint(2, "/nowhere")
    mine.truncate_after(0)
    assert stored_steps(run) == [1] and not Sample.objects.exists() and not Checkpoint.objects.exists()
    stop = StopFlag(run.pk, clock=Clock(), claim=claim)
    assert stop() is True and stop.reason == "run taken over by host:2 (attempt 2)"
    assert services.run_heartbeat(run_id=run.pk, worker="host:1") is False
    assert services.run_heartbeat(run_id=run.pk, worker="host:2") is True
    assert services.run_record_exit(run_id=run.pk, outcome="failed", detail="old", worker="host:1") == "running"
    assert Run.objects.get(pk=run.pk).error == ""

    Run.objects.filter(pk=run.pk).delete()
    gone = StopFlag(run.pk, clock=Clock(), claim=claim)
    assert gone() is True and gone.reason == "run no longer exists"


@pytest.mark.django_db
def test_the_ranks_last_report_is_stored_when_the_ranks_have_exited(run):
    now = [0.0]
    sink = DatabaseSink(run.pk, clock=lambda: now[0], echo=None)
    report = lambda step: [{"rank": r, "host": "h", "pid": 10 + r, "step": step, "time": 1.0} for r in (0, 1)]  # noqa: E731
    sink.on_ranks(1, report(1))
    now[0] = 0.5
    sink.on_ranks(2, report(2))  # within the 2 s throttle: held back
    assert [r["step"] for r in Run.objects.get(pk=run.pk).ranks] == [1, 1]
    sink.flush_ranks()  # the ranks exited: where they ended is stored
    assert [r["step"] for r in Run.objects.get(pk=run.pk).ranks] == [2, 2]
