""""Re-run with changes": a new run's (or sweep's) form filled with an existing run's (or sweep's) complete settings,
the differences from it listed before launch (static/seedbed/copy_diff.js) and on the new one's page, and its
lineage recorded (``Run.copied_from``, ``Sweep.copied_from``; docs/architecture.md "A run's life").

A copy starts from the weights its config names (``model_path``), as the original did; "New run from this
checkpoint" is the other prefill: it continues from the checkpoint's trained weights.
"""
from __future__ import annotations

import json
import re

# Form fields that are not settings of the work: who and where, and the form's own bookkeeping.
NOT_SETTINGS = ("name", "project", "rendered_preset", "launch_anyway")
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
               "pack": sweep.pack, "policy_name": policy.get("name") or "manual", "policy_metric": policy.get("metric") or "reward/mean",
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


NAME_CHARS = 200  # Run.name's and Sweep.name's max_length
SHOWN_CHANGES = 2  # changes a copy's name lists before "+ N more"


def copy_name(name: str, changes: list[tuple[str, str]], taken) -> str:
    """A copy's default name: the original's and what changed ("a · total_steps 60, lr 2e-05", two at most, then
    "+ N more"), "(copy)" when nothing did; never one of ``taken`` (a number after it then).

    >>> copy_name("bayes", [], {"bayes"})
    'bayes (copy)'
    >>> copy_name("bayes", [("total_steps", "60")], {"bayes", "bayes · total_steps 60"})
    'bayes · total_steps 60 (2)'
    >>> copy_name("b", [("lr", "2e-05"), ("seeds", "0, 1"), ("grid", "")], set())
    'b · lr 2e-05, seeds 0, 1 + 1 more'
    """
    if changes:
        shown = ", ".join(f"{key} {value[:24]}".strip() for key, value in changes[:SHOWN_CHANGES])
        more = len(changes) - SHOWN_CHANGES
        base = f"{name} · {shown}" + (f" + {more} more" if more > 0 else "")
    else:
        base = f"{name} (copy)"
    base = base[:NAME_CHARS - 8]  # room for " (9999)"
    candidate, number = base, 2
    while candidate in taken:
        candidate, number = f"{base} ({number})", number + 1
    return candidate


def is_default_name(submitted: str, name: str) -> bool:
    """Whether ``submitted`` is a name the copy's form gave (``copy_name`` with no change), or the original's own.

    >>> is_default_name("a (copy)", "a"), is_default_name("a (copy) (3)", "a"), is_default_name("a b", "a")
    (True, True, False)
    """
    submitted = submitted.strip()
    return submitted == name or re.fullmatch(re.escape(name) + r" \(copy\)( \(\d+\))?", submitted) is not None


def name_of(original) -> str:
    """What a copy's name starts from: the original's name, or "run 12" (a run may have none)."""
    return original.name or f"{type(original).__name__.lower()} {original.pk}"


def default_name(original, taken) -> str:
    """The name a copy's form opens with: ``copy_name`` of the original with no change yet."""
    return copy_name(name_of(original), [], taken)


def changed_fields(original: dict, data) -> list[tuple[str, str]]:
    """The settings fields whose submitted value (``data``: the POST) differs from what the copy's form showed
    (``original``: ``form_values``), in the form's order, each with its new text (whitespace runs as one space; a
    checkbox "true"/"false").

    >>> changed_fields({"lr": "3e-05", "seeds": "0, 1", "x": True}, {"lr": "2e-05", "seeds": " 0,  1 "})
    [('lr', '2e-05'), ('x', 'false')]
    """
    changes = []
    for name, before in original.items():
        if isinstance(before, bool):
            after = name in data and data.get(name) not in ("", "off", "false")
            if after != before:
                changes.append((name, show_value(after)))
        elif " ".join(str(data.get(name, "")).split()) != " ".join(before.split()):
            changes.append((name, " ".join(str(data.get(name, "")).split())))
    return changes


def prefill_identity(form, *, name: str, project) -> None:
    """The copy's name (``copy_name``: never the original's) and project shown as the original's (the project
    only where the user may launch)."""
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
