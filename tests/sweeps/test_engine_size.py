"""The policy engine stays small (docs/architecture.md, "Early stopping"): no module of
``webapp/sweeps/policies`` over 500 lines, ``Policy`` with at most 8 public methods (no registered policy adds
one), and every stopping rule registered as a function with its formula in its docstring."""
from __future__ import annotations

import inspect
from pathlib import Path

from webapp.sweeps.policies import RULES, Policy, make_policy

POLICIES = Path(__file__).resolve().parents[2] / "webapp" / "sweeps" / "policies"
MAX_LINES = 500
MAX_PUBLIC_METHODS = 8


def public_methods(cls: type) -> set[str]:
    """Names not starting with "_" that are functions or properties on ``cls`` or its bases (attributes such as
    ``rule`` are not methods)."""
    return {name for name, value in inspect.getmembers(cls)
            if not name.startswith("_") and (inspect.isfunction(value) or isinstance(value, property))}


def test_no_policy_module_is_over_500_lines():
    sizes = {path.name: len(path.read_text().splitlines()) for path in POLICIES.glob("*.py")}
    assert len(sizes) > 5, sizes  # the folder was found
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_policy_has_at_most_8_public_methods_and_no_rule_adds_one():
    base = public_methods(Policy)
    assert len(base) <= MAX_PUBLIC_METHODS, sorted(base)
    for name in RULES:
        config = {"name": name, "metric": "m", "max_steps": 10, **({"patience": 3} if name == "threshold" else {})}
        cls = type(make_policy(config))
        assert public_methods(cls) <= base, (name, sorted(public_methods(cls) - base))


def test_the_counter_sees_a_public_method_a_subclass_adds():
    class Chatty(Policy):
        def shout(self):
            return "!"

        @property
        def loud(self):
            return True
    assert public_methods(Chatty) - public_methods(Policy) == {"shout", "loud"}


def test_every_policy_has_a_registered_stopping_rule_with_its_formula():
    for name, rule in ((name, record.stops) for name, record in RULES.items()):
        assert inspect.isfunction(rule), name
        assert len(inspect.signature(rule).parameters) == 3, name  # (sweep, params, memo)
        assert f"``{name}``" in (rule.__doc__ or ""), f"{name}: its docstring names the rule"
    for name in ("median", "asha", "threshold", "bayes"):  # the rules that compare: a formula with a relation
        assert any(op in RULES[name].stops.__doc__ for op in ("<=", ">=", "<", ">")), name


def test_each_rule_is_one_record_of_the_one_registry_that_the_form_reads():
    import dataclasses

    import pytest

    from training.fields import FieldErrors
    from webapp.sweeps.forms import SweepForm
    from webapp.sweeps.policies import RULES

    assert [name for name, _ in SweepForm.base_fields["policy_name"].choices] == list(RULES)
    for name, rule in RULES.items():
        assert rule.policy.rule == name == rule.name and rule.policy.record is rule  # the name is written once
        assert rule.waiting_text and rule.summary, name
        params = make_policy({"name": name, "metric": "m", "max_steps": 10, "min_peers": 1,
                              **({"patience": 3} if name == "threshold" else {})}).params
        said = rule.waiting(params, 9, [])  # past the grace step, alone in the sweep
        assert (said is None) if name == "manual" else said.startswith("waiting for peers"), (name, said)
        ranged = [f for f in dataclasses.fields(rule.params) if {"min", "gt"} & set(f.metadata)]
        assert ranged or name == "manual", name  # its ranges are in its fields' metadata
        for f in ranged:
            low = f.metadata.get("min", f.metadata.get("gt"))
            config = {"name": name, "metric": "m", "max_steps": 10, **({"patience": 3} if name == "threshold" else {}),
                      f.name: low - 1}
            with pytest.raises(FieldErrors) as caught:
                make_policy(config)
            assert f.name in caught.value.errors, (name, f.name)
