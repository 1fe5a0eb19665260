"""Every example in a docstring of training/, workers/ and webapp/ runs and gives what it says (the docstrings
carry formulas with worked examples: a wrong example is a wrong formula)."""
from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import training
import webapp
import workers

# modules that cannot be imported here, each for a stated reason (not a silent skip)
NOT_IMPORTABLE = {
    "training.rollout_vllm": "vLLM is a GPU-only optional extra",
}


def modules() -> list[str]:
    names = []
    for package in (training, workers, webapp):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if ".migrations" not in info.name and info.name not in NOT_IMPORTABLE:
                names.append(info.name)
    return sorted(names)


def test_the_module_list_is_not_empty():
    assert {"training.algorithms", "training.rollout", "webapp.runs.services"} <= set(modules())


@pytest.mark.parametrize("name", [n for n in modules() if n.startswith(("training.", "workers.", "webapp."))])
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, report=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (run doctest -v)"
