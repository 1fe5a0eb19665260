"""The "New run" form, generated from the training config schema (training.config.field_specs()).

Every knob is a text-like field so that the schema, not Django, decides what is valid: the form only
collects strings, ``TrainConfig.from_dict`` coerces and validates them, and its per-field messages
(``FieldErrors.errors``) are attached to the matching fields.

Presets: the knobs are rendered filled with the selected preset's values (``rendered_preset`` records
which). A knob still equal to that rendered value is left out of the submitted config, so the preset
finally chosen applies to every knob the user did not touch.
"""
from __future__ import annotations

import json

from django import forms
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from training.config import PRESETS, TrainConfig, field_specs
from training.engines import available_engines, engine_knobs_lacked, engine_named
from training.engines.command import registered_commands
from training.fields import FieldErrors
from training.verifiers.registry import verifier_params_help
from webapp.projects.models import Role
from webapp.projects.selectors import projects_where
from webapp.runs.services import parse_config, queue_choices

# Knobs shown first, in this order; the rest follow in schema order.
# (data_path with the task: a file task is unusable without it, so it is never hidden in "Every other knob")
PRIMARY_KNOBS = ("preset", "engine", "nproc_per_node", "nnodes", "strategy", "command", "model_path", "task",
                 "data_path", "seed", "total_steps", "prompts_per_step", "group_size", "max_new_tokens", "lr",
                 "eps_low", "eps_high", "kl_coef")


class DatalistInput(forms.TextInput):
    """A text box that suggests values (an HTML datalist) but accepts any: e.g. any reasoning_gym:<task>. A
    suggestion is a value or a (value, label) pair: the label shows beside it (a model folder's name)."""

    def __init__(self, suggestions, attrs=None):
        super().__init__(attrs)
        self.suggestions = list(suggestions)

    def render(self, name, value, attrs=None, renderer=None):
        list_id = f"{name}-suggestions"
        html = super().render(name, value, {**(attrs or {}), "list": list_id}, renderer)
        options = "".join(format_html('<option value="{}">', s) if isinstance(s, str)
                          else format_html('<option value="{}" label="{}">', *s) for s in self.suggestions)
        return mark_safe(f'{html}<datalist id="{list_id}">{options}</datalist>')


def offered_engines() -> tuple[list[str], dict[str, dict], str]:
    """What this server's form offers: the engines it can run (``training.engines.available_engines``), the
    operator's commands, and a problem with the operator's command list ("" when none)."""
    try:
        commands, problem = registered_commands(), ""
    except (OSError, ValueError) as exc:  # the operator's command file is unreadable or malformed
        commands, problem = {}, f"the operator's command list cannot be read: {exc}"
    return available_engines(), commands, problem


def engine_fields(fields: dict, *, engine: str, command: str) -> None:
    """The engine as a select of the engines this server runs, labelled by the registry (a value it cannot run,
    e.g. a checkpoint's from another server, stays selected and is refused by the schema, naming the engine), the
    command as a select of the registered commands. Every knob some engine lacks (``Engine.lacks``) names those
    engines in ``data-engine-lacks``: static/seedbed/engine_fields.js hides it under them; without the script every
    knob is shown, and the schema decides (``training.engines.engine_errors``)."""
    engines, commands, problem = offered_engines()
    choices = [(e, engine_named(e).label) for e in engines]
    if engine and engine not in engines:
        choices.append((engine, f"{engine} (not available on this server)"))
    fields["engine"].widget = forms.Select(choices=choices, attrs={"data-engine-select": "true"})
    fields["engine"].help_text = (f"Which trainer runs it; this server runs {', '.join(engines)}. A knob the engine "
                                  "does not have is refused, naming the engine.")
    names = list(commands)
    if command and command not in commands:
        names.append(command)
    fields["command"].widget = forms.Select(choices=[("", "–")] + [(n, n) for n in names])
    fields["command"].help_text = (problem or "For engine command: " + (
        "; ".join(f"{n}: {c['help']}" if c["help"] else n for n, c in commands.items())
        if commands else "no command is registered on this server") + ".")
    for name, lacking in engine_knobs_lacked().items():
        if name in fields:
            fields[name].widget.attrs["data-engine-lacks"] = " ".join(lacking)


def project_field(user) -> forms.ModelChoiceField:
    """Where the new work goes: a project where the user may launch, their personal project first."""
    choices = projects_where(user, Role.MEMBER).distinct()
    personal = choices.filter(personal_for=user).first()
    return forms.ModelChoiceField(queryset=choices, to_field_name="name", empty_label=None, required=False,
                                  initial=personal.name if personal else None,
                                  help_text="Its members see it; members and admins may stop it.")


def preset_values(preset: str) -> dict:
    """Every knob's value under ``preset`` (preset over the schema's defaults), as the form shows it."""
    base = TrainConfig().to_dict()
    base.update(PRESETS.get(preset, {}))
    base["preset"] = preset
    return base


def to_form_text(kind: str, value) -> str | bool:
    if kind == "bool":
        return bool(value)
    if kind == "json":
        return json.dumps(value)
    return "" if value is None else str(value)


class RunForm(forms.Form):
    name = forms.CharField(required=False, max_length=200, help_text="Optional label.")
    rendered_preset = forms.CharField(widget=forms.HiddenInput, required=False)
    # asked (and shown) only for a config far beyond the workers (webapp.runs.launch_estimate)
    queue = forms.ChoiceField(choices=queue_choices, required=False, initial="",
                              help_text="Where it runs: a Celery queue's workers (cpu, gpu) or a registered Slurm "
                                        "queue's cluster; by default the one its device needs.")
    launch_anyway = forms.BooleanField(required=False, label="launch anyway",
                                       help_text="This config is far beyond what the workers do (above); tick to "
                                                 "launch it all the same.")

    def __init__(self, *args, preset: str = "grpo", initial_config: dict | None = None, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        if user is not None:
            self.fields["project"] = project_field(user)
            self.order_fields(["name", "project"])
        self.specs = {s["name"]: s for s in field_specs()}
        values = preset_values(preset if preset in PRESETS else "grpo")
        if initial_config:
            values.update(initial_config)
        self.fields["rendered_preset"].initial = values["preset"]
        self.shown_values = values  # the knobs' values an unbound form shows (memory_estimate)
        order = list(PRIMARY_KNOBS) + [n for n in self.specs if n not in PRIMARY_KNOBS]
        for name in order:
            spec = self.specs[name]
            self.fields[name] = self._field_for(spec)
            self.fields[name].initial = to_form_text(spec["kind"], values.get(name))
        # what each verifier parameter chooses (e.g. math's mode), under the reward spec it is written in
        self.fields["rewards"].help_text += f" Verifier parameters: {verifier_params_help()}."
        shown = self.data if self.is_bound else values  # what the page shows: the submitted values, once submitted
        engine_fields(self.fields, engine=str(shown.get("engine") or ""), command=str(shown.get("command") or ""))
        if user is not None:  # the model library's folders, suggested (any folder in the allowed ones is accepted)
            from webapp.library.selectors import model_paths_for

            self.fields["model_path"].widget = DatalistInput(model_paths_for(user=user))
            from webapp.datasets.selectors import dataset_entries  # the user's datasets, as task names

            self.fields["task"].widget = DatalistInput(
                [e.task for e in dataset_entries(user=user)] + list(self.specs["task"]["suggestions"]))
        self.config: TrainConfig | None = None  # parsed once, here; the services take it as it is
        self.needs_confirm = False  # the config is far beyond the workers: launch_anyway is asked

    @staticmethod
    def _field_for(spec: dict) -> forms.Field:
        label = spec["name"]
        help_text = spec["help"] + (f" Range: {spec['range']}." if spec["range"] else "")
        kind = spec["kind"]
        if kind == "choice":
            choices = [(c, c) for c in spec["choices"]]
            # A ChoiceField would reject an unknown value with Django's message; let the schema name it.
            return forms.CharField(label=label, help_text=help_text, required=False,
                                   widget=forms.Select(choices=choices))
        if kind == "bool":
            return forms.BooleanField(label=label, help_text=help_text, required=False)
        if kind == "json":
            return forms.CharField(label=label, help_text=help_text, required=False,
                                   widget=forms.Textarea(attrs={"rows": 2}))
        if spec.get("suggestions"):
            return forms.CharField(label=label, help_text=help_text, required=False, strip=True,
                                   widget=DatalistInput(spec["suggestions"]))
        attrs = {"inputmode": "decimal"} if kind in ("int", "float") else {}
        return forms.CharField(label=label, help_text=help_text, required=False, strip=True,
                               widget=forms.TextInput(attrs=attrs))

    def knob_names(self) -> list[str]:
        return [n for n in self.fields if n in self.specs]

    def submitted_config(self, values: dict | None = None) -> dict:
        """The knobs the user set: those differing from the preset the form was rendered with (``values``: the
        fields' cleaned values, ``cleaned_data`` unless given)."""
        values = self.cleaned_data if values is None else values
        rendered = preset_values(values.get("rendered_preset") or "grpo")
        config = {}
        for name in self.knob_names():
            kind = self.specs[name]["kind"]
            if kind != "bool" and name not in self.data:
                continue  # not submitted at all (an unchecked checkbox is absent too, and means false)
            value = values.get(name)
            if name != "preset" and value == to_form_text(kind, rendered.get(name)):
                continue
            config[name] = value
        return config

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        try:
            cfg = parse_config(self.submitted_config(), user=self.user, project=cleaned.get("project"),
                               queue=cleaned.get("queue") or "")
        except FieldErrors as exc:
            self.add_config_errors(exc)
            return cleaned
        self.config = cfg
        beyond = self.launch_estimate().beyond()
        self.needs_confirm = bool(beyond)
        if beyond and not cleaned.get("launch_anyway"):
            self.add_error("launch_anyway", f"{beyond}; launch anyway?")
        return cleaned

    def add_config_errors(self, exc: FieldErrors) -> None:
        """Attach per-field errors to the fields they name (the form's own errors when no field matches)."""
        for name, message in exc.errors.items():
            self.add_error(name if name in self.fields else None, message)

    def shown_config(self) -> TrainConfig | None:
        """The config the fields show (the parsed one once cleaned, else the values as they stand, checked by the
        schema alone: no worker caps, no dry run), for the estimates; None when they are not a valid config or
        name a model folder the user may not read."""
        if self.config is not None:
            return self.config
        if self.is_bound:
            values = {}
            for name in ["rendered_preset", *self.knob_names()]:
                try:
                    values[name] = self.fields[name].clean(self[name].data)
                except forms.ValidationError:
                    return None
            knobs = self.submitted_config(values)
        else:
            knobs = {n: v for n, v in self.shown_values.items() if n in self.specs}
        from django.conf import settings

        from webapp.projects.paths import config_path_error

        model_path = knobs.get("model_path")
        if isinstance(model_path, str) and config_path_error(user=self.user, path=model_path):
            return None
        try:
            return TrainConfig.from_dict(knobs, check_paths=False, roots=settings.SEEDBED_DATA_ROOTS)
        except FieldErrors:
            return None

    def launch_estimate(self):
        """The shown config's memory and time estimates (webapp.runs.launch_estimate); None without a valid
        config. Computed once."""
        if not hasattr(self, "_launch_estimate"):
            from webapp.runs import launch_estimate

            cfg = self.shown_config()
            self._launch_estimate = None if cfg is None else launch_estimate.estimate(cfg, viewer=self.user)
        return self._launch_estimate

    def memory_estimate(self) -> str:
        """The estimated peak memory of a training process of the shown config (training.memory), for the page;
        "" when the model's shape is unknown or the values are not a valid config."""
        estimate = self.launch_estimate()
        return estimate.memory if estimate else ""

    def knob_groups(self):
        """Bound fields split for display: the primary knobs, then the advanced ones."""
        names = self.knob_names()
        return ([self[n] for n in names if n in PRIMARY_KNOBS], [self[n] for n in names if n not in PRIMARY_KNOBS])


def preset_form_values() -> dict:
    """Each preset's knob values as form text, for the page's preset switcher."""
    specs = {s["name"]: s for s in field_specs()}
    return {p: {n: to_form_text(specs[n]["kind"], v) for n, v in preset_values(p).items() if n in specs}
            for p in PRESETS}
