"""A request's config as the one schema (training.config) has it, its paths and caps checked, and the queue it
needs (docs/architecture.md#a-runs-life)."""
from __future__ import annotations

from django.conf import settings

from training.config import TrainConfig
from training.fields import FieldErrors
from webapp.runs.capacity import check_caps
from webapp.runs.selectors import config_path_error


def parse_config(data: dict, *, user=None, project=None, dry_run: bool = True, queue: str = "") -> TrainConfig:
    """A request's config, validated by the one schema (training.config), its paths inside the allowed folders
    (settings.SEEDBED_DATA_ROOTS) and, for ``user``, inside what they may read (another project's checkpoints
    and library models are not found); ``task: dataset:<name>`` takes the entry's file, mapping and split (the
    run's ``project``'s entry first); with ``dry_run``, a dataset's first reference answer must be rewarded by
    the run's verifiers (training.reward_dry_run); its caps those of ``queue`` (``queue_named``). Raises
    FieldErrors with per-field messages."""
    from webapp.datasets.selectors import resolve_dataset_config

    data = resolve_dataset_config(data, user=user, project=project)
    if isinstance(data, dict):
        _check_judges(data.get("rewards"), project=project)  # before the schema's dry run asks any judge
    errors = {}
    if isinstance(data, dict):
        for name in ("model_path", "data_path"):
            value = data.get(name)
            problem = config_path_error(user=user, path=value) if isinstance(value, str) else ""
            if problem:
                errors[name] = problem
    if errors:
        raise FieldErrors(errors)
    cfg = TrainConfig.from_dict(data, check_paths=True, roots=settings.SEEDBED_DATA_ROOTS, dry_run=dry_run)
    check_caps(cfg, queue=queue_named(queue, cfg))  # no more than its queue has (webapp.runs.capacity)
    return cfg


def as_config(config: TrainConfig | dict, *, user=None, project=None, dry_run: bool = True,
              queue: str = "") -> TrainConfig:
    """A config as the one schema (training.config) has it: a TrainConfig passes as it is (a request parsed it
    once, in its form, for its user; its judges are checked again for ``project``, which the form may not have
    named), a mapping is parsed and validated (``parse_config``)."""
    if isinstance(config, TrainConfig):
        _check_judges(config.rewards, project=project)
        return config
    return parse_config(config, user=user, project=project, dry_run=dry_run, queue=queue)


def _check_judges(rewards, *, project) -> None:
    """FieldErrors on ``rewards`` when it names a judge endpoint staff did not open to ``project``
    (webapp.library.selectors.judge_problem); the worker checks again when it starts the run (workers.runner)."""
    from webapp.library.selectors import judge_problem

    problem = judge_problem(rewards, project=project)
    if problem:
        raise FieldErrors({"rewards": problem})


def queue_for(cfg: TrainConfig) -> str:
    """Slot kind a run needs: cuda -> gpu, cpu -> cpu, auto -> the deployment's choice."""
    if cfg.device == "cuda" or cfg.rollout_engine == "vllm":
        return "gpu"
    if cfg.device == "cpu":
        return "cpu"
    return settings.SEEDBED_AUTO_QUEUE


def queue_named(name: str, cfg: TrainConfig) -> str:
    """The queue a run goes to: ``name`` when one is given (``cpu``, ``gpu`` or a registered ``Queue``), else the
    one its device needs (``queue_for``). FieldErrors on ``queue`` naming the queues there are."""
    from webapp.runs.models import DEVICE_QUEUES, Queue

    if not name:
        return queue_for(cfg)
    if name in DEVICE_QUEUES or Queue.objects.filter(name=name).exists():
        return name
    known = [*DEVICE_QUEUES, *Queue.objects.exclude(name__in=DEVICE_QUEUES).values_list("name", flat=True)]
    shown = name if isinstance(name, str) and len(name) <= 40 else f"{str(name)[:40]}..."
    raise FieldErrors({"queue": f"no queue named {shown!r}; the queues: {', '.join(known)}"})


def queue_choices() -> list[tuple[str, str]]:
    """The queues a form offers: "" (from the device) first, then cpu, gpu and every registered one."""
    from webapp.runs.models import DEVICE_QUEUES, Queue

    rows = {q.name: q for q in Queue.objects.all()}
    named = [(n, f"{n}: {rows[n].description}" if n in rows and rows[n].description else n) for n in DEVICE_QUEUES]
    named += [(q.name, f"{q.name} ({q.get_kind_display()}){': ' + q.description if q.description else ''}")
              for q in rows.values() if q.name not in DEVICE_QUEUES]
    return [("", "from the device (cpu or gpu)"), *named]
