"""The command line: argument parsing, the server address and token, and turning every failure into
``error: ...`` lines on stderr with an exit code (no traceback):

    0 done   1 a watched run did not succeed, or the server answered oddly   2 bad input (400, config, settings)
    3 token refused (401)   4 forbidden, not found or a conflict (403/404/409)   5 server unreachable   130 Ctrl-C
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Callable

from . import commands
from .client import ApiError, RedirectRefused, SeedbedClient, Unreachable
from .text import printable

URL_VAR, TOKEN_VAR = "SEEDBED_URL", "SEEDBED_TOKEN"
RUN_STATUSES = ("queued", "running", "succeeded", "failed", "killed", "lost")
REFUSALS = {403: "forbidden", 404: "not found", 409: "conflict"}  # the word before the server's detail
TOKEN_HELP = "make one with `python manage.py api_token USERNAME` or on the API tokens page at {root}/account/tokens/"


class Failure(Exception):
    """Something to report as ``lines`` on stderr, exiting with ``code``."""

    def __init__(self, code: int, *lines: str):
        super().__init__(lines[0] if lines else "")
        self.code, self.lines = code, lines


# --- the parser ---------------------------------------------------------------------------------------------------

class OneLineErrors(argparse.ArgumentParser):
    """A usage mistake is one ``error: ...`` line too (exit 2), not argparse's usage block."""

    def error(self, message: str):
        print(printable(f"error: {message} (see: {self.prog} --help)"), file=sys.stderr)
        sys.exit(2)


def _connection_options() -> argparse.ArgumentParser:
    """--url/--token, accepted before or after the command (SUPPRESS: an absent option leaves no attribute)."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--url", default=argparse.SUPPRESS, help=f"server address (default: ${URL_VAR})")
    options.add_argument("--token", default=argparse.SUPPRESS, help=f"API token (default: ${TOKEN_VAR})")
    return options


def _command(group, name: str, handler: Callable, help_text: str) -> argparse.ArgumentParser:
    parser = group.add_parser(name, help=help_text, description=help_text, parents=[_connection_options()])
    parser.set_defaults(handler=handler)
    return parser


def _add_launch_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", metavar="CONFIG.yaml", help="a config of `python -m training run` (YAML or JSON)")
    parser.add_argument("--project", help="project name (default: your personal project)")
    parser.add_argument("--name", default="", help="a name to show instead of the id")
    parser.add_argument("--queue", default="", help="where it runs: cpu, gpu or a registered queue such as a Slurm "
                                                     "cluster's (default: the one its device needs)")


def _runs_commands(group) -> None:
    p = _command(group, "list", commands.runs_list, "list runs: id, name, project, status (', stalled N s' when "
                 "its step has not advanced for far longer than its steps take), step/total")
    p.add_argument("--project")
    p.add_argument("--status", choices=RUN_STATUSES)
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--wide", action="store_true",
                   help=f"whole names (by default a name longer than {commands.NAME_WIDTH} characters is cut, with …)")
    _add_launch_options(_command(group, "launch", commands.runs_launch, "launch a run from a config file"))
    _command(group, "get", commands.runs_get, "a run as JSON").add_argument("id", type=int)
    p = _command(group, "kill", commands.runs_kill, "kill a queued or running run")
    p.add_argument("id", type=int)
    p.add_argument("--reason", default="", help="recorded with the kill")
    _command(group, "resume", commands.runs_resume, "queue a killed, lost or failed run again").add_argument(
        "id", type=int)
    p = _command(group, "watch", commands.runs_watch, "follow a run until it ends (exit 0 if it succeeded)")
    p.add_argument("id", type=int)
    p.add_argument("--interval", type=float, default=2.0, help="seconds between polls (default 2)")


def _sweeps_commands(group) -> None:
    p = _command(group, "list", commands.sweeps_list, "list sweeps: id, name, project, seeds, concurrency, policy")
    p.add_argument("--project")
    p.add_argument("--limit", type=int, default=100)
    p = _command(group, "launch", commands.sweeps_launch, "launch a seed sweep from a config file")
    _add_launch_options(p)
    p.add_argument("--seeds", type=int, default=4, help="how many seeds, from the config's seed on (default 4)")
    p.add_argument("--concurrency", type=int, default=2, help="runs at a time (default 2)")
    p.add_argument("--pack", type=int, default=0, help="seeds that may train together in one process (packed, each "
                   "as if alone; default 0: chosen from the queue's workers; 1: each its own)")
    p.add_argument("--policy", default="median", help="early stopping policy (the list: sweeps policies)")
    p.add_argument("--budget", type=int, default=None,
                   help="compute budget in full runs (at least --seeds): slots freed by stops start new seeds, each "
                        "only if it can run to its end within the budget (default: none, no new seeds)")
    _command(group, "policies", commands.sweeps_policies, "the early-stopping rules and their parameters")
    _command(group, "get", commands.sweeps_get, "a sweep and its runs as JSON").add_argument("id", type=int)
    p = _command(group, "stop", commands.sweeps_stop, "stop a whole sweep: kill its live runs, start nothing more")
    p.add_argument("id", type=int)
    p.add_argument("--reason", default="", help="recorded with the stop")


def _evals_commands(group) -> None:
    p = _command(group, "list", commands.evals_list, "list evaluations: id, name, project, task, status, progress")
    p.add_argument("--project")
    p.add_argument("--limit", type=int, default=100)
    _command(group, "get", commands.evals_get, "an evaluation and its pass@k table as JSON").add_argument(
        "id", type=int)


def _projects_commands(group) -> None:
    _command(group, "list", commands.projects_list, "your projects and your role in each")
    _command(group, "create", commands.projects_create, "create a project (you become its admin)").add_argument(
        "name")
    p = _command(group, "add-member", commands.projects_add_member, "add a member or change their role")
    p.add_argument("name", help="project")
    p.add_argument("username")
    p.add_argument("role", choices=("viewer", "member", "admin"))


def _datasets_commands(group) -> None:
    _command(group, "list", commands.datasets_list, "your projects' datasets").add_argument("--project")
    _command(group, "get", commands.datasets_get, "a dataset (columns, first rows, mapping) as JSON").add_argument(
        "id", type=int)
    p = _command(group, "upload", commands.datasets_upload, "upload a .jsonl, .parquet or .csv file as a dataset")
    p.add_argument("file")
    p.add_argument("--name", required=True, help="what a config names: task: dataset:NAME")
    p.add_argument("--project", help="project name (default: your personal project)")
    p.add_argument("--prompt-field", help="the prompt's column (default: guessed)")
    p.add_argument("--answer-field", help="the reference answer's column (default: guessed)")
    p.add_argument("--held-out-fraction", type=float, default=0.1)
    p.add_argument("--split-seed", type=int, default=0)


def build_parser() -> argparse.ArgumentParser:
    from . import __doc__ as usage

    parser = OneLineErrors(prog="python -m seedbed_client", parents=[_connection_options()],
                                     description=usage, formatter_class=argparse.RawDescriptionHelpFormatter)
    groups = parser.add_subparsers(dest="group", required=True, metavar="{runs,sweeps,evals,datasets,projects}")
    for name, add_commands in (("runs", _runs_commands), ("sweeps", _sweeps_commands),
                               ("evals", _evals_commands), ("datasets", _datasets_commands),
                               ("projects", _projects_commands)):
        group = groups.add_parser(name, help=f"{name} commands")
        add_commands(group.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    return parser


# --- the server and the token -------------------------------------------------------------------------------------

def _setting(args, option: str, variable: str) -> tuple[str, str]:
    """(value, where it came from): the option if given, else the environment variable."""
    if hasattr(args, option):
        return getattr(args, option).strip(), f"--{option}"
    return os.environ.get(variable, "").strip(), variable


def client_for(args) -> SeedbedClient:
    url, url_source = _setting(args, "url", URL_VAR)
    if not url:
        raise Failure(2, f"error: {URL_VAR} is not set: give the server's address, "
                         f"e.g. {URL_VAR}=http://127.0.0.1:8000 (or --url)")
    if not url.startswith(("http://", "https://")):
        raise Failure(2, f"error: {url_source}: expected an address like http://HOST:PORT; got {url!r}")
    token, _ = _setting(args, "token", TOKEN_VAR)
    if not token:
        raise Failure(2, f"error: {TOKEN_VAR} is not set (or --token): "
                         + TOKEN_HELP.format(root=url.rstrip("/")))
    return SeedbedClient(url, token)


# --- failures -----------------------------------------------------------------------------------------------------

def _detail(body: dict) -> str:
    return str(body.get("detail") or "").strip()


def api_failure(exc: ApiError, root: str) -> Failure:
    """An HTTP error answer -> the lines and exit code the user sees."""
    if exc.status == 400 and isinstance(exc.body.get("errors"), dict):
        return Failure(2, *[f"error: {field}: {message}" for field, message in exc.body["errors"].items()])
    if exc.status == 401:
        detail = _detail(exc.body)
        if detail.startswith("this token"):  # the server says why: it expired, it was revoked
            return Failure(3, f"error: the server refused the token: {detail}")
        return Failure(3, "error: the server refused the token (missing, invalid, revoked or expired): "
                          + TOKEN_HELP.format(root=root))
    if exc.status in REFUSALS:
        detail, word = _detail(exc.body) or exc.url, REFUSALS[exc.status]
        return Failure(4, f"error: {detail}" if detail.startswith(f"{word}:") else f"error: {word}: {detail}")
    detail = _detail(exc.body)
    return Failure(2 if exc.status == 400 else 1, f"error: HTTP {exc.status} from {exc.url}"
                                                  + (f": {detail}" if detail else ""))


def run_command(args) -> int:
    client = client_for(args)
    try:
        return args.handler(client, args)
    except ApiError as exc:
        raise api_failure(exc, client.root) from None
    except Unreachable as exc:
        raise Failure(5, f"error: cannot reach the Seedbed server at {exc.url}: {exc.reason}") from None
    except RedirectRefused as exc:
        raise Failure(2, f"error: {exc.url} redirected to {exc.location}, another host, port or scheme: refused, "
                         f"so the token is not sent there; if that is the server, give its address as {URL_VAR}") from None
    except commands.ConfigError as exc:
        raise Failure(2, f"error: {exc.field}: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run_command(args)
    except Failure as failure:
        for line in failure.lines:  # they quote the server's messages (a name, a path): escaped
            print(printable(line), file=sys.stderr)
        return failure.code
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `... runs list | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return 0
