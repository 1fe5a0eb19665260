"""The rule registry: every rule a module of ``policies.rules`` declares (``RULE = Rule(...)``, found by a walk of
that package: ``training.extensions.declared``), by its name, ``manual`` (the default) first, then the others in
name order; and what is made from it: ``make_policy``, ``parse_config``, the forms' and the API's ``rule_list``, and
``replay`` (a fresh policy of a config fed recorded curves: ``replay.replay_policy``) (docs/architecture.md, "Early
stopping")."""
from __future__ import annotations

import dataclasses
from typing import Any, Hashable, Optional, Sequence

from training.extensions import declared
from training.fields import FieldErrors

from . import history_risk
from .history_risk import LEARN
from .parameters import CommonParams, defaults_text, param_specs, parse_params
from .policy import Policy, Rule
from .replay import ReplayResult, replay_policy

__all__ = ["RULES", "DEFAULT_RULE", "find_rules", "rule_list", "make_policy", "parse_config",
           "params_help", "stored_config", "one_run_error", "learns_from_history", "replay"]

DEFAULT_RULE = "manual"
"""The rule of a config that names none (``{}`` is a manual sweep)."""


RULES: dict[str, Rule] = {}
"""name -> its record, every rule ``policies.rules`` declares (``find_rules``)."""


def find_rules() -> dict[str, Rule]:
    """Walk ``policies.rules`` and hold what its modules declare in ``RULES`` (the same dict, filled again: a module
    a test adds to the package's path is found by calling this again)."""
    rules = sorted((rule for _, rule in declared("webapp.sweeps.policies.rules", "RULE")),
                   key=lambda rule: (rule.name != DEFAULT_RULE, rule.name))
    names = [rule.name for rule in rules]
    if len(set(names)) != len(names):
        raise RuntimeError(f"two rules declare one name: {sorted(n for n in names if names.count(n) > 1)}")
    RULES.clear()
    RULES.update((rule.name, rule) for rule in rules)
    return RULES


find_rules()


def one_run_error(config: dict, runs: int) -> Optional[str]:
    """Why a sweep of ``runs`` runs cannot use the policy of ``config`` (one that compares seeds, with one run),
    or None. E.g. ``bayes compares seeds: give at least 2``."""
    name = config.get("name") or DEFAULT_RULE
    rule = RULES.get(name)
    return f"{name} compares seeds: give at least 2" if rule and rule.compares and runs < 2 else None


def learns_from_history(config: dict) -> bool:
    """Whether the policy of ``config`` learns from the project's finished sweeps (so the caller reads them)."""
    rule = RULES.get(config.get("name") or DEFAULT_RULE)
    return bool(rule and rule.policy.learns)


def rule_list() -> list[dict]:
    """Every rule as the forms, the API (``GET /api/v1/sweeps/policies``) and the CLI (``seedbed sweeps
    policies``) list it: name, summary, what it says while waiting, and its own parameters (those beyond the
    common ones: ``parameters.param_specs``), then the common ones once."""
    common = param_specs(CommonParams)
    names = {spec["name"] for spec in common}
    return [{"name": name, "summary": rule.summary, "waiting": rule.waiting_text,
             "params": [spec for spec in param_specs(rule.params) if spec["name"] not in names
                        or _default_differs(rule.params, CommonParams, spec["name"])]}
            for name, rule in RULES.items()] + [{"name": "(every rule)", "summary": "the keys every rule takes",
                                                 "waiting": "", "params": common}]


def _default_differs(cls: type, base: type, name: str) -> bool:
    field_of = {f.name: f for f in dataclasses.fields(cls)}
    return field_of[name].default != {f.name: f for f in dataclasses.fields(base)}[name].default


def parse_config(config: dict) -> CommonParams:
    """Validate a policy config; raises FieldErrors naming every bad key. An empty config (or no name) is
    manual."""
    if not isinstance(config, dict):
        raise FieldErrors({"config": f"expected a mapping; got {type(config).__name__}"})
    name = config.get("name") or DEFAULT_RULE
    if not isinstance(name, str) or name not in RULES:
        raise FieldErrors({"name": f"must be one of {', '.join(RULES)}; got {name!r}"})
    return parse_params(RULES[name].params, {**config, "name": name})


def make_policy(config: dict, width: int = 1, history=None, risk_fit: Any = LEARN) -> Policy:
    """Build a policy from ``{"name": ..., "metric": ..., "mode": ..., "max_steps": ..., other keys}``.

    ``metric`` and ``max_steps`` are required by every policy but manual (the default, also for ``{}``); every
    other key has the default documented on its params dataclass (``CommonParams`` plus ``MedianParams``,
    ``AshaParams``, ``ThresholdParams`` or ``BayesParams``). ``width``: the steps each point it will be fed is the
    mean of (the chart tier's bucket width; ``CommonParams.for_width``). ``history``: the finished sweeps of the same
    project on the same metric, each run id -> [(step, value)] at raw steps (runs stopped early included); a rule
    that learns from them (``bayes``: ``prior.learn``, and its risk level, ``history_risk.learn``) does, the others
    ignore them. ``risk_fit``: bayes's risk level already learned from them (``history_risk.RiskFit``, None for
    the built-in risk map: the live check's stored one, ``webapp.sweeps.risk_fits``); by default learned here.
    """
    params = parse_config(config).for_width(width)
    policy = RULES[config.get("name") or DEFAULT_RULE].policy(params)
    if risk_fit == LEARN:
        risk_fit = history_risk.learn(history, config, replay) if policy.learns and history else None
    policy._learn(history or [], config, risk_fit)
    return policy


def params_help() -> str:
    """Every policy parameter and its default, for the sweep form."""
    return defaults_text({name: rule.params for name, rule in RULES.items()})


def stored_config(policy: Policy, config: dict) -> dict:
    """What a sweep keeps of the ``config`` that ``policy`` was built from: all of it, but of a manual one only
    what its guards need to judge (max_steps, grace), and nothing without guards (an empty policy is a manual
    sweep)."""
    if policy.rule != "manual":
        return dict(config)
    if policy.guards:
        return {key: config[key] for key in ("name", "guards", "max_steps", "grace_steps") if key in config}
    return {}


def replay(policy_config: dict, curves: dict[Hashable, Sequence[tuple[int, float]]], *, width: int = 1,
           history=None, **options: Any) -> ReplayResult:
    """``replay.replay_policy`` of a fresh ``make_policy(policy_config, width, history=history)``: recorded curves
    fed as a sweep would produce them (``options``: its ``parallel``, ``concurrency``, ``other_metrics``,
    ``budget``, ``initial``, ``beyond``, ``bounds``)."""
    return replay_policy(make_policy(policy_config, width, history=history), curves, **options)
