"""One function per command: ``(client, args) -> exit code``. Each makes the API calls, prints the answer
(a table, a line, or JSON for the ``get`` commands) and returns 0; failures are exceptions that ``cli`` turns
into one ``error: ...`` line and an exit code."""
from __future__ import annotations

import json
import urllib.parse
from typing import Any

from .client import SeedbedClient
from .text import printable
from .watch import watch_run

MAX_CONFIG_BYTES = 1_000_000


class ConfigError(Exception):
    """A config file that cannot be read, parsed or sent: reported as ``error: <field>: ...`` (exit 2)."""

    field = "config"


class DataFileError(ConfigError):
    """A data file to upload that cannot be read: ``error: file: ...``."""

    field = "file"


# --- config files -------------------------------------------------------------------------------------------------

def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text") from None
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path} is larger than {MAX_CONFIG_BYTES // 1000} kB")
    return text


def _parse(path: str, text: str) -> Any:
    if path.endswith(".json"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path} is not valid JSON: {exc}") from None
    import yaml  # only the config commands need PyYAML

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {str(exc).splitlines()[0]}") from None


def load_config(path: str) -> dict:
    """The mapping in a YAML (or .json) config file, as ``python -m training run`` reads it."""
    data = _parse(path, _read_text(path))
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of settings (key: value); got {type(data).__name__}")
    try:
        json.dumps(data)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path} holds a value JSON cannot carry: {exc}") from None
    return data


# --- output -------------------------------------------------------------------------------------------------------

def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True))  # ensure_ascii: every control character is a \u escape


def say(line: str) -> None:
    """Print one line that carries the server's words (a name, a reason): its control characters escaped."""
    print(printable(line))


def format_table(headers: list[str], rows: list[list[Any]]) -> str:
    r"""Left-aligned columns, as wide as their widest cell; each cell's control characters escaped, so a
    newline or an escape sequence in a name can neither forge a row nor act on the terminal.

    >>> print(format_table(["ID", "NAME"], [[1, "a\n2  forged"], [2, None]]))
    ID  NAME
    1   a\n2  forged
    2
    """
    cells = [headers] + [[printable(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


NAME_WIDTH = 40  # the runs list's NAME column: a longer name is cut (``--wide``: whole; ``runs get ID``: JSON)


def shorten(text: str, width: int = NAME_WIDTH) -> str:
    """``text`` if it fits in ``width`` characters, else its first ``width - 1`` and "…" (so a table row stays one
    line: one long name would otherwise widen every row's NAME column).

    >>> shorten("a run", 8), shorten("a longer run name", 8)
    ('a run', 'a longe…')
    """
    return text if len(text) <= width else text[:width - 1] + "…"


def _launch_fields(args) -> dict:
    fields = {"config": load_config(args.config), "name": args.name}
    if args.project:
        fields["project"] = args.project
    if getattr(args, "queue", None):
        fields["queue"] = args.queue
    return fields


# --- runs ---------------------------------------------------------------------------------------------------------

def runs_list(client: SeedbedClient, args) -> int:
    runs = client.get("/runs", project=args.project, status=args.status, limit=args.limit)["runs"]
    name = (lambda text: text) if args.wide else shorten
    rows = [[r["id"], name(printable(r.get("display_name") or r["name"])), r["project"], _status_text(r),
             f"{r['last_step']}/{r['total_steps']}"] for r in runs]
    print(format_table(["ID", "NAME", "PROJECT", "STATUS", "STEP"], rows))
    return 0


def _status_text(run: dict) -> str:
    """A run's STATUS cell: "running, stalled 250 s" for a run whose step has not advanced for far longer than
    its steps take (the server's stall rule), else its status.

    >>> _status_text({"status": "running", "stalled": True, "stalled_for_s": 250.4}), _status_text({"status": "queued"})
    ('running, stalled 250 s', 'queued')
    """
    if run.get("stalled"):
        return f"{run['status']}, stalled {run.get('stalled_for_s') or 0:.0f} s"
    return run["status"]


def runs_launch(client: SeedbedClient, args) -> int:
    created = client.launch("/runs", _launch_fields(args))
    say(f"run {created['id']} {created['status']} in project {created['project']}")
    return 0


def runs_get(client: SeedbedClient, args) -> int:
    print_json(client.get(f"/runs/{args.id}"))
    return 0


def runs_kill(client: SeedbedClient, args) -> int:
    answer = client.post(f"/runs/{args.id}/kill", {"reason": args.reason})
    note = "" if answer["status"] == "killed" else " (kill requested: it stops at its next step)"
    say(f"run {answer['id']} {answer['status']}{note}")
    return 0


def runs_resume(client: SeedbedClient, args) -> int:
    answer = client.post(f"/runs/{args.id}/resume")
    say(f"run {answer['id']} {answer['status']}")
    return 0


def runs_watch(client: SeedbedClient, args) -> int:
    return watch_run(client, args.id, args.interval)


# --- sweeps and evaluations ---------------------------------------------------------------------------------------

def sweeps_launch(client: SeedbedClient, args) -> int:
    body = {**_launch_fields(args), "seeds": args.seeds, "concurrency": args.concurrency, "pack": args.pack,
            "policy": {"name": args.policy}}
    if args.budget is not None:  # the server checks it (a field error naming budget)
        body.update(free_slot_use="new_seed", budget=args.budget)
    created = client.launch("/sweeps", body)
    runs = ", ".join(map(str, created["runs"]))
    say(f"sweep {created['id']} in project {created['project']}: {len(created['runs'])} runs ({runs})")
    return 0


def sweeps_list(client: SeedbedClient, args) -> int:
    sweeps = client.get("/sweeps", project=args.project, limit=args.limit)["sweeps"]
    rows = [[s["id"], s["name"], s["project"], len(s["seeds"]), s["concurrency"], s.get("pack", 1),
             s["policy"].get("name", "")]
            for s in sweeps]
    print(format_table(["ID", "NAME", "PROJECT", "SEEDS", "CONCURRENCY", "PACK", "POLICY"], rows))
    return 0


def sweeps_policies(client: SeedbedClient, args) -> int:
    """The early-stopping rules the server knows (its one registry), each with its summary and parameters."""
    for rule in client.get("/sweeps/policies")["policies"]:
        params = ", ".join(f"{p['name']} {'required' if p['required'] else p['default']}"
                           + (f" ({p['range']})" if p["range"] else "") for p in rule["params"])
        print(f"{rule['name']}: {rule['summary']}" + (f"\n  waiting: {rule['waiting']}" if rule["waiting"] else "")
              + (f"\n  params: {params}" if params else ""))
    return 0


def sweeps_get(client: SeedbedClient, args) -> int:
    print_json(client.get(f"/sweeps/{args.id}"))
    return 0


def sweeps_stop(client: SeedbedClient, args) -> int:
    answer = client.post(f"/sweeps/{args.id}/stop", {"reason": args.reason})
    killed = ", ".join(map(str, answer["killed"])) or "none was still live"
    say(f"sweep {answer['id']} stopped by {answer['stopped_by']}; runs killed: {killed}")
    return 0


def evals_list(client: SeedbedClient, args) -> int:
    jobs = client.get("/evals", project=args.project, limit=args.limit)["evals"]
    rows = [[j["id"], j["name"], j["project"], j["task"], j["status"], f"{j['done']}/{j['total']}"] for j in jobs]
    print(format_table(["ID", "NAME", "PROJECT", "TASK", "STATUS", "DONE"], rows))
    return 0


def evals_get(client: SeedbedClient, args) -> int:
    print_json(client.get(f"/evals/{args.id}"))
    return 0


# --- projects -----------------------------------------------------------------------------------------------------

def projects_list(client: SeedbedClient, args) -> int:
    projects = client.get("/projects")["projects"]
    rows = [[p["name"], p["role"], "yes" if p["personal"] else ""] for p in projects]
    print(format_table(["NAME", "ROLE", "PERSONAL"], rows))
    return 0


def projects_create(client: SeedbedClient, args) -> int:
    created = client.post("/projects", {"name": args.name})
    say(f"project {created['name']} created; you are its {created['role']}")
    return 0


def projects_add_member(client: SeedbedClient, args) -> int:
    path = f"/projects/{urllib.parse.quote(args.name, safe='')}/members"
    added = client.post(path, {"username": args.username, "role": args.role})
    say(f"{added['username']} is {added['role']} in project {added['project']}")
    return 0


# --- datasets -----------------------------------------------------------------------------------------------------

MAX_UPLOAD_BYTES = 2_000_000_000  # the server has its own (smaller) limit and says so


def datasets_list(client: SeedbedClient, args) -> int:
    datasets = client.get("/datasets", project=args.project)["datasets"]
    rows = [[d["id"], d["task"], d["project"], d["rows"], d["source"]] for d in datasets]
    print(format_table(["ID", "TASK", "PROJECT", "ROWS", "SOURCE"], rows))
    return 0


def datasets_get(client: SeedbedClient, args) -> int:
    print_json(client.get(f"/datasets/{args.id}"))
    return 0


def datasets_upload(client: SeedbedClient, args) -> int:
    try:
        with open(args.file, "rb") as fh:
            content = fh.read(MAX_UPLOAD_BYTES + 1)
    except OSError as exc:
        raise DataFileError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    fields = {"name": args.name, "project": args.project, "prompt_field": args.prompt_field,
              "answer_field": args.answer_field, "held_out_fraction": args.held_out_fraction,
              "split_seed": args.split_seed}
    created = client.post_file("/datasets", fields, "file", args.file, content)
    say(f"dataset {created['name']}: {created['rows']} rows in project {created['project']}; "
          f"a config names it as task: {created['task']}")
    return 0
