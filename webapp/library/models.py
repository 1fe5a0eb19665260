"""What staff register for runs to name (docs/architecture.md#projects-and-trust: a config names, it never points). Judge endpoints first:
a run's reward spec says ``{"name": "judge", "params": {"endpoint": "<name>"}}``; the URL and the secret's
name are kept here, edited in the admin by staff only."""
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models


class JudgeEndpoint(models.Model):
    name = models.CharField(max_length=100, unique=True, validators=[RegexValidator(r"^[\w.-]+$")],
                            help_text="What a reward spec names: letters, digits, '.', '_' and '-'.")
    base_url = models.CharField(max_length=500, blank=True,
                                validators=[RegexValidator(r"^https?://[^/\s]+", "an http:// or https:// URL")],
                                help_text="An OpenAI-compatible server, e.g. http://judge:8000/v1 (or a local model).")
    model = models.CharField(max_length=200, default="judge", help_text="The model name the server is asked for.")
    local_model_path = models.CharField(max_length=1000, blank=True,
                                        help_text="Instead of a server: a model folder on the workers.")
    secret = models.CharField(max_length=100, blank=True, validators=[RegexValidator(r"^[A-Za-z0-9_]*$")],
                              help_text="The name of the secret holding the key: the workers read "
                                        "$SEEDBED_SECRET_<NAME>. Empty: no key is sent.")
    # A judge costs its owner money or GPU time: staff may open one to some projects only (a field error on
    # ``rewards`` elsewhere, checked at launch and again when a worker starts the run, selectors.judge_problem).
    projects = models.ManyToManyField("projects.Project", blank=True, related_name="judge_endpoints",
                                      help_text="The projects whose runs may name it. None: every project.")

    class Meta:
        ordering = ["name"]

    def clean(self) -> None:
        if bool(self.base_url) == bool(self.local_model_path):
            raise ValidationError("give exactly one of a server URL or a local model folder")

    def __str__(self) -> str:
        return f"judge {self.name}"


class ModelStatus(models.TextChoices):
    IMPORTING = "importing"
    READY = "ready"
    FAILED = "failed"


class ModelEntry(models.Model):
    """A model a project's runs can start from: a Hugging Face folder registered as it is, or a GGUF file
    imported into a safetensors folder under $SEEDBED_HOME/models/ (training.models)."""

    Status = ModelStatus

    project = models.ForeignKey("projects.Project", related_name="models", on_delete=models.PROTECT)
    name = models.CharField(max_length=100, validators=[RegexValidator(r"^[\w.-]+$")],
                            help_text="Letters, digits, '.', '_' and '-'; unique in its project.")
    path = models.CharField(max_length=1000, help_text="The model folder (what a run config's model_path names).")
    source = models.CharField(max_length=1000, blank=True, help_text="The GGUF file it was imported from, if any.")
    status = models.CharField(max_length=20, choices=ModelStatus.choices, default=ModelStatus.READY)
    error = models.TextField(blank=True)
    description = models.JSONField(default=dict, blank=True,
                                   help_text="training.models.describe_model: architecture, parameters, tokenizer...")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="model_entry_unique_project_name")]

    def __str__(self) -> str:
        return f"model {self.project}/{self.name}"


class TrialStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


TRIAL_ACTIVE = (TrialStatus.QUEUED, TrialStatus.RUNNING)


class ModelTrial(models.Model):
    """One "try it" generation on the models page: a prompt, the sampling settings, and the reply a worker
    wrote. A library entry's trial belongs to the entry's project; a built-in model's, to the project of the
    user who asked (their personal project). Only services change ``status`` (library.services)."""

    Status = TrialStatus

    project = models.ForeignKey("projects.Project", related_name="model_trials", on_delete=models.CASCADE)
    entry = models.ForeignKey(ModelEntry, null=True, blank=True, related_name="trials", on_delete=models.CASCADE,
                              help_text="The library entry tried; empty for a built-in model.")
    builtin = models.CharField(max_length=20, blank=True, help_text="The built-in model tried (tiny, smollm2).")
    model_path = models.CharField(max_length=1000, help_text="The folder the worker loads (the entry's or the "
                                                             "built-in's, never typed by a user).")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="model_trials")
    prompt = models.TextField()
    max_new_tokens = models.PositiveSmallIntegerField()
    temperature = models.FloatField(help_text="0: greedy.")
    chat = models.BooleanField(default=True, help_text="Render the prompt with the model's chat template, if it "
                                                       "has one.")
    status = models.CharField(max_length=10, choices=TrialStatus.choices, default=TrialStatus.QUEUED)
    rendered = models.TextField(blank=True, help_text="The prompt as the model was given it.")
    chat_used = models.BooleanField(default=False, help_text="Whether the chat template rendered the prompt.")
    reply = models.TextField(blank=True)
    stop_reason = models.CharField(max_length=20, blank=True, help_text="eos, max_new_tokens or context.")
    error = models.TextField(blank=True)
    tokens = models.PositiveIntegerField(null=True, blank=True, help_text="Tokens generated (the EOS counted).")
    seconds = models.FloatField(null=True, blank=True, help_text="Loading the model and generating.")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # A trial costs a worker slot: one at a time per user, decided by the database (two requests at once
            # cannot both pass the service's check).
            models.UniqueConstraint(fields=["created_by"], condition=models.Q(status__in=TRIAL_ACTIVE),
                                    name="model_trial_one_active_per_user"),
            models.CheckConstraint(condition=models.Q(entry__isnull=False) | ~models.Q(builtin=""),
                                   name="model_trial_entry_or_builtin"),
        ]

    @property
    def is_ended(self) -> bool:
        return self.status not in TRIAL_ACTIVE

    def __str__(self) -> str:
        return f"trial {self.pk} of {self.entry or self.builtin}"
