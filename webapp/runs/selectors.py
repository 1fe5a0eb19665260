"""Read queries for runs (the views and the JSON endpoints call these, nothing else)."""
from __future__ import annotations

import functools
import json
import os
import uuid
from typing import Iterable, Iterator

from django.core.paginator import Page, Paginator
from django.db.models import Case, DurationField, ExpressionWrapper, F, Q, QuerySet, Value, When
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Coalesce, Lower, Now, NullIf
from django.utils import timezone

from webapp.projects.paths import allowed_path, config_path_error  # noqa: F401 (the runs app's callers use these names)
from webapp.projects.selectors import visible

from . import rollups, search
from .finals import final_mean
from .models import Checkpoint, MetricPoint, MetricRollup, Run, Sample

# The run page's charts, in display order (docs/architecture.md#the-training-core metric names).
CHART_METRICS: tuple[tuple[str, ...], ...] = (
    ("reward/mean",), ("accuracy",), ("entropy",), ("length/mean",), ("kl",), ("clip/low_frac", "clip/high_frac"),
)
PRESET_LABELS = {"grpo": "GRPO", "dapo": "DAPO", "dr_grpo": "Dr. GRPO"}


def unlogged_metrics(config: dict) -> dict[str, str]:
    """The chart metrics a run of ``config`` will never log, each with why: ``kl`` where it has no KL term
    (kl_coef 0, its preset's or its own: Seedbed's loop has no reference model then, TRL's beta 0 and verl's
    use_kl_loss off log no KL either). An operator's trainer (the command engine) logs what it logs: nothing is
    ruled out for it (docs/architecture.md#the-training-core).

    >>> unlogged_metrics({"preset": "dapo"})
    {'kl': 'DAPO has no KL term'}
    >>> unlogged_metrics({"preset": "dr_grpo", "kl_coef": 0.0, "engine": "trl"})
    {'kl': 'Dr. GRPO has no KL term'}
    >>> unlogged_metrics({"preset": "grpo", "kl_coef": 0})
    {'kl': 'kl_coef is 0: no KL term'}
    >>> unlogged_metrics({}), unlogged_metrics({"preset": "dapo", "kl_coef": 0.01})
    ({}, {})
    >>> unlogged_metrics({"preset": "dapo", "engine": "command"})
    {}
    """
    from training.config import PRESETS, TrainConfig

    if (config.get("engine") or "seedbed") not in ("seedbed", "trl", "verl"):
        return {}
    preset = config.get("preset") or "grpo"
    preset_kl = PRESETS.get(preset, {}).get("kl_coef", TrainConfig.kl_coef)
    kl_coef = config.get("kl_coef", preset_kl)
    if not isinstance(kl_coef, (int, float)) or kl_coef > 0:
        return {}
    if preset_kl == 0 and preset in PRESET_LABELS:
        return {"kl": f"{PRESET_LABELS[preset]} has no KL term"}
    return {"kl": "kl_coef is 0: no KL term"}


def run_charts(config: dict) -> list[tuple[list[str], str]]:
    """The run page's important charts: each one's metric keys and, where the config logs none of them, why
    (``unlogged_metrics``; empty otherwise)."""
    unlogged = unlogged_metrics(config)
    return [(list(keys), "; ".join(unlogged[k] for k in keys) if all(k in unlogged for k in keys) else "")
            for keys in CHART_METRICS]


def names_like(original) -> set[str]:
    """The names of ``original``'s kind (a Run or a Sweep) in its project that begin with its name: those a copy's
    default name must not be (``copies.copy_name``)."""
    from .copies import name_of

    return set(type(original).objects.filter(project_id=original.project_id, name__startswith=name_of(original))
               .values_list("name", flat=True))


def run_list(*, user, status: str | None = None, project: str | None = None) -> QuerySet[Run]:
    """The runs ``user`` may read, newest first, optionally of one status and one project (by name)."""
    qs = visible(Run.objects.select_related("sweep", "created_by", "project"), user)
    if status:
        qs = qs.filter(status=status)
    if project:
        qs = qs.filter(project__name=project)
    return qs


# search.SORTS key -> what the database orders by (then the id, so pages never overlap); empty values last
SORT_ORDER = {"name": NullIf(Lower("name"), Value("")), "project": Lower("project__name"),
              "sweep": Lower("sweep__name"),  # (no sweep: null, last either way)
              "status": F("status"),
              "engine": Coalesce(NullIf(KeyTextTransform("engine", "config"), Value("")), Value("seedbed")),
              "created": F("created_at"), "steps": F("last_step"), "duration": F("duration"), "seed": F("seed")}
CONFIG_LOOKUPS = {"=": "exact", "<": "lt", "<=": "lte", ">": "gt", ">=": "gte"}


def run_search(*, user, query: search.RunQuery) -> QuerySet[Run]:
    """The runs ``user`` may read that match ``query`` (``webapp.runs.search``), each with its ``duration``
    (end, or now while it runs, minus its first step: ``training_origin``; null before that). Config comparisons are JSON key lookups
    (``config__lr__gt``): on SQLite and PostgreSQL alike a number is compared with a number."""
    qs = run_list(user=user).annotate(duration=ExpressionWrapper(
        Coalesce(F("ended_at"), Now()) - training_origin(), output_field=DurationField()))
    for word in query.words:
        qs = qs.filter(Q(name__icontains=word) | Q(sweep__name__icontains=word) | _tag_contains(word))
    if query.tags:
        qs = qs.filter(_any_of(_tag_contains(f'"{tag}"') for tag in query.tags))
    if query.statuses:
        qs = qs.filter(status__in=query.statuses)
    if query.projects:
        qs = qs.filter(_any_of(Q(project__name__iexact=name) for name in query.projects))
    if query.engines:
        qs = qs.filter(_any_of(_engine_is(engine) for engine in query.engines))
    if query.archived != "all":
        qs = qs.filter(archived_at__isnull=query.archived == "no")
    for term in query.config:
        qs = qs.filter(**{f"config__{term.key}__{CONFIG_LOOKUPS[term.op]}": term.value})
    return qs


def training_origin() -> Case:
    """When a run's training began, in the database: its first step (``first_step_at``); for a run that stored
    steps before that field existed, when a worker took it; null before its first step. A wait for a slot or for
    the built-in model's build before its first step is no part of its duration."""
    return Case(When(first_step_at__isnull=False, then=F("first_step_at")),
                When(last_step__gt=0, then=F("started_at")), default=None)


def run_duration_s(run: Run, now) -> float | None:
    """A run's duration in seconds from its first step (``training_origin``) to its end or ``now``; None before."""
    origin = run.first_step_at or (run.started_at if run.last_step > 0 else None)
    return ((run.ended_at or now) - origin).total_seconds() if origin else None


def _tag_contains(text: str) -> Q:
    """The run's tags, as JSON text, contain ``text`` (any case): ``'"baseline"'`` is the whole tag baseline
    (a tag has no quotes: runs.services.parse_tags), a bare word any part of a tag. The same on SQLite (JSON kept
    as text) and PostgreSQL (jsonb cast to text)."""
    return Q(tags__icontains=text)


def _engine_is(engine: str) -> Q:
    q = Q(config__engine__exact=engine)
    if engine == "seedbed":  # a run made before engines existed has no engine key (Run.engine): seedbed's
        q |= ~Q(config__has_key="engine") | Q(config__engine__exact="")
    return q


def _any_of(qs: Iterable[Q]) -> Q:
    combined = Q(pk__in=[])
    for q in qs:
        combined |= q
    return combined


def run_search_sorted(*, user, query: search.RunQuery, sort: str = search.DEFAULT_SORT) -> QuerySet[Run]:
    """``run_search`` ordered by ``sort`` (a ``search.SORTS`` key, a config key or ``final:METRIC``, ``-`` first
    for descending; runs without a value last either way). A config key orders by its JSON value (numbers as
    numbers on both databases)."""
    key = sort.removeprefix("-")
    qs = run_search(user=user, query=query)
    metric = search.final_metric(key)
    if metric:  # the final value of every matching run, in the database (finals.final_mean)
        qs = qs.annotate(sort_final=final_mean(metric))
        expression = F("sort_final")
    elif search.config_sort(key):
        expression = KeyTransform(key, "config")
    else:
        expression = SORT_ORDER[key]
    if sort.startswith("-"):
        return qs.order_by(expression.desc(nulls_last=True), "-id")
    return qs.order_by(expression.asc(nulls_last=True), "id")


def duration_text(seconds: float | None) -> str:
    """``"42 s"``, ``"3 min 05 s"``, ``"2 h 07 min"``; empty for None."""
    if seconds is None:
        return ""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds // 60 % 60:02d} min"


def config_cell(value) -> str:
    """A config value as a table cell: JSON's spelling for booleans and null, Python's for numbers."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def run_table(*, user, params: search.RunListParams, per_page: int = search.PER_PAGE) -> dict:
    """The runs table page: ``page`` (a Django Page of the matching runs, ``params.sort`` order) and ``rows``, one
    per run: the run, its chosen config columns' values (``params.config_cols``), its final values of the chosen
    metrics (``params.final_cols``, None where it logged none) and its duration as text."""
    qs = run_search_sorted(user=user, query=params.query, sort=params.sort)
    finals = {f"final_{i}": final_mean(metric) for i, metric in enumerate(params.final_cols)}
    page: Page = Paginator(qs.annotate(**finals), per_page).get_page(params.page)
    now = timezone.now()
    rows = [{"run": run, "config": [config_cell(run.config.get(key)) for key in params.config_cols],
             "finals": [getattr(run, name) for name in finals],
             "duration": duration_text(run_duration_s(run, now))}
            for run in page.object_list]
    return {"page": page, "rows": rows}


def run_metrics_bucketed(*, run_id: int, keys: list[str] | None = None, since_step: int = 0,
                         max_points: int = 400, until_step: int | None = None) -> dict:
    """Points with ``since_step`` < step <= ``until_step`` (default: the last), at most about ``max_points`` per
    key: ``{"width": w, "series": {key: {"step": [...], "value": [...], "min": [...], "max": [...],
    "count": [...]}}}``. With ``width`` 1 every point is there (value = min = max, count 1, or 0 for a gap);
    otherwise each entry is a bucket of ``width`` steps (bucket b holds the steps (b*w, (b+1)*w]): its last step,
    mean, min, max and number of finite points, so spikes stay visible, as on the dashboard, and a live point can
    be merged into its bucket. Buckets come from the pre-aggregated tier (``webapp.runs.rollups``), so the rows read grow
    with ``max_points``, not with the run's length. Non-finite values (stored as null) are left out of buckets."""
    qs = MetricPoint.objects.filter(run_id=run_id, step__gt=since_step)
    if until_step is not None:
        qs = qs.filter(step__lte=until_step)
    if keys:
        qs = qs.filter(key__in=keys)
    first = qs.order_by("step").values_list("step", flat=True).first()
    if first is None:
        return {"width": 1, "series": {}}
    last = qs.order_by("-step").values_list("step", flat=True).first()
    width = rollups.display_width(last - max(since_step, first - 1), max_points)
    series: dict[str, dict] = {}
    if width == 1:
        for step, key, value in qs.order_by("key", "step").values_list("step", "key", "value"):
            s = series.setdefault(key, {"step": [], "value": [], "min": [], "max": [], "count": []})
            for name, v in (("step", step), ("value", value), ("min", value), ("max", value),
                            ("count", 0 if value is None else 1)):
                s[name].append(v)
        return {"width": 1, "series": series}
    buckets = rollups.bucketed(run_ids=[run_id], keys=keys or None, width=width, after={run_id: since_step},
                               until=until_step)
    for (_, key), rows in sorted(buckets.items()):
        series[key] = {"step": [r[2] for r in rows], "value": [r[4] / r[3] for r in rows],
                       "min": [r[5] for r in rows], "max": [r[6] for r in rows], "count": [r[3] for r in rows]}
    return {"width": width, "series": series}


def run_samples_since(*, run_id: int, since_step: int = 0, limit_steps: int = 5) -> list[dict]:
    """Samples of the newest ``limit_steps`` steps after ``since_step``, newest step first."""
    steps = list(Sample.objects.filter(run_id=run_id, step__gt=since_step).values_list("step", flat=True)
                 .distinct().order_by("-step")[:limit_steps])
    rows = Sample.objects.filter(run_id=run_id, step__in=steps).order_by("-step", "index")
    return [{"step": s.step, "index": s.index, "prompt": s.prompt, "completion": s.completion, "answer": s.answer,
             "reward": s.reward, "details": s.details} for s in rows]


def run_samples_table(*, run_id: int, steps: int = 15) -> list[dict]:
    """The run page's samples table: the newest ``steps`` steps' samples, newest first, details as JSON text."""
    rows = run_samples_since(run_id=run_id, since_step=0, limit_steps=steps)
    return [{**row, "details_json": json.dumps(row["details"], sort_keys=True)} for row in rows]


def run_checkpoints(*, run_id: int) -> QuerySet[Checkpoint]:
    return Checkpoint.objects.filter(run_id=run_id).order_by("-step")


LIVE_MAX_POINTS = 1500  # per series on a chart: about the pixels of its width (W&B samples 1,500 points too)


def _chart_series(bucketed: dict) -> dict[str, dict]:
    """run_metrics_bucketed's answer as the charts take it: {key: {"x", "y", "lo", "hi", "n", "width"}}."""
    return {key: {"x": s["step"], "y": s["value"], "lo": s["min"], "hi": s["max"], "n": s["count"],
                  "width": bucketed["width"]} for key, s in bucketed["series"].items()}


def run_series_range(*, run_id: int, keys: list[str], from_step: int, to_step: int,
                     max_points: int = LIVE_MAX_POINTS) -> dict[str, dict]:
    """A chart's series over the steps it shows once zoomed: every stored point when they are at most
    ``max_points`` per key, else finer buckets than the whole run's."""
    return _chart_series(run_metrics_bucketed(run_id=run_id, keys=keys, since_step=max(from_step - 1, 0),
                                              until_step=to_step, max_points=max_points))


def run_metric_keys(*, run_id: int) -> list[str]:
    """Every metric key the run logged, sorted: read from the coarsest level of the metric tier (one row per
    key and 8,192 steps), not from the points."""
    return sorted(MetricRollup.objects.filter(run_id=run_id, width=rollups.WIDTHS[-1])
                  .values_list("key", flat=True).distinct())


def run_other_charts(*, run_id: int) -> list[str]:
    """The run page's lazily loaded charts: every logged metric that no important chart (CHART_METRICS) shows."""
    shown = {key for keys in CHART_METRICS for key in keys}
    return [key for key in run_metric_keys(run_id=run_id) if key not in shown]


def run_live_state(*, run_id: int, since_step: int = 0, samples_since_step: int | None = None,
                   keys: list[str] | None = None) -> dict:
    """Everything the run page polls for: status, the points of ``keys`` (None: every metric) after
    ``since_step`` and samples after ``samples_since_step`` (default: the same step; a step's samples and metrics
    are stored separately, so the page keeps one cursor for each)."""
    if samples_since_step is None:
        samples_since_step = since_step
    run = Run.objects.get(pk=run_id)
    return {
        "id": run.pk,
        "status": run.status,
        "ended": run.is_ended,
        "kill_requested": run.kill_requested_at is not None,
        "killed_by": run.killed_by,
        "kill_reason": run.kill_reason,
        "error": run.error,
        "last_step": run.last_step,
        "total_steps": run.total_steps,
        "heartbeat_at": run.heartbeat_at.isoformat() if run.heartbeat_at else None,
        # the first answer: every series in at most LIVE_MAX_POINTS buckets (mean, min, max); later ones: the
        # points after the last step the page has (a few per poll), appended as they are
        "series": _chart_series(run_metrics_bucketed(run_id=run_id, keys=keys, since_step=since_step,
                                                     max_points=LIVE_MAX_POINTS)),
        "samples": run_samples_since(run_id=run_id, since_step=samples_since_step),
    }


def run_engine_config(*, run: Run) -> dict | None:
    """The run page's section of the engine's own resolved config (None for an engine with no other config than
    Seedbed's, ``Engine.resolved_config``): its title, whether it is stored yet, the engine's version and its
    settings as (key, text) rows in key order, each value as JSON unless it is a string."""
    from training.engines import engines

    engine = run.engine_entry
    if engine is not None and not engine.resolved_config:
        return None
    stored = run.engine_config or {}
    title = (engine.resolved_config if engine else "{command}'s resolved config").format(
        command=run.config.get("command") or run.engine)
    versions = dict(e.version for e in engines() if e.version)  # key in the resolved config -> what it versions
    version = next((f"{label} {stored[key]}" for key, label in versions.items() if stored.get(key)), "")
    head = ("engine", *versions, "_trimmed")  # shown in the section's summary line
    rows = [(key, value if isinstance(value, str) else json.dumps(value))
            for key, value in sorted(stored.items()) if key not in head]
    return {"title": title, "stored": bool(stored), "version": version, "rows": rows,
            "trimmed": stored.get("_trimmed", ""), "ended": run.is_ended}


def new_run_prefill(*, checkpoint_id: int) -> tuple[Checkpoint, dict]:
    """The run (or sweep) form's starting point for "New run from this checkpoint": the parent's config with the
    checkpoint folder as model_path. Raises Checkpoint.DoesNotExist."""
    ckpt = Checkpoint.objects.select_related("run").get(pk=checkpoint_id)
    config = dict(ckpt.run.config)
    config["model_path"] = ckpt.path
    return ckpt, config


@functools.lru_cache(maxsize=8)
def _tokenizer(path: str, mtime: float):
    """The folder's tokenizer for rendering prompts: without transformers (the web process never imports torch)
    when the folder has a tokenizer.json, as every fast tokenizer's folder has."""
    if os.path.isfile(os.path.join(path, "tokenizer.json")):
        from training.light_tokenizer import LightTokenizer

        return LightTokenizer(path)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def run_prompt_preview(*, run: Run) -> dict:
    """The run's prompt for one held-out example, rendered as the model sees it (training.first_prompt), or
    {"error": ...} when it cannot be rendered (its model or data gone)."""
    from training.config import TrainConfig
    from training.first_prompt import preview

    try:
        cfg = TrainConfig.from_dict(run.config, check_paths=False)
        path = cfg.resolved_model_path()
        if not os.path.isfile(os.path.join(path, "config.json")):
            return {"error": "the model is not there yet (the built-in model is built, or an import runs, on "
                             "first use): the prompt appears once it is"}
        tokenizer = _tokenizer(path, os.path.getmtime(os.path.join(path, "config.json")))
        return preview(cfg, tokenizer)
    except Exception as exc:  # a page section, not the page: say why and carry on
        return {"error": f"{type(exc).__name__}: {exc}"[:500]}


def runs_from_model(*, user, path: str, limit: int = 50) -> QuerySet[Run]:
    """The user's runs that started from the model folder ``path`` (their config's model_path): the library's
    model page section (registered from RunsConfig.ready)."""
    return visible(Run.objects.filter(config__model_path=path).select_related("project"), user)[:limit]


def checkpoints_as_models(*, user, limit: int = 100) -> list[dict]:
    """Checkpoints of the user's runs, as models: base model -> run -> checkpoint (iterative RLVR lineage); the
    library's models page section (registered from RunsConfig.ready)."""
    rows = []
    for ckpt in visible(Checkpoint.objects.select_related("run", "run__project"), user,
                        field="run__project").order_by("-created_at")[:limit]:
        rows.append({"checkpoint": ckpt, "run": ckpt.run, "base": ckpt.run.config.get("model_path") or "tiny (built-in)"})
    return rows


def run_folder_readable(user, owner: str) -> bool:
    """A run's folder (runs/<uid>/..., its checkpoints): readable by whoever may read the run
    (registered with webapp.projects.paths by RunsConfig.ready)."""
    try:
        uid = uuid.UUID(owner)
    except ValueError:
        return False
    return visible(Run.objects.all(), user).filter(uid=uid).exists()


EXPORT_CHUNK = 5000


def metric_steps(*, run_ids: list[int]) -> Iterator[tuple[int, int, dict[str, float | None]]]:
    """Every stored metric point of ``run_ids``, one (run id, step, {key: value}) per run and step, in run then step
    order, read in chunks (a long run is never held in memory whole): what the exports write."""
    rows = (MetricPoint.objects.filter(run_id__in=run_ids).order_by("run_id", "step", "key")
            .values_list("run_id", "step", "key", "value").iterator(chunk_size=EXPORT_CHUNK))
    current, values = None, {}
    for run_id, step, key, value in rows:
        if (run_id, step) != current:
            if current is not None:
                yield current[0], current[1], values
            current, values = (run_id, step), {}
        values[key] = value
    if current is not None:
        yield current[0], current[1], values


def metric_keys(*, run_ids: list[int]) -> list[str]:
    """The metric names ``run_ids`` logged with at least one finite value, sorted (an export's CSV columns)."""
    # from the coarsest level of the chart tier: a few rows per run and key, where the points are millions
    return sorted(set(MetricRollup.objects.filter(run_id__in=run_ids, width=rollups.WIDTHS[-1])
                      .values_list("key", flat=True)))


LOG_FILES = ("worker.log", "engine.log")  # the training process's own log; an external engine's (torchrun's ranks)
LOG_TAIL_BYTES = 16_000


def run_log_tail(*, run: Run, max_lines: int = 40) -> list[dict]:
    """The end of each log the run's folder holds (the run page's live log): ``[{"name", "text", "lines"}]``, at
    most ``max_lines`` lines and ``LOG_TAIL_BYTES`` of each; empty when none is there (yet, or not on this
    server's disk)."""
    out = []
    for name in LOG_FILES:
        path = run.folder / name
        try:
            with open(path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - LOG_TAIL_BYTES))
                text = fh.read().decode("utf-8", errors="replace")
        except OSError:
            continue
        lines = text.splitlines()[-max_lines:]
        out.append({"name": name, "text": "\n".join(lines), "lines": len(lines)})
    return out


def queue_list() -> list[dict]:
    """The queues runs may name, as the API lists them: name, kind, description and a Slurm queue's resources
    (not its cluster's files)."""
    from webapp.runs.models import DEVICE_QUEUES, Queue, QueueKind

    rows = {q.name: q for q in Queue.objects.all()}
    out = [{"name": n, "kind": "celery", "description": rows[n].description if n in rows else "derived from a device"}
           for n in DEVICE_QUEUES]
    for q in rows.values():
        if q.name in DEVICE_QUEUES:
            continue
        item = {"name": q.name, "kind": q.kind, "description": q.description}
        if q.kind == QueueKind.SLURM:
            item.update(partition=q.partition, nodes=q.nodes, gpus_per_node=q.gpus_per_node,
                        cpus_per_task=q.cpus_per_task, mem_per_node_mb=q.mem_per_node_mb,
                        time_limit_min=q.time_limit_min)
        out.append(item)
    return out
