"""``engine: command``: any trainer, through the JSONL event contract (``training.engines.events``).

A config may never name code or a command line (docs/architecture.md#engines-and-distribution), so commands are the operator's: a YAML or JSON
file named by the ``SEEDBED_COMMANDS`` environment variable of the web app and the workers maps a name to an
argument list, and a run's config names one (``command: my_trainer``):

    my_trainer:
      argv: [/opt/lab/venv/bin/python, /opt/lab/train.py, --config, "{config}"]
      help: Our in-house PPO trainer

The placeholders ``{config}`` (the run's resolved Seedbed config, a JSON file in the run's folder),
``{out_dir}`` (the run's folder, also the working directory), ``{events}`` (where to append events),
``{stop_file}`` (created when the run must stop: save, then exit) and ``{nproc}`` (``nproc_per_node``) are
filled in per run; the same paths are in the environment as SEEDBED_CONFIG, SEEDBED_RUN_DIR,
SEEDBED_EVENTS and SEEDBED_STOP_FILE. The program streams ``{"step": N, "metrics": {...}}`` lines (and
optionally samples and checkpoints) to the events file; Seedbed shows them live, applies sweep policies to
them, and stops the program through the stop file, then SIGTERM and SIGKILL to its process group.
"""
from __future__ import annotations

import json
import os

from training.engines import METRICS_FROM_EVENTS, Engine, one_node_lacks
from training.engines.process import EVENTS_FILE, STOP_FILE, run_process

COMMANDS_ENV = "SEEDBED_COMMANDS"
PLACEHOLDERS = ("config", "out_dir", "events", "stop_file", "nproc")
MAX_COMMANDS = 100


def registered_commands() -> dict[str, dict]:
    """The operator's commands (name -> {"argv": [...], "help": str}); {} when none are registered. A file that
    breaks the format raises ValueError naming the problem (the operator's mistake, shown by the doctor)."""
    path = os.environ.get(COMMANDS_ENV, "")
    if not path:
        return {}
    import yaml

    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh) or {}
    if not isinstance(data, dict) or len(data) > MAX_COMMANDS:
        raise ValueError(f"{path}: expected a mapping of at most {MAX_COMMANDS} command names")
    out = {}
    for name, spec in data.items():
        argv = spec.get("argv") if isinstance(spec, dict) else None
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError(f"{path}: command {name!r} needs argv, a non-empty list of strings")
        out[str(name)] = {"argv": argv, "help": str(spec.get("help", ""))}
    return out


def command_errors(cfg) -> dict[str, str]:
    if not cfg.command:
        return {"command": "name one of the commands the operator registered"}
    try:
        commands = registered_commands()
    except (OSError, ValueError) as exc:
        return {"command": f"the operator's command list cannot be read: {exc}"}
    if cfg.command not in commands:
        names = ", ".join(sorted(commands)) or "none are registered on this server"
        return {"command": f"unknown command {cfg.command!r}; registered: {names}"}
    return {}


def command_argv(cfg, out_dir: str) -> list[str]:
    """The registered argv with the run's placeholders filled in (and nothing else: a literal brace in the
    operator's argv stays as it is)."""
    values = {"config": os.path.join(out_dir, "seedbed_config.json"), "out_dir": out_dir,
              "events": os.path.join(out_dir, EVENTS_FILE), "stop_file": os.path.join(out_dir, STOP_FILE),
              "nproc": str(cfg.nproc_per_node)}
    argv = []
    for arg in registered_commands()[cfg.command]["argv"]:
        for key in PLACEHOLDERS:
            arg = arg.replace("{" + key + "}", values[key])
        argv.append(arg)
    return argv


def run_command(cfg, out_dir: str, sink, should_stop):
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    config_path = os.path.join(out_dir, "seedbed_config.json")
    with open(config_path, "w", encoding="utf-8") as fh:
        json.dump(cfg.to_dict(), fh, indent=2, sort_keys=True)
    sink.truncate_after(0)  # a command has no resume contract: each attempt starts over
    return run_process(command_argv(cfg, out_dir), out_dir=out_dir, sink=sink, should_stop=should_stop,
                       env={**os.environ, "SEEDBED_CONFIG": config_path},
                       on_engine_config=sink.on_engine_config)


def commands_registered() -> bool:
    """At least one command is registered (the engine is offered); a broken list offers none (the form says why)."""
    try:
        return bool(registered_commands())
    except (OSError, ValueError):
        return False


ENGINE = Engine(
    name="command", label="command: a trainer the operator registered", run=run_command, order=30,
    lacks=one_node_lacks("command", command=False), errors=command_errors, available=commands_registered,
    launch="the operator's registered argv ($SEEDBED_COMMANDS), a process group Seedbed owns",
    metrics=METRICS_FROM_EVENTS + " (the JSONL event contract)", resolved_config="{command}'s resolved config")
