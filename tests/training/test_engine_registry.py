"""The engine registry (training.engines; docs/architecture.md#extension-points): every engine is one module that
declares ``ENGINE = Engine(...)``; the config check, the form's choices and the worker's dispatch read the
registry, so an engine registered by one file (here: by a test, and by a module in a folder of its own) is
offered, validated and run with no other file changed."""
from __future__ import annotations

import sys

import pytest

import training.engines as registry
from training.config import TrainConfig, choices_of, field_specs
from training.engines import Engine, engine_errors, engine_modules, engine_named, engine_names, run_engine
from training.fields import FieldErrors
from training.sink import NullSink

TOY_MODULE = '''
from training.engines import Engine


def run_toy(cfg, out_dir, sink, should_stop):
    sink.on_metrics(1, {"reward/mean": 0.5})
    return "succeeded", 1


ENGINE = Engine(name="toy", label="toy: a throw-away engine", run=run_toy,
                lacks={"dual_clip": "the toy engine has no dual clip"})
'''


@pytest.fixture
def fresh_registry(monkeypatch):
    """The registry as a new process finds it; what a test adds is gone afterwards."""
    monkeypatch.setattr(registry, "_REGISTRY", {})
    monkeypatch.setattr(registry, "_discovered", False)


def test_the_built_in_engines_are_the_modules_that_declare_one(fresh_registry):
    assert engine_modules() == ["training.engines.command", "training.engines.seedbed", "training.engines.trl",
                                "training.engines.verl"]
    assert engine_names() == ["seedbed", "trl", "verl", "command"]  # the form's order
    assert choices_of("engine") == ("seedbed", "trl", "verl", "command")
    assert next(s for s in field_specs() if s["name"] == "engine")["choices"] == engine_names()
    seedbed = engine_named("seedbed")
    assert seedbed.resumes_on_other_ranks and seedbed.nodes and not seedbed.resolved_config
    assert engine_named("trl").version == ("trl_version", "TRL")
    with pytest.raises(KeyError, match="unknown engine 'nope'; registered: seedbed, trl, verl, command"):
        engine_named("nope")


def test_a_knob_an_engine_lacks_is_refused_at_its_field_with_the_engines_message():
    errors = engine_errors(TrainConfig(engine="trl", nnodes=2, dynamic_sampling=True))
    assert errors["nnodes"] == "the trl engine runs on one node here; several nodes are for engine seedbed"
    assert errors["dynamic_sampling"] == "the trl engine (TRL's GRPOTrainer) has no dynamic sampling; use engine seedbed"
    assert engine_errors(TrainConfig(command="x"))["command"] == "only for engine command"
    verl = engine_errors(TrainConfig(engine="verl", rollout_engine="vllm", opsm_delta=0.1))
    assert verl["opsm_delta"].startswith("the verl engine has no opsm_delta: it has no off-policy sequence masking")


def test_an_engine_registered_in_a_test_is_a_choice_validates_and_runs(fresh_registry, tmp_path):
    with pytest.raises(FieldErrors) as err:
        TrainConfig.from_dict({"engine": "toy"}, check_paths=False)
    assert err.value.errors["engine"] == "must be one of seedbed, trl, verl, command; got 'toy'"

    ran = []
    registry.register_engine(Engine(name="toy", label="toy", lacks={"dual_clip": "the toy engine has no dual clip"},
                                    run=lambda cfg, out_dir, sink, stop: ran.append(cfg.engine) or ("succeeded", 3)))
    assert "toy" in choices_of("engine") and "toy" in registry.available_engines()
    cfg = TrainConfig.from_dict({"engine": "toy"}, check_paths=False)
    with pytest.raises(FieldErrors) as err:
        TrainConfig.from_dict({"engine": "toy", "dual_clip": 3.0}, check_paths=False)
    assert err.value.errors == {"dual_clip": "the toy engine has no dual clip"}
    result = run_engine(cfg, str(tmp_path), NullSink())
    assert ran == ["toy"] and (result.status, result.step, result.out_dir) == ("succeeded", 3, str(tmp_path))


def test_a_new_engine_is_one_module_file(fresh_registry, tmp_path, monkeypatch):
    """A module beside the built-in ones that declares ENGINE is found, offered and run: nothing else names it."""
    (tmp_path / "toy.py").write_text(TOY_MODULE)
    monkeypatch.setattr(registry, "__path__", [*registry.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "training.engines.toy", raising=False)
    try:
        assert "training.engines.toy" in engine_modules() and engine_names()[-1] == "toy"
        assert engine_named("toy").label == "toy: a throw-away engine"
        sink = type("Sink", (NullSink,), {"on_metrics": lambda self, step, m: self.got.append((step, m))})()
        sink.got = []
        result = run_engine(TrainConfig.from_dict({"engine": "toy"}, check_paths=False), str(tmp_path), sink)
        assert result.status == "succeeded" and sink.got == [(1, {"reward/mean": 0.5})]
    finally:
        sys.modules.pop("training.engines.toy", None)


def test_the_worker_places_a_node_only_for_an_engine_that_spans_machines(fresh_registry, tmp_path):
    seen = []

    def run(cfg, out_dir, sink, stop, **placement):
        seen.append(placement)
        return "succeeded", 1

    registry.register_engine(Engine(name="toy", label="toy", run=run, nodes=True))
    cfg = TrainConfig.from_dict({"engine": "toy"}, check_paths=False)
    run_engine(cfg, str(tmp_path), NullSink())
    run_engine(cfg, str(tmp_path), NullSink(), node_rank=1, master=("10.0.0.5", 29411))
    assert seen == [{}, {"node_rank": 1, "master": ("10.0.0.5", 29411)}]
