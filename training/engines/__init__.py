"""Training engines, one registry (docs/architecture.md#engines-and-distribution): ``run_engine(cfg, out_dir, sink,
should_stop)`` trains a config with the engine it names.

Each engine is one module of this package that declares ``ENGINE = Engine(...)`` at its top level: its name, the
form's label, the knobs it lacks, whether this server can run it, its own config rules, how it launches and how
its metrics arrive. Built in:

- ``seedbed`` (``training.engines.seedbed``): Seedbed's own loop, in this process or under torchrun;
- ``trl`` (``training.engines.trl``): TRL's ``GRPOTrainer`` under ``torchrun --nproc-per-node N``;
- ``verl`` (``training.engines.verl``): ``python -m verl.trainer.main_ppo`` with hydra overrides (GPU only);
- ``command`` (``training.engines.command``): a trainer of the operator's, registered by name, that writes the
  JSONL event contract (``training.engines.events``).

The form (``webapp.runs.forms``), the config check (``TrainConfig.validate`` through ``engine_errors``), the run
page and the worker read this registry, so a new engine is a new module here (copy ``command.py``) plus its tests.
The registry imports the package's modules when first asked and keeps what each declares (``training.extensions``:
an engine module imports this package, never the other way round at import time).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from training.extensions import declared

METRICS_IN_PROCESS = "in process"  # Engine.metrics: the loop calls the run's sink itself
METRICS_FROM_EVENTS = "events file"  # Engine.metrics: JSONL events the engine appends, run_process tails to the sink



def _always() -> bool:
    return True


def _no_errors(cfg) -> dict[str, str]:
    return {}


@dataclass(frozen=True)
class Engine:
    """One trainer Seedbed can run a config with.

    ``run(cfg, out_dir, sink, should_stop, node_rank=None, master=None)`` trains (or resumes) and returns
    (status, last step); ``node_rank``/``master`` place one node of a run that spans machines (``nodes``).
    ``lacks`` maps each knob the engine does not have to the field error for a value other than its default (the
    form hides those knobs under this engine); ``errors(cfg)`` adds the engine's other rules. ``launch`` and
    ``metrics`` say how it starts and how its metrics reach the run (``METRICS_IN_PROCESS`` or
    ``METRICS_FROM_EVENTS``, then how): the run page's engine badge shows them. ``resolved_config`` titles the run
    page's section of the engine's own resolved config ("" when it has none besides Seedbed's; ``{command}`` is
    the config's command)."""

    name: str
    label: str
    run: Callable
    lacks: Mapping[str, str] = field(default_factory=dict)
    errors: Callable[[object], dict] = _no_errors
    available: Callable[[], bool] = _always
    launch: str = ""
    metrics: str = METRICS_FROM_EVENTS
    resolved_config: str = ""
    version: tuple[str, str] | tuple[()] = ()  # (key of its version in its resolved config, what it versions)
    nodes: bool = False  # spans several machines (nnodes > 1), on a Slurm queue's nodes
    resumes_on_other_ranks: bool = False  # its checkpoints load at any number of ranks
    order: int = 100  # the form lists engines by this, then by name

    def config_errors(self, cfg) -> dict[str, str]:
        """Field errors of ``cfg`` under this engine: each knob it lacks set away from its default, then its rules."""
        defaults = type(cfg)()
        e = {knob: message for knob, message in self.lacks.items() if getattr(cfg, knob) != getattr(defaults, knob)}
        for knob, message in self.errors(cfg).items():
            e.setdefault(knob, message)
        return e


def one_node_lacks(name: str, *, command: bool = True) -> dict[str, str]:
    """The knobs an engine other than seedbed lacks: several machines, the loop's ranks strategy, and (unless it is
    the command engine) a command."""
    lacks = {"nnodes": f"the {name} engine runs on one node here; several nodes are for engine seedbed",
             "strategy": f"the {name} engine chooses its own parallelism; ddp and fsdp are for engine seedbed",
             "collective_timeout_s": f"the {name} engine keeps torch's own collective timeout; this one is for "
                                     "engine seedbed"}
    if command:
        lacks["command"] = "only for engine command"
    return lacks


_REGISTRY: dict[str, Engine] = {}
_discovered = False


def register_engine(engine: Engine) -> Engine:
    """Add (or replace) an engine by its name; returns it."""
    _REGISTRY[engine.name] = engine
    return engine


def engine_modules() -> list[str]:
    """The modules of this package that declare an engine (``ENGINE = Engine(...)`` at their top level)."""
    return [module for module, _ in declared(__name__, "ENGINE")]


def _discover() -> None:
    global _discovered
    if not _discovered:
        for _, engine in declared(__name__, "ENGINE"):
            _REGISTRY.setdefault(engine.name, engine)
        _discovered = True


def engines() -> list[Engine]:
    """Every registered engine, in the form's order."""
    _discover()
    return sorted(_REGISTRY.values(), key=lambda e: (e.order, e.name))


def engine_names() -> list[str]:
    return [e.name for e in engines()]


def engine_named(name: str) -> Engine:
    """The engine called ``name``; KeyError naming the registered ones when there is none."""
    _discover()
    if name not in _REGISTRY:
        raise KeyError(f"unknown engine {name!r}; registered: {', '.join(engine_names())}")
    return _REGISTRY[name]


def engine_errors(cfg) -> dict[str, str]:
    """Field errors of ``cfg`` for its engine: knobs the engine lacks, settings it needs."""
    return engine_named(cfg.engine).config_errors(cfg)


def available_engines() -> list[str]:
    """The engines this machine can run (each engine's ``available``: seedbed always; trl when TRL is installed;
    verl when verl is installed and a CUDA GPU is present; command when the operator registered a command)."""
    return [e.name for e in engines() if e.available()]


def engine_knobs_lacked() -> dict[str, list[str]]:
    """knob -> the engines that lack it, for every knob some engine lacks (the form hides it under those)."""
    out: dict[str, list[str]] = {}
    for engine in engines():
        for knob in engine.lacks:
            out.setdefault(knob, []).append(engine.name)
    return out


def run_engine(cfg, out_dir: str, sink, should_stop: Callable[[], bool] = lambda: False, *,
               node_rank: int | None = None, master: tuple[str, int] | None = None):
    """Train ``cfg`` with its engine; returns a ``training.sink.TrainResult``. ``node_rank``/``master``: this
    process is one node of a run over several machines (an engine with ``nodes``)."""
    from training.sink import TrainResult

    engine = engine_named(cfg.engine)
    placement = {} if node_rank is None else {"node_rank": node_rank, "master": master}
    status, step = engine.run(cfg, out_dir, sink, should_stop, **placement)
    return TrainResult(status, step, out_dir)
