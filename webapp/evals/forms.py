"""The "Evaluate" form. It only collects and parses values; ``services.validate_eval_input`` decides what is
valid and its per-field messages (``FieldErrors.errors``) are attached to the matching fields."""
from __future__ import annotations

import json

from django import forms

from training.config import task_suggestions
from webapp.runs.forms import DatalistInput
from training.passk import MAX_N
from training.verifiers.registry import verifier_params_help

from .services import ModelChoice


class AnyMultipleChoiceField(forms.MultipleChoiceField):
    """Accepts any submitted key: a checkpoint deleted since the page was drawn gets the service's message
    ("checkpoint 12 no longer exists"), not Django's generic "not one of the available choices"."""

    def valid_value(self, value) -> bool:
        return True


class EvalForm(forms.Form):
    name = forms.CharField(required=False, max_length=200, help_text="Optional label for the evaluation.")
    models = AnyMultipleChoiceField(widget=forms.CheckboxSelectMultiple, required=False,
                                    help_text="The base model and the checkpoints to compare.")
    task = forms.CharField(widget=DatalistInput(()), max_length=250,
                           help_text="A built-in or reasoning_gym:<task> held-out set, dataset:<name> (a library "
                                     "dataset's held-out rows) or 'file' for your own held-out data.")
    data_path = forms.CharField(required=False, max_length=1000,
                                help_text="Held-out problems (.jsonl, .parquet or .csv) when task is 'file'.")
    prompt_field = forms.CharField(required=False, initial="prompt")
    answer_field = forms.CharField(required=False, initial="answer")
    problems = forms.IntegerField(initial=100, help_text="Held-out problems (a file: its first N; 0 = all rows).")
    n = forms.IntegerField(initial=64, help_text=f"Samples per problem (1..{MAX_N}).")
    k = forms.CharField(required=False, help_text="k values to report, e.g. 1,8,64 (blank: 1, 2, 4, … n). "
                                                  "The chart always shows 1, 2, 4, … n.")
    temperature = forms.FloatField(initial=1.0)
    top_p = forms.FloatField(initial=1.0, help_text="Nucleus sampling mass in (0, 1].")
    max_new_tokens = forms.IntegerField(initial=8)
    rewards = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}),
                              help_text='Verifier spec as in training, e.g. [{"name": "exact", "weight": 1.0}] '
                                        "(blank: the task's own verifier). For pass@k of a base model that "
                                        "was never taught to box its answer: "
                                        '[{"name": "math", "params": {"mode": "lenient"}}] reads the last '
                                        "mathematical expression, as Math-Verify does.")
    seed = forms.IntegerField(initial=0)
    keep_completions = forms.IntegerField(initial=4, help_text="Completions kept per model and problem (shown "
                                                               "when you click a problem).")

    def __init__(self, *args, choices: list[ModelChoice], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["models"].choices = [(c.key, f"{c.label} — {c.path}") for c in choices]
        self.fields["task"].widget.suggestions = list(task_suggestions())
        self.fields["rewards"].help_text += f" Verifier parameters: {verifier_params_help()}."

    def clean_k(self) -> list[int]:
        text = self.cleaned_data.get("k", "").strip()
        if not text:
            return []
        try:
            return [int(part) for part in text.replace(" ", ",").split(",") if part]
        except ValueError:
            raise forms.ValidationError(f"expected comma-separated integers such as 1,8,64; got {text!r}") from None

    def clean_rewards(self) -> list:
        text = self.cleaned_data.get("rewards", "").strip()
        if not text:
            return []
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"not valid JSON: {exc.msg}") from None
        if not isinstance(value, list):
            raise forms.ValidationError("expected a JSON list of {\"name\": ..., \"weight\": ...}")
        return value

    def service_inputs(self) -> dict:
        """The cleaned values as ``services.eval_create`` keywords."""
        d = self.cleaned_data
        return {"models": d["models"], "name": d["name"], "task": d["task"], "data_path": d["data_path"].strip(),
                "prompt_field": d["prompt_field"].strip(), "answer_field": d["answer_field"].strip(),
                "problems": d["problems"], "n": d["n"], "ks": d["k"], "temperature": d["temperature"],
                "top_p": d["top_p"], "max_new_tokens": d["max_new_tokens"], "rewards": d["rewards"],
                "seed": d["seed"], "keep_completions": d["keep_completions"]}


def initial_from_config(config: dict, choices: list[ModelChoice]) -> dict:
    """Defaults taken from the run's (or sweep's) config: its task, data, verifier and sampling settings;
    ticked: the base model and each run's last checkpoint."""
    last: dict[int, ModelChoice] = {}
    for c in choices:
        if c.run_id is not None and (c.run_id not in last or c.step > last[c.run_id].step):
            last[c.run_id] = c
    task = config.get("task", "arithmetic")
    return {"task": task,  # a library dataset: named, so the job reads its held-out rows
            "data_path": "" if task.startswith("dataset:") else config.get("data_path", ""),
            "prompt_field": config.get("prompt_field", "prompt"), "answer_field": config.get("answer_field", "answer"),
            "temperature": config.get("temperature", 1.0), "top_p": config.get("top_p", 1.0),
            "max_new_tokens": config.get("max_new_tokens", 8),
            "rewards": json.dumps(config["rewards"]) if config.get("rewards") else "",
            "models": [c.key for c in choices if c.run_id is None or last[c.run_id] is c]}
