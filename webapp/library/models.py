"""What staff register for runs to name (DESIGN §9: a config names, it never points). Judge endpoints first:
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
