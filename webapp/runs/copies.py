""""Re-run with changes": a new run's (or sweep's) form filled with an existing run's (or sweep's) complete settings,
the differences from it listed before launch (static/seedbed/copy_diff.js) and on the new one's page, and its
lineage recorded (``Run.copied_from``, ``Sweep.copied_from``; docs/architecture.md "A run's life").

A copy starts from the weights its config names (``model_path``), as the original did; "New run from this
checkpoint" is the other prefill: it continues from the checkpoint's trained weights.
"""
from __future__ import annotations

import json

# Form fields that are not settings of the work: who and where, and the form's own bookkeeping.
NOT_SETTINGS = ("name", "project", "rendered_preset")
MISSING = "–"


def show_value(value) -> str:
    """A setting as the differences list shows it: text as it is, anything else as JSON.

    >>> show_value(1e-05), show_value("grpo"), show_value([1, 2]), show_value(None), show_value(True)
    ('1e-05', 'grpo', '[1, 2]', 'null', 'true')
    """
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def config_diff(before: dict, after: dict) -> list[dict]:
    """The settings whose values differ between ``before`` and ``after`` (flat mappings), by key: each
    {"key", "before", "after", "text"}, a key one side lacks shown as "–".

    >>> config_diff({"lr": 1e-05, "seed": 0}, {"lr": 2e-05, "seed": 0})
    [{'key': 'lr', 'before': '1e-05', 'after': '2e-05', 'text': 'lr: 1e-05 → 2e-05'}]
    >>> [d["text"] for d in config_diff({"grid": {}}, {"grid": {"lr": [1, 2]}, "tag": "x"})]
    ['grid: {} → {"lr": [1, 2]}', 'tag: – → x']
    """
    rows = []
    for key in sorted(set(before) | set(after)):
        if key in before and key in after and before[key] == after[key]:
            continue
        old = show_value(before[key]) if key in before else MISSING
        new = show_value(after[key]) if key in after else MISSING
        rows.append({"key": key, "before": old, "after": new, "text": f"{key}: {old} → {new}"})
    return rows


def seeds_text(seeds: list[int]) -> str:
    """A sweep's seeds as the sweep form's seeds box reads them back (``forms.parse_seeds``): an explicit list,
    a single seed with a trailing comma (a lone number is a count).

    >>> seeds_text([0, 1, 2]), seeds_text([7])
    ('0, 1, 2', '7,')
    """
    return ", ".join(str(s) for s in seeds) + ("," if len(seeds) == 1 else "")


def grid_text(grid: dict) -> str:
    """A grid as the sweep form's grid box reads it back (``forms.parse_grid``: values as JSON).

    >>> print(grid_text({"lr": [0.0001, 0.0002], "loss_agg": ["token"]}))
    lr = 0.0001, 0.0002
    loss_agg = "token"
    """
    return "\n".join(f"{knob} = {', '.join(json.dumps(v) for v in values)}" for knob, values in grid.items())


POLICY_OWN_FIELDS = ("name", "metric", "mode")


def sweep_form_initial(sweep, plan) -> dict:
    """The sweep form's own fields (beyond the run knobs) filled with ``sweep``'s seeds, concurrency, grid, policy
    (its stored config: what is not name, metric or mode goes in the params box, guards included, ``max_steps``
    left out where it is the runs' ``total_steps``, its default), freed-slot use, budget and alert bounds
    (``plan``: its SweepPlan, or None for a sweep made without the form)."""
    policy = sweep.policy or {}
    params = {k: v for k, v in policy.items() if k not in POLICY_OWN_FIELDS}
    if params.get("max_steps") == sweep.config.get("total_steps"):
        # the horizon the launch defaulted to the runs' steps follows them: a copy with other total_steps gets
        # its own (kept, a 300-step horizon on a 30-step copy judged "every step from 60" and never acted)
        del params["max_steps"]
    initial = {"name": sweep.name, "seeds": seeds_text(sweep.seeds), "concurrency": sweep.concurrency,
               "policy_name": policy.get("name") or "manual", "policy_metric": policy.get("metric") or "reward/mean",
               "policy_mode": policy.get("mode") or "max", "policy_params": json.dumps(params) if params else ""}
    if plan is not None:
        initial.update({"grid": grid_text(plan.grid or {}), "free_slot_use": plan.free_slot_use,
                        "extend_steps": plan.extend_steps, "budget": plan.budget,
                        "alert_bounds": json.dumps(plan.alert_bounds) if plan.alert_bounds else ""})
    return initial


def sweep_settings(sweep, plan) -> dict:
    """A sweep's settings as one flat mapping for ``config_diff``: its run config's knobs, then seeds, concurrency,
    grid and policy (its mode said: max when unsaid, as the policies read it)."""
    policy = {"mode": "max", **sweep.policy} if sweep.policy else {}
    return {**sweep.config, "seeds": sweep.seeds, "concurrency": sweep.concurrency,
            "grid": (plan.grid if plan is not None else {}) or {}, "policy": policy}


def form_values(form) -> dict:
    """What an unbound launch form shows in each settings field (its text, a checkbox's state): the original a
    page compares the edited form with (static/seedbed/copy_diff.js)."""
    values = {}
    for name in form.fields:
        if name in NOT_SETTINGS:
            continue
        value = form[name].value()
        values[name] = value if isinstance(value, bool) else "" if value is None else str(value)
    return values


def prefill_identity(form, *, name: str, project) -> None:
    """The copy's name and project shown as the original's (the project only where the user may launch)."""
    form.initial["name"] = name
    field = form.fields.get("project")
    if field is not None and field.queryset.filter(pk=project.pk).exists():
        form.initial["project"] = project.name


def copied_note(original, settings: dict, settings_of, user) -> dict | None:
    """What a run's (or sweep's) page says of the one it was copied from: {"kind", "id", "readable", "diff"}; the
    differences (``config_diff`` of ``settings_of(original)`` and ``settings``) only for a viewer who may read the
    original, else it is "a run of another project". None when it was not copied (or the original is gone)."""
    if original is None:
        return None
    from webapp.projects.selectors import visible

    readable = visible(type(original).objects.filter(pk=original.pk), user).exists()
    return {"kind": type(original).__name__.lower(), "id": original.pk, "readable": readable,
            "diff": config_diff(settings_of(original), settings) if readable else []}
