"""The built-in generated tasks are the modules of training/tasks/ (training.extensions' walk): each one's name,
examples, default rewards and line for the datasets page come from its TASK, and a new one is one module file."""
from __future__ import annotations

import sys

import pytest

import training.tasks as package
from training.config import TrainConfig, task_suggestions
from training.data import default_rewards, make_prompt_source, task_error
from training.fields import FieldErrors
from training.tasks import task_named, task_names

THROWAWAY = '''
from training.tasks import Task


def doubling_example(index: int) -> dict:
    return {"prompt": f"2*{index % 50}=", "answer": str(2 * (index % 50))}


TASK = Task(name="doubling", example=doubling_example, rewards=({"name": "exact", "weight": 1.0},),
            what="2*n= (a throwaway task of a test)", order=5)
'''


def test_the_built_in_tasks_are_the_modules_that_declare_one():
    assert task_names() == ["arithmetic", "countdown"]
    assert task_suggestions()[:2] == ("arithmetic", "countdown")
    assert default_rewards("countdown") == [{"name": "countdown", "weight": 1.0}]
    assert default_rewards("humaneval") == [{"name": "code", "weight": 1.0}]
    assert task_error("countdown") == "" and "arithmetic, countdown, humaneval, ifbench" in task_error("nope")
    example = task_named("countdown").example(7)
    from training.verifiers import get_verifier

    assert get_verifier("countdown")(example["answer"], example).score in (0.0, 1.0)  # found by the verifier walk
    with pytest.raises(KeyError, match="unknown built-in task 'nope'; built in: arithmetic, countdown"):
        task_named("nope")


def test_a_new_task_is_one_module_file(tmp_path, monkeypatch):
    """A module beside the built-in tasks that declares TASK is a valid task, offered by the forms and the datasets
    page, drawn by the prompt source and scored by its own rewards: nothing else names it."""
    (tmp_path / "doubling.py").write_text(THROWAWAY)
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "training.tasks.doubling", raising=False)
    try:
        assert task_names() == ["arithmetic", "countdown", "doubling"]
        cfg = TrainConfig.from_dict({"task": "doubling"}, check_paths=False)
        assert cfg.task == "doubling" and task_error("doubling") == ""
        source = make_prompt_source("doubling")
        assert source.eval_set(2) == [task_named("doubling").example(10_000_000 + i) for i in range(2)]
        assert default_rewards("doubling") == [{"name": "exact", "weight": 1.0}]
        assert "doubling" in task_suggestions()

        from webapp.datasets.selectors import builtin_sources
        from webapp.runs.forms import RunForm

        assert {"task": "doubling", "what": "2*n= (a throwaway task of a test)", "scored_by": "exact"} in builtin_sources()
        assert "doubling" in RunForm().fields["task"].widget.suggestions
    finally:
        sys.modules.pop("training.tasks.doubling", None)
        monkeypatch.undo()
    with pytest.raises(FieldErrors) as caught:
        TrainConfig.from_dict({"task": "doubling"}, check_paths=False)
    assert "task" in caught.value.errors
