"""The sweep form: the run form's knobs (one schema, training.config) x seeds x an optional grid of 1-3 knobs,
a concurrency limit, an early-stopping policy, what a freed slot is used for, and alert bounds.

Field errors come from the validators that own each part: the config schema (``TrainConfig``), the grid and
sweep checks (``services.sweep_create``) and the policy (``policies.make_policy``); the form only parses text.
"""
from __future__ import annotations

import json
from typing import Optional

from django import forms
from django.utils.functional import lazy
from django.utils.text import format_lazy

from training.fields import FieldErrors
from training.memory import MAX_PACK
from webapp.runs.forms import RunForm

from . import services
from .models import FreeSlotUse
from .policies.budget import MAX_BUDGET_RUNS
from .policies import RULES, params_help

POLICY_FIELD = {"name": "policy_name", "metric": "policy_metric", "mode": "policy_mode"}


def parse_seeds(text: str, first_seed: int) -> list[int]:
    """"4" -> 4 seeds from ``first_seed`` on; "1, 5, 9" -> those seeds. Raises ValueError with the problem.

    >>> parse_seeds("3", 10), parse_seeds("7, 3 ,11", 0), parse_seeds("7,", 0)
    ([10, 11, 12], [7, 3, 11], [7])
    >>> parse_seeds("1, , 3", 0)
    Traceback (most recent call last):
    ...
    ValueError: an empty item in the list of seeds (item 2 of '1, , 3'): remove it or write the seed
    """
    parts = [p.strip() for p in text.replace(";", ",").split(",")]
    if parts and not parts[-1]:
        parts.pop()  # a trailing comma marks a single explicit seed ("7,")
    if not any(parts):
        raise ValueError("give a number of seeds (e.g. 4) or a list (e.g. 1, 5, 9)")
    if "" in parts:
        raise ValueError(f"an empty item in the list of seeds (item {parts.index('') + 1} of {text.strip()!r}): "
                         "remove it or write the seed")
    try:
        numbers = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"expected whole numbers separated by commas; got {text!r}") from None
    if len(numbers) == 1 and "," not in text:
        if not 1 <= numbers[0] <= services.MAX_RUNS:
            raise ValueError(f"a count of seeds must lie in [1, {services.MAX_RUNS}]; got {numbers[0]} "
                             "(write a single explicit seed as '7,')")
        return list(range(first_seed, first_seed + numbers[0]))
    return numbers  # explicit seeds: sweep_create checks each against the seed's range


def parse_value(text: str):
    """A grid value: JSON when it parses (numbers, true/false, quoted strings), else the bare text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_grid(text: str) -> dict[str, list]:
    """One knob per line, ``knob = v1, v2, ...``: "lr = 1e-4, 2e-4" -> {"lr": [0.0001, 0.0002]}.

    >>> parse_grid("lr = 1e-4, 2e-4\\n  eps_high=0.28")
    {'lr': [0.0001, 0.0002], 'eps_high': [0.28]}
    """
    grid: dict[str, list] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        knob, sep, values = line.partition("=")
        knob = knob.strip()
        if not sep or not knob:
            raise ValueError(f"line {number}: write 'knob = value, value'; got {line.strip()!r}")
        if knob in grid:
            raise ValueError(f"line {number}: {knob} appears twice")
        grid[knob] = [parse_value(v.strip()) for v in values.split(",") if v.strip()]
    return grid


class SweepForm(RunForm):
    concurrency = forms.IntegerField(min_value=1, max_value=256, initial=2,
                                     help_text="How many of its runs may hold a slot at once.")
    pack = forms.IntegerField(min_value=0, max_value=MAX_PACK, initial=0, required=False, label="seeds a process",
                              help_text="How many of its seeds may train together in one process, each as if alone "
                                        "(packed: a small model leaves most of a device idle). 0: chosen from the "
                                        "queue's workers (slots and memory); 1: each its own. Seedbed's engine, one "
                                        "rank a run, a Llama-family model; TRL, verl and command runs are not packed.")
    seeds = forms.CharField(initial="4", help_text="A number of seeds (4 = seed, seed+1, ...) or an explicit "
                                                   "list (1, 5, 9).")
    grid = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3, "placeholder": "lr = 1e-4, 2e-4"}),
                           help_text="Optional: one to three knobs crossed with the seeds, one per line: "
                                     "knob = value, value.")
    policy_name = forms.ChoiceField(choices=lambda: [(n, n) for n in RULES], initial="median", label="policy",
                                    help_text=lazy(lambda: "Early stopping: " + "; ".join(
                                        f"{name}: {rule.summary.rstrip('.')}" for name, rule in RULES.items()) + ".",
                                        str)())
    policy_metric = forms.CharField(initial="reward/mean", required=False, label="policy metric",
                                    help_text="The logged metric the policy watches.")
    policy_mode = forms.ChoiceField(choices=[("max", "max"), ("min", "min")], initial="max", label="policy mode",
                                    help_text="max: larger is better (reward, accuracy); min: smaller is better.")
    policy_params = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), label="policy params",
                                    help_text=format_lazy('Other policy parameters as JSON, e.g. {{"grace_steps": 5, '
                                                          '"min_peers": 2}}; the defaults: {}.', lazy(params_help, str)()))
    free_slot_use = forms.ChoiceField(choices=FreeSlotUse.choices, initial=FreeSlotUse.NOTHING,
                                      label="freed slot, no seed queued",
                                      help_text="A stopped run's slot goes to the next queued seed first; when none "
                                                "is left: nothing, extend the best survivor, or start new seeds "
                                                "within the budget.")
    extend_steps = forms.IntegerField(min_value=0, initial=0, required=False, label="extend by",
                                      help_text="Steps an extended survivor gets.")
    budget = forms.IntegerField(min_value=1, max_value=MAX_BUDGET_RUNS, required=False, label="budget (full runs)",
                                help_text="With new seeds: the compute of this many runs to their end, e.g. 8. Freed "
                                          "slots start a new seed only if it can finish within it; at least the "
                                          "runs the sweep starts with. With extensions (optional): a survivor is "
                                          "extended only while it pays for the extra steps.")
    alert_bounds = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), label="alert bounds",
                                   help_text='Optional JSON overriding the RL-health alerts, e.g. {"entropy_min": 0.1, '
                                             '"clipped_frac_max": 0.5, "zero_std_max": 0.8}.')

    guard_entropy_below = forms.FloatField(required=False, label="stop when entropy stays below",
                                           help_text="Health guard: stop a run whose smoothed entropy (nats per "
                                                     "token) stays below this, e.g. 0.05 (entropy collapse). Empty = off.")
    guard_clipped_above = forms.FloatField(required=False, label="stop when truncated share stays above",
                                           help_text="Stop a run whose smoothed length/clipped_frac (completions cut "
                                                     "at max_new_tokens) stays above this share, e.g. 0.9. Empty = off.")
    guard_zero_std_above = forms.FloatField(required=False, label="stop when zero-variance groups stay above",
                                            help_text="Stop a run whose smoothed frac_zero_std_groups (groups with "
                                                      "equal rewards: no signal) stays above this, e.g. 0.95. Empty = off.")
    guard_reward_drop = forms.FloatField(required=False, label="stop when reward falls from its best by",
                                         help_text="Stop a run whose smoothed reward/mean stays more than this below "
                                                   "its own best so far, e.g. 0.2 (a collapse). Empty = off.")
    guard_for_steps = forms.IntegerField(required=False, initial=10, label="guards wait (steps)",
                                         help_text="A guard stops a run only after its bound has been crossed this "
                                                   "many steps in a row. Guards work with any policy, manual included.")

    # form field -> (guard kind, the key its value sets)
    GUARD_FIELDS = {"guard_entropy_below": ("entropy_collapse", "below"), "guard_clipped_above": ("length_at_cap", "above"),
                    "guard_zero_std_above": ("zero_std", "above"), "guard_reward_drop": ("reward_drop", "drop")}

    SWEEP_FIELDS = ("seeds", "concurrency", "pack", "grid", "policy_name", "policy_metric", "policy_mode", "policy_params",
                    "free_slot_use", "extend_steps", "budget", "alert_bounds", *GUARD_FIELDS, "guard_for_steps")

    def clean(self):
        cleaned = super().clean()  # the run config (self.config) with the schema's per-field errors
        self.sweep_args = None
        parsed = {}
        for name, parser in (("grid", parse_grid), ("policy_params", parse_json_object),
                             ("alert_bounds", parse_json_object)):
            try:
                parsed[name] = parser(cleaned.get(name) or "")
            except ValueError as exc:
                self.add_error(name, str(exc))
        if self.config is None or self.errors:
            return cleaned
        try:
            seeds = parse_seeds(cleaned["seeds"], self.config.seed)
        except ValueError as exc:
            self.add_error("seeds", str(exc))
            return cleaned
        policy = {**parsed["policy_params"], "name": cleaned["policy_name"],
                  "metric": cleaned.get("policy_metric") or "reward/mean", "mode": cleaned["policy_mode"]}
        guards = self._guards(cleaned)
        if guards:  # the form's guards first (errors keyed guards.<i> name them), then any given as JSON
            extra = policy.get("guards")
            policy["guards"] = guards + (extra if isinstance(extra, list) else [] if extra is None else [extra])
        self.sweep_args = {
            "config": self.config, "seeds": seeds, "concurrency": cleaned["concurrency"],
            "pack": cleaned.get("pack") or 0, "grid": parsed["grid"],
            "policy": policy, "free_slot_use": cleaned["free_slot_use"],
            "extend_steps": cleaned.get("extend_steps") or 0, "budget": cleaned.get("budget"),
            "alert_bounds": parsed["alert_bounds"], "name": cleaned.get("name") or "",
            "project": cleaned.get("project"), "queue": cleaned.get("queue") or "",
        }
        return cleaned

    def _guards(self, cleaned: dict) -> list[dict]:
        """The guards the form's fields set, in GUARD_FIELDS order (remembered to put their errors back)."""
        self._guard_of_index = []
        guards = []
        for name, (kind, key) in self.GUARD_FIELDS.items():
            if cleaned.get(name) is None:
                continue
            guard = {"kind": kind, key: cleaned[name]}
            if cleaned.get("guard_for_steps") is not None:
                guard["for_steps"] = cleaned["guard_for_steps"]
            guards.append(guard)
            self._guard_of_index.append(name)
        return guards

    def _field_of_guard_error(self, sub: str) -> Optional[str]:
        """``guards.<i>.<key>`` of a guard the form's fields made -> that field (for_steps -> guard_for_steps)."""
        parts = sub.split(".")
        made = getattr(self, "_guard_of_index", [])
        if len(parts) == 3 and parts[1].isdigit() and int(parts[1]) < len(made):
            return "guard_for_steps" if parts[2] == "for_steps" else made[int(parts[1])]
        return None

    def add_service_errors(self, exc: FieldErrors) -> None:
        """Attach a service's FieldErrors to the fields it names (policy.<key> -> the policy fields)."""
        for key, message in exc.errors.items():
            if key.startswith("policy."):
                sub = key[len("policy."):]
                guard_field = self._field_of_guard_error(sub)
                if guard_field:
                    self.add_error(guard_field, message)
                    continue
                field = POLICY_FIELD.get(sub, "policy_params")
                self.add_error(field, message if field != "policy_params" else f"{sub}: {message}")
            else:
                self.add_error(key if key in self.fields else None, message)


def parse_json_object(text: str) -> dict:
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object {{...}}; got {type(value).__name__}")
    return value


class ReplayForm(forms.Form):
    """"What would policy X have done?" on a finished sweep: a policy as the sweep form takes it (name, metric, mode,
    its other keys as JSON), checked by the same parser (``what_if.replay_policy_config``, errors on the fields)."""

    policy_name = SweepForm.base_fields["policy_name"]
    policy_metric = SweepForm.base_fields["policy_metric"]
    policy_mode = SweepForm.base_fields["policy_mode"]
    policy_params = SweepForm.base_fields["policy_params"]

    # policy.<key> -> the field that holds it (guards come only as JSON here: policy_params' "guards")
    add_service_errors = SweepForm.add_service_errors
    _field_of_guard_error = SweepForm._field_of_guard_error

    def clean(self):
        cleaned = super().clean()
        self.policy = None
        try:
            params = parse_json_object(cleaned.get("policy_params") or "")
        except ValueError as exc:
            self.add_error("policy_params", str(exc))
            return cleaned
        if not self.errors:
            self.policy = {**params, "name": cleaned["policy_name"],
                           "metric": cleaned.get("policy_metric") or "reward/mean", "mode": cleaned["policy_mode"]}
        return cleaned
