"""The built-in generated tasks, one module each (docs/architecture.md, "Extension points"): a module of this
package that declares ``TASK = Task(...)`` adds a task by that name (found by ``training.extensions.declared``;
nothing else lists them). A task draws example ``index`` deterministically, so a seed fixes the data order and
the held-out problems (indices past ``training.data.HELD_OUT_OFFSET``) never meet the training prompts. Task
modules import nothing of ``training`` but this package; the verifier that scores a task is a verifier module of
its own (``training/verifiers/``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from training.extensions import declared

__all__ = ["Task", "tasks", "task_names", "task_named"]


@dataclass(frozen=True)
class Task:
    """A generated task: ``name`` (what a config's ``task`` says), ``example(index) -> {"prompt", "answer", ...}``,
    ``rewards`` (its default reward spec), ``what`` (a line for the datasets page) and ``order`` (in lists)."""

    name: str
    example: Callable[[int], dict]
    rewards: tuple[dict, ...]
    what: str
    order: int = 100

    @property
    def scored_by(self) -> str:
        return ", ".join(item["name"] for item in self.rewards)


def tasks() -> dict[str, Task]:
    """Every built-in task by name, in list order (each module of this package walked; imports are cached)."""
    found = sorted((task for _, task in declared(__name__, "TASK")), key=lambda t: (t.order, t.name))
    return {task.name: task for task in found}


def task_names() -> list[str]:
    """
    >>> task_names()
    ['arithmetic', 'countdown']
    """
    return list(tasks())


def task_named(name: str) -> Task:
    found = tasks()
    if name not in found:
        raise KeyError(f"unknown built-in task {name!r}; built in: {', '.join(found)}")
    return found[name]
