"""A project's datasets: a file of rows (uploaded, or registered from a folder on the server) and how its
columns map to what Seedbed reads (the prompt, the reference answer, the fields verifiers need), with the
train/held-out split. A config names one as ``task: dataset:<name>``; the web app resolves it to the file and
the mapping when the run is submitted, so the run's config records exactly what it trained on."""
from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models


class DatasetEntry(models.Model):
    class Source(models.TextChoices):
        UPLOAD = "upload"
        PATH = "path"

    project = models.ForeignKey("projects.Project", related_name="datasets", on_delete=models.PROTECT)
    name = models.CharField(max_length=100, validators=[RegexValidator(r"^[\w.-]+$")],
                            help_text="What a config names (dataset:<name>); unique in its project.")
    path = models.CharField(max_length=1000, help_text="The data file (.jsonl, .parquet or .csv).")
    source = models.CharField(max_length=10, choices=Source.choices)
    original_name = models.CharField(max_length=255, blank=True, help_text="The uploaded file's own name.")
    size_bytes = models.BigIntegerField(default=0)
    rows = models.IntegerField(default=0)
    columns = models.JSONField(default=list, blank=True)
    preview = models.JSONField(default=list, blank=True, help_text="The first rows, values shortened.")
    prompt_field = models.CharField(max_length=200, default="prompt")
    answer_field = models.CharField(max_length=200, default="answer", blank=True)
    fields = models.JSONField(default=dict, blank=True,
                              help_text="Other columns under the names verifiers read (training.data.MAPPED_FIELDS).")
    held_out_fraction = models.FloatField(default=0.1, validators=[MinValueValidator(0.0), MaxValueValidator(0.5)])
    split_seed = models.BigIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="dataset_entry_unique_project_name")]

    def __str__(self) -> str:
        return f"dataset {self.project}/{self.name}"

    @property
    def task(self) -> str:
        return f"dataset:{self.name}"

    def config_values(self) -> dict:
        """What ``task: dataset:<name>`` stands for in a run's config."""
        return {"data_path": self.path, "prompt_field": self.prompt_field, "answer_field": self.answer_field,
                "data_fields": dict(self.fields), "held_out_fraction": self.held_out_fraction,
                "split_seed": self.split_seed}
