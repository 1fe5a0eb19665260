"""The sink is a protocol: every sink has every event of ``training.sink.Sink`` and no caller probes for one."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from training.distributed import EventSink
from training.engines.verl import VerlProgress
from training.sink import JsonlSink, NullSink, Sink
from workers.runner import NodeSink
from workers.sink import DatabaseSink

ROOT = Path(__file__).resolve().parents[2]
EVENTS = sorted(name for name in vars(Sink) if not name.startswith("_"))


def test_the_protocol_lists_every_event_a_caller_sends():
    assert {"on_metrics", "on_samples", "on_checkpoint", "on_log", "on_completion_signals", "on_engine_config",
            "on_ranks", "flush_ranks", "flush", "truncate_after"} <= set(EVENTS)


@pytest.mark.parametrize("sink_class", [NullSink, JsonlSink, EventSink, VerlProgress, NodeSink, DatabaseSink])
def test_every_sink_has_every_event(sink_class):
    missing = [name for name in EVENTS if not callable(getattr(sink_class, name, None))]
    assert not missing, f"{sink_class.__name__} lacks {missing}"


def test_no_caller_probes_a_sink_for_an_event():
    probes = []
    for folder in ("training", "workers", "webapp"):
        for path in (ROOT / folder).rglob("*.py"):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"(hasattr|getattr)\(\s*(self\.)?sink\b", line):
                    probes.append(f"{path.relative_to(ROOT)}:{n}")
    assert not probes, probes


def test_a_jsonl_sink_ignores_the_events_it_does_not_keep(tmp_path):
    sink = JsonlSink(str(tmp_path))
    sink.on_engine_config({"lr": 1e-6})
    sink.on_ranks(1, [{"rank": 0}])
    sink.flush_ranks()
    sink.on_metrics(1, {"reward/mean": 0.5})
    sink.flush()
    assert (tmp_path / "metrics.jsonl").read_text().count("\n") == 1
