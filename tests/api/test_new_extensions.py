"""A new extension is one module, offered where users meet it: a rule of ``webapp/sweeps/policies/rules/`` (the sweep
form, the what-if form, the policies endpoint, the config check, a replay), and a verifier, a task and an engine
beside the built-in ones (the run API takes a config naming each); nothing else names them (docs/architecture.md,
"Extension points")."""
from __future__ import annotations

import sys

import pytest

THROWAWAY = '''"""``floor``: a throwaway rule of a test: a run whose smoothed value at step ``at`` is below ``floor`` stops."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from webapp.sweeps.policies.decision import STOP, Decision
from webapp.sweeps.policies.parameters import CommonParams, _r
from webapp.sweeps.policies.policy import Policy, Rule


@dataclass(frozen=True)
class FloorParams(CommonParams):
    """Floor (``floor``): one look at step ``at``."""

    at: int = _r(3, min=1)
    floor: float = _r(0.5, min=0.0)


def floor_stops(sweep, p, memo):
    """``floor``: stop r at s = ``at`` when x_r(s) < ``floor``."""
    return [Decision(run_id=run_id, action=STOP, rule="floor", step=curve.last_step, value=curve.last_value,
                     threshold=p.floor, reason=f"below the floor {p.floor:g}")
            for run_id, curve in sweep.judgeable() if curve.last_step == p.at and curve.last_value < p.floor]


def floor_waiting(p, last_step, others) -> Optional[str]:
    """never waits: one look at its step"""
    return None


class FloorPolicy(Policy):
    """Stop a run below a floor at one step."""

    def _next_step(self, after: int) -> Optional[int]:
        return self.params.at if self.params.at >= after else None


RULE = Rule("floor", FloorParams, floor_stops, FloorPolicy, floor_waiting)
'''


@pytest.fixture
def floor_rule(tmp_path, monkeypatch):
    import webapp.sweeps.policies.rules as package
    from webapp.sweeps.policies import find_rules

    (tmp_path / "floor.py").write_text(THROWAWAY)
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "webapp.sweeps.policies.rules.floor", raising=False)
    yield find_rules()
    sys.modules.pop("webapp.sweeps.policies.rules.floor", None)
    monkeypatch.undo()
    assert "floor" not in find_rules()


def test_a_rule_module_is_found_and_offered_everywhere(floor_rule, alice):
    from training.fields import FieldErrors
    from webapp.sweeps.forms import ReplayForm, SweepForm
    from webapp.sweeps.policies import make_policy, parse_config, replay

    assert list(floor_rule)[0] == "manual" and "floor" in floor_rule
    form = SweepForm()
    assert ("floor", "floor") in form.fields["policy_name"].choices
    assert "floor: Stop a run below a floor at one step" in str(form.fields["policy_name"].help_text)
    assert "floor: at 3, floor 0.5" in str(form.fields["policy_params"].help_text)
    assert ("floor", "floor") in ReplayForm().fields["policy_name"].choices

    listed = {r["name"]: r for r in alice.get("/sweeps/policies").json()["policies"]}
    assert listed["floor"]["summary"] == "Stop a run below a floor at one step."
    assert {p["name"]: p["bounds"] for p in listed["floor"]["params"]}["at"] == {"min": 1}

    with pytest.raises(FieldErrors) as caught:
        parse_config({"name": "floor", "metric": "m", "max_steps": 10, "at": 0})
    assert caught.value.errors == {"at": "must be at least 1; got 0"}
    config = {"name": "floor", "metric": "m", "max_steps": 10, "grace_steps": 0, "min_peers": 1}
    assert make_policy(config).describe().startswith("floor on m (max)")
    curves = {"low": [(s, 0.1) for s in range(1, 11)], "high": [(s, 0.9) for s in range(1, 11)]}
    assert replay(config, curves).stopped_at == {"low": 3}


@pytest.fixture
def throwaway_modules(tmp_path, monkeypatch):
    """A verifier, a task and an engine, each a module a test wrote beside the built-in ones."""
    import training.engines as engines
    import training.tasks as tasks
    import training.verifiers as verifiers
    from tests.training.test_engine_registry import TOY_MODULE
    from tests.training.test_tasks import THROWAWAY as TASK_MODULE
    from tests.verifiers.test_registry import THROWAWAY as VERIFIER_MODULE
    from training.verifiers import base

    added = {"training.verifiers.throwaway_reward": (verifiers, VERIFIER_MODULE),
             "training.tasks.doubling": (tasks, TASK_MODULE), "training.engines.toy": (engines, TOY_MODULE)}
    for name, (package, text) in added.items():
        folder = tmp_path / package.__name__
        folder.mkdir()
        (folder / f"{name.rpartition('.')[2]}.py").write_text(text)
        monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setattr(engines, "_REGISTRY", {})
    monkeypatch.setattr(engines, "_discovered", False)
    yield
    for name in added:
        sys.modules.pop(name, None)
    base.VERIFIER_REGISTRY.pop("throwaway", None)


def test_a_verifier_a_task_and_an_engine_module_are_each_taken_by_the_api(throwaway_modules, alice, config):
    from webapp.runs.models import Run

    bad = alice.post("/runs", {"config": {**config, "engine": "nope"}})
    assert bad.status_code == 400 and "toy" in bad.json()["errors"]["engine"]
    wanted = {"engine": "toy", "task": "doubling", "rewards": [{"name": "throwaway", "params": {"word": "ok"}}]}
    made = alice.post("/runs", {"name": "new kinds", "config": {**config, **wanted}})
    assert made.status_code == 201, made.content
    stored = Run.objects.get(pk=made.json()["id"]).config
    assert {key: stored[key] for key in wanted} == wanted
    typo = alice.post("/runs", {"config": {**config, **wanted, "rewards": [{"name": "throwaway", "params": {"wrd": 1}}]}})
    assert typo.status_code == 400 and "'wrd'" in typo.json()["errors"]["rewards"]
