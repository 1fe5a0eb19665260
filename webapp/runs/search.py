"""The runs table's state, parsed from its URL: pure functions, no database (``selectors.run_table`` queries).

The search box (``q``) takes free words and structured terms, separated by spaces (quote a value with spaces:
``project:"my lab"``):

- a free word matches a run's name, its sweep's name or one of its tags (case-insensitive, every word must match);
- ``status:running``, ``project:NAME``, ``engine:trl``, ``tag:baseline`` (a tag, whole); several values of one
  of these: any of them;
- ``archived:yes`` (only archived runs), ``archived:all``; the table hides archived runs otherwise;
- a config comparison ``KEY OP VALUE``: KEY a TrainConfig field, OP one of ``= < <= > >=``, VALUE a number or a
  plain word (``lr>1e-5``, ``lr<=2e-4``, ``preset=dapo``, ``group_size=8``, ``use_kl=false``). ``<`` and ``>``
  compare numbers only, and a number field is compared with a number, so both databases compare numbers as
  numbers.

A term that cannot be read is left out of the query and named in ``problems`` (the page shows them).

Columns and sorts beyond the fixed ones: a config key (``cols=lr``: its value), or ``final:METRIC`` (``cols=
final:reward/mean``, ``sort=-final:reward/mean``): the run's final value of the metric, the mean of its last 10 %
of steps (``webapp.runs.finals``), evaluated in the database so a sort over thousands of runs stays one query.
"""
from __future__ import annotations

import dataclasses
import math
import re
import shlex
import typing
from typing import Any, Iterable, Mapping
from urllib.parse import urlencode

from training.config import TrainConfig, choices_of

from .models import RunStatus

PER_PAGE = 50
MAX_QUERY_CHARS = 500
MAX_TERMS = 30
DEFAULT_SORT = "-created"
# sort key -> column title; selectors.SORT_ORDER says how the database orders each
SORTS: dict[str, str] = {"name": "Run", "project": "Project", "sweep": "Sweep", "status": "Status",
                         "engine": "Engine", "created": "Created", "steps": "Steps", "duration": "Duration",
                         "seed": "Seed"}
PREFIXES = ("status", "project", "engine", "archived", "tag")
FINAL = "final:"  # a column or sort of a metric's final value: final:reward/mean
# The metrics every run logs (docs/architecture.md#the-training-core), offered as final columns; any other logged key can be typed in.
STANDARD_METRICS = ("reward/mean", "accuracy", "entropy", "kl", "length/mean", "frac_zero_std_groups",
                    "loss/policy", "grad_norm", "step_time_s", "tokens_per_s")
ARCHIVED_CHOICES = ("no", "yes", "all")
OPS = ("<=", ">=", "<", ">", "=")

_COMPARISON = re.compile(r"^([A-Za-z_]\w*)(<=|>=|<|>|=)(.*)$")
MAX_INT = 2**63 - 1  # the databases compare a JSON integer as a signed 64-bit one (SQLite raises past it)
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_WORD = re.compile(r"^[\w.:/+\-]{1,200}$")
_TAG = re.compile(r"^[A-Za-z0-9_.:/+\-]{1,40}$")  # what runs.services.parse_tags accepts
_METRIC = re.compile(r"^[\w.:/@+\-]{1,100}$", re.ASCII)  # a logged metric's key (reward/math/mean, eval/pass@4)
_TRUE, _FALSE = ("true", "yes", "on"), ("false", "no", "off")


def _config_kinds() -> dict[str, str]:
    """TrainConfig field name -> "number", "bool", "text" or "other" (a list or dict: not comparable)."""
    hints = typing.get_type_hints(TrainConfig)
    kinds = {}
    for f in dataclasses.fields(TrainConfig):
        args = [a for a in (typing.get_args(hints[f.name]) or (hints[f.name],)) if a is not type(None)]
        base = args[0] if len(args) == 1 else None
        kinds[f.name] = ("bool" if base is bool else "number" if base in (int, float) else "text" if base is str
                         else "other")
    return kinds


CONFIG_KINDS: dict[str, str] = _config_kinds()
CONFIG_KEYS: tuple[str, ...] = tuple(CONFIG_KINDS)


@dataclasses.dataclass(frozen=True)
class ConfigTerm:
    """``config[key] op value``: ``value`` an int or float for a number field, a bool or a str otherwise."""

    key: str
    op: str
    value: Any


@dataclasses.dataclass(frozen=True)
class RunQuery:
    words: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()
    projects: tuple[str, ...] = ()
    engines: tuple[str, ...] = ()
    archived: str = "no"
    tags: tuple[str, ...] = ()
    config: tuple[ConfigTerm, ...] = ()
    problems: tuple[str, ...] = ()


def parse_number(text: str) -> int | float | None:
    """``"8"`` -> 8, ``"1e-5"`` -> 1e-05; None for anything else (``nan``, ``inf`` and ``0x10`` included).

    >>> parse_number("8"), parse_number("-2.5e-4"), parse_number("nan"), parse_number("1e999")
    (8, -0.00025, None, None)
    """
    if not _NUMBER.match(text):
        return None
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    value = float(text)
    return value if math.isfinite(value) else None


def parse_config_term(token: str) -> ConfigTerm | str:
    """A ``KEY OP VALUE`` term, or the problem with it (a str naming the term)."""
    match = _COMPARISON.match(token)
    if not match:
        return f"“{token}”: not a comparison; write KEY OP VALUE, e.g. lr>1e-5 or preset=dapo"
    key, op, raw = match.groups()
    if key not in CONFIG_KINDS:
        return f"“{token}”: {key} is not a config key (a TrainConfig field, e.g. lr, group_size, preset)"
    kind = CONFIG_KINDS[key]
    if kind == "other":
        return f"“{token}”: {key} holds a list or a table; it cannot be compared"
    if not raw:
        return f"“{token}”: no value after {op}"
    number = parse_number(raw)
    if isinstance(number, int) and not -MAX_INT <= number <= MAX_INT:
        return f"“{token}”: {raw[:30]} is out of range (a whole number from -{MAX_INT} to {MAX_INT})"
    if op != "=":
        if kind != "number":
            return f"“{token}”: {key} is not a number; only = compares it"
        if number is None:
            return f"“{token}”: {raw} is not a number"
        return ConfigTerm(key, op, number)
    if kind == "number":
        if number is None:
            return f"“{token}”: {key} is a number and {raw} is not"
        return ConfigTerm(key, op, number)
    if kind == "bool":
        if raw.lower() in _TRUE + _FALSE:
            return ConfigTerm(key, op, raw.lower() in _TRUE)
        return f"“{token}”: {key} is true or false, not {raw}"
    if not _WORD.match(raw):
        return f"“{token}”: the value must be a plain word (letters, digits, _ . : / + -)"
    return ConfigTerm(key, op, raw)


def tokens(text: str) -> tuple[list[str], list[str]]:
    """The terms of ``text`` (quotes group words, as in a shell) and the problems met splitting it."""
    problems = []
    if len(text) > MAX_QUERY_CHARS:
        problems.append(f"the search is cut to its first {MAX_QUERY_CHARS} characters")
        text = text[:MAX_QUERY_CHARS]
    try:
        parts = shlex.split(text)
    except ValueError:
        problems.append("a quote is not closed; the search is read word by word")
        parts = text.replace('"', " ").replace("'", " ").split()
    if len(parts) > MAX_TERMS:
        problems.append(f"only the first {MAX_TERMS} terms are used")
        parts = parts[:MAX_TERMS]
    return [p for p in parts if p.strip()], problems


def join_terms(parts: list[str]) -> str:
    """Terms back into a search (``tokens`` reads it back the same), quoting only those that need it.

    >>> join_terms(["lr>1e-5", "project:my lab"])
    "lr>1e-5 'project:my lab'"
    """
    return " ".join(p if re.fullmatch(r"[^\s'\"\\]+", p) else shlex.quote(p) for p in parts)


def parse_query(text: str) -> RunQuery:
    """The search box's text as a query; unreadable terms are left out and named in ``problems``.

    >>> q = parse_query('lr>1e-5 status:running baseline preset=dapo bogus>1')
    >>> q.words, q.statuses, [(t.key, t.op, t.value) for t in q.config]
    (('baseline',), ('running',), [('lr', '>', 1e-05), ('preset', '=', 'dapo')])
    >>> q.problems
    ('“bogus>1”: bogus is not a config key (a TrainConfig field, e.g. lr, group_size, preset)',)
    """
    parts, problems = tokens(text or "")
    found: dict[str, list] = {"words": [], "status": [], "project": [], "engine": [], "archived": [], "tag": [],
                              "config": []}
    for token in parts:
        if any(op in token for op in "<>="):
            term = parse_config_term(token)
            (found["config"] if isinstance(term, ConfigTerm) else problems).append(term)
            continue
        prefix, colon, value = token.partition(":")
        if not colon:
            found["words"].append(token)
            continue
        prefix = prefix.lower()
        problem = _prefix_problem(token, prefix, value)
        if problem:
            problems.append(problem)
        else:
            found[prefix].append(value if prefix in ("project", "tag") else value.lower())
    archived = found["archived"][-1] if found["archived"] else "no"
    return RunQuery(words=tuple(found["words"]), statuses=tuple(dict.fromkeys(found["status"])),
                    projects=tuple(dict.fromkeys(found["project"])), engines=tuple(dict.fromkeys(found["engine"])),
                    archived=archived, tags=tuple(dict.fromkeys(found["tag"])), config=tuple(found["config"]),
                    problems=tuple(problems))


def _prefix_problem(token: str, prefix: str, value: str) -> str | None:
    if prefix not in PREFIXES:
        return (f"“{token}”: unknown filter {prefix}:; use status:, project:, engine:, archived:, tag: or a "
                "config comparison such as lr>1e-5")
    if not value:
        return f"“{token}”: no value after {prefix}:"
    if prefix == "tag" and not _TAG.match(value):
        return f"“{token}”: a tag is 1 to 40 letters, digits or _-.:/+"
    allowed = {"status": RunStatus.values, "engine": choices_of("engine"), "archived": ARCHIVED_CHOICES}.get(prefix)
    if allowed is not None and value.lower() not in allowed:
        return f"“{token}”: {prefix} is one of {', '.join(allowed)}"
    return None


def final_metric(name: str) -> str | None:
    """The metric of a ``final:METRIC`` column or sort key, or None when ``name`` is not one.

    >>> final_metric("final:reward/mean"), final_metric("final:eval/pass@4"), final_metric("final:a b"), final_metric("lr")
    ('reward/mean', 'eval/pass@4', None, None)
    """
    if not name.startswith(FINAL):
        return None
    metric = name[len(FINAL):]
    return metric if _METRIC.match(metric) else None


def config_sort(key: str) -> bool:
    """Whether ``key`` sorts the table by a config value (a TrainConfig field of a number, a bool or text; the
    fixed columns first: ``seed`` and ``engine`` are theirs).

    >>> config_sort("lr"), config_sort("seed"), config_sort("rewards"), config_sort("bogus")
    (True, False, False, False)
    """
    return key not in SORTS and CONFIG_KINDS.get(key) in ("number", "bool", "text")


def parse_sort(value: str | None) -> tuple[str, str | None]:
    """``sort`` as given if it names a column, a config key or a metric's final value (``-`` first: descending),
    else the default and the problem."""
    if not value:
        return DEFAULT_SORT, None
    key = value.removeprefix("-")
    if key in SORTS or config_sort(key) or final_metric(key):
        return value, None
    return DEFAULT_SORT, (f"sort “{value[:60]}” is not a column (one of {', '.join(SORTS)}, a config key such as "
                          "lr, or final:METRIC; “-” first to reverse); newest first instead")


def parse_cols(values: Iterable[str]) -> tuple[list[str], list[str]]:
    """Config keys and ``final:METRIC`` columns chosen as extra columns (``cols=lr,final:reward/mean`` or ``cols``
    given several times), in order, without repeats; each unknown one named in the problems."""
    cols, problems = [], []
    for value in values:
        for name in (part.strip() for part in value.split(",")):
            if not name or name in cols:
                continue
            if name in CONFIG_KINDS or final_metric(name):
                cols.append(name)
            elif name.startswith(FINAL):
                problems.append(f"column “{name[:60]}” does not name a metric (final:METRIC, e.g. final:reward/mean); "
                                "left out")
            else:
                problems.append(f"column “{name[:60]}” is not a config key; left out")
    return cols, problems


def parse_page(value: str | None) -> int:
    """The page asked for, from 1 (the paginator brings one past the end back to the last)."""
    try:
        return max(1, int(value or 1))
    except ValueError:
        return 1


@dataclasses.dataclass(frozen=True)
class RunListParams:
    """Everything the runs table's URL says, read and checked."""

    q: str = ""
    query: RunQuery = RunQuery()
    sort: str = DEFAULT_SORT
    page: int = 1
    cols: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    def link(self, **changes) -> str:
        """This state's query string (``?q=...&sort=...``) with ``changes`` (None drops a parameter); defaults
        are left out, so a link says only what differs."""
        state = {"q": self.q, "sort": self.sort, "cols": ",".join(self.cols), "page": self.page}
        state.update(changes)
        if state["sort"] == DEFAULT_SORT:
            state["sort"] = None
        if state["page"] == 1:
            state["page"] = None
        return "?" + urlencode({k: v for k, v in state.items() if v not in (None, "")})

    def status_links(self) -> list[dict]:
        """"Show: all, queued, running, ...": this search with its status: terms replaced by one (none for all)."""
        parts, _ = tokens(self.q)
        rest = [p for p in parts if not p.lower().startswith("status:")]
        current = self.query.statuses[0] if len(self.query.statuses) == 1 else None
        return [{"label": status or "all", "current": status == current or (status is None and not
                                                                              self.query.statuses),
                 "url": self.link(q=join_terms(rest + ([f"status:{status}"] if status else [])), page=None)}
                for status in (None, *RunStatus.values)]

    def pager(self, number: int, num_pages: int) -> dict:
        """Links to the first, previous, next and last pages (None where there is none)."""
        def to(n):
            return self.link(page=n) if 1 <= n <= num_pages and n != number else None
        return {"first": to(1), "previous": to(number - 1), "next": to(number + 1), "last": to(num_pages)}

    @property
    def config_cols(self) -> tuple[str, ...]:
        """The config columns chosen (and that of a config sort, which shows its column too), in order."""
        chosen = [c for c in self.cols if not final_metric(c)]
        sorted_by = self.sort.removeprefix("-")
        return tuple(dict.fromkeys(chosen + ([sorted_by] if config_sort(sorted_by) else [])))

    @property
    def final_cols(self) -> tuple[str, ...]:
        """The metrics of the final columns (and of a final sort, which shows its column too), in order."""
        metrics = [final_metric(c) for c in self.cols if final_metric(c)]
        sorted_by = final_metric(self.sort.removeprefix("-"))
        return tuple(dict.fromkeys(metrics + ([sorted_by] if sorted_by else [])))

    def headers(self) -> dict[str, dict]:
        """The sortable columns' titles, links (ascending first, then reversed; a final value: highest first)
        and arrows, by sort key (a config key for a config column, ``final:METRIC`` for the final columns)."""
        out = {}
        finals = {f"{FINAL}{m}": f"final {m}" for m in self.final_cols}
        configs = {key: key for key in self.config_cols if config_sort(key)}
        for key, title in {**SORTS, **configs, **finals}.items():
            current = self.sort.removeprefix("-") == key
            descending = self.sort.startswith("-")
            first = f"-{key}" if key in finals else key  # the best final first (for a loss: reverse it)
            flipped = key if first.startswith("-") else f"-{key}"
            out[key] = {"title": title, "key": key, "metric": final_metric(key),
                        "url": self.link(sort=flipped if current and self.sort == first else first, page=None),
                        "arrow": ("▼" if descending else "▲") if current else "",
                        "aria": ("descending" if descending else "ascending") if current else "none"}
        return out


def config_headers(params: RunListParams, headers: dict[str, dict]) -> list[dict]:
    """The config columns' headers (``params.headers()``' entries, titled by their key): a list or mapping knob's
    column has no sort link."""
    return [{**headers[key], "title": key} if key in headers else
            {"title": key, "key": key, "url": "", "arrow": "", "aria": "none"} for key in params.config_cols]


def parse_params(get: Mapping) -> RunListParams:
    """The runs table's state from its GET parameters (a QueryDict or a dict of str or lists). The older
    ``status`` and ``project`` parameters are read as ``status:`` and ``project:`` terms of the search."""
    def one(name):
        value = get.get(name)
        return value[-1] if isinstance(value, list) and value else value if isinstance(value, str) else None

    def many(name):
        if hasattr(get, "getlist"):
            return get.getlist(name)
        value = get.get(name)
        return value if isinstance(value, list) else [value] if isinstance(value, str) else []

    q = (one("q") or "").strip()
    for name in ("status", "project"):
        if one(name):
            q = f"{q} {name}:{shlex.quote(one(name))}".strip()
    query = parse_query(q)
    sort, sort_problem = parse_sort(one("sort"))
    # the column picker's "final of another metric" box gives a bare metric name
    cols, col_problems = parse_cols([*many("cols"), *(f"{FINAL}{m.strip()}" for m in many("final") if m.strip())])
    problems = (*query.problems, *([sort_problem] if sort_problem else []), *col_problems)
    return RunListParams(q=q, query=query, sort=sort, page=parse_page(one("page")), cols=tuple(cols),
                         problems=problems)
