"""Evaluation jobs: base model and checkpoints sampled n times per held-out problem (docs/architecture.md#dashboards).

Results are stored per (model, problem) as (n, c) plus a few completions with their verdicts, so pass@k for
any k <= n can be recomputed later (training.passk). Only ``services.py`` changes a job's status.
"""
from __future__ import annotations

import logging

from django.conf import settings
from django.db import models

from webapp.jobs import JobKind


class EvalStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    LOST = "lost"


EVAL_ENDED = frozenset({EvalStatus.SUCCEEDED, EvalStatus.FAILED, EvalStatus.CANCELLED, EvalStatus.LOST})

# from-status -> statuses a service may move a job to; anything else is refused loudly.
EVAL_TRANSITIONS: dict[str, frozenset[str]] = {
    EvalStatus.QUEUED: frozenset({EvalStatus.RUNNING, EvalStatus.CANCELLED, EvalStatus.FAILED}),
    # running -> running: a re-delivered task takes over a job whose worker stopped heartbeating
    EvalStatus.RUNNING: frozenset({EvalStatus.RUNNING, EvalStatus.SUCCEEDED, EvalStatus.FAILED,
                                   EvalStatus.CANCELLED, EvalStatus.LOST}),
    # a lost job is taken over by its re-delivered task, resumed by a user (back to the queue), or closed
    EvalStatus.LOST: frozenset({EvalStatus.RUNNING, EvalStatus.QUEUED, EvalStatus.CANCELLED, EvalStatus.FAILED}),
    EvalStatus.SUCCEEDED: frozenset(),
    EvalStatus.FAILED: frozenset(),
    EvalStatus.CANCELLED: frozenset(),
}


class EvalJob(models.Model):
    """One evaluation: a set of models x one held-out dataset x n samples per problem."""

    Status = EvalStatus

    name = models.CharField(max_length=200, blank=True)
    project = models.ForeignKey("projects.Project", related_name="eval_jobs", on_delete=models.PROTECT,
                                help_text="Its origin's (the run's or the sweep's) project.")
    run = models.ForeignKey("runs.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="eval_jobs",
                            help_text="The run whose page it was started from.")
    sweep = models.ForeignKey("sweeps.Sweep", null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="eval_jobs", help_text="The sweep whose page it was started from.")

    task = models.CharField(max_length=250, help_text="Built-in task (its held-out set), 'file' or dataset:<name>.")
    data_path = models.CharField(max_length=1000, blank=True)
    prompt_field = models.CharField(max_length=100, default="prompt")
    data_options = models.JSONField(default=dict, blank=True,
                                    help_text="A library dataset's mapping and split (data_fields, held_out_fraction, "
                                              "split_seed).")
    answer_field = models.CharField(max_length=100, default="answer")
    problems = models.PositiveIntegerField(help_text="Held-out problems evaluated (a file: its first N).")
    n = models.PositiveIntegerField(help_text="Samples per problem.")
    ks = models.JSONField(default=list, help_text="The k values reported (each <= n).")
    temperature = models.FloatField(default=1.0)
    top_p = models.FloatField(default=1.0)
    max_new_tokens = models.PositiveIntegerField(default=8)
    rewards = models.JSONField(default=list, help_text="Reward spec; a sample is correct when every verifier "
                                                       "gives it its full score.")
    seed = models.BigIntegerField(default=0)
    keep_completions = models.PositiveIntegerField(default=4, help_text="Completions kept per (model, problem).")
    prompt_template = models.JSONField(default=dict, blank=True,
                                       help_text="How questions become prompts (training.prompts): the origin "
                                                 "config's chat_template, system_prompt, answer_instruction.")

    queue = models.CharField(max_length=20, default="cpu")
    status = models.CharField(max_length=20, choices=EvalStatus.choices, default=EvalStatus.QUEUED, db_index=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True,
                                         help_text="When the broker took its task (empty: the reconciler sends it "
                                                   "again).")
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    done_units = models.PositiveIntegerField(default=0, help_text="(model, problem) pairs evaluated so far.")
    total_units = models.PositiveIntegerField(default=0, help_text="models x problems.")
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"eval {self.pk} ({self.status})"

    @property
    def is_ended(self) -> bool:
        return self.status in EVAL_ENDED

    @property
    def display_name(self) -> str:
        return self.name or f"eval {self.pk}"

    @property
    def progress(self) -> float:
        return self.done_units / self.total_units if self.total_units else 0.0


# What the job core (webapp.jobs) needs to claim, heartbeat, recover and resend evaluations: their states.
EVAL_JOB = JobKind(name="eval", model=EvalJob, transitions=EVAL_TRANSITIONS, ended=EVAL_ENDED,
                   stop_field="cancel_requested_at", recover="webapp.evals.services.eval_jobs_recover",
                   log=logging.getLogger("seedbed.evals"))


class EvalModel(models.Model):
    """One model of a job: the base model or a checkpoint, by folder path (kept even if the row goes)."""

    job = models.ForeignKey(EvalJob, related_name="models", on_delete=models.CASCADE)
    position = models.PositiveIntegerField()
    label = models.CharField(max_length=200)
    path = models.CharField(max_length=1000)
    is_base = models.BooleanField(default=False)
    checkpoint = models.ForeignKey("runs.Checkpoint", null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    run = models.ForeignKey("runs.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    step = models.IntegerField(null=True, blank=True)
    seconds = models.FloatField(default=0.0, help_text="Wall time spent sampling and verifying this model.")

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["job", "position"], name="evalmodel_unique_job_position")]

    def __str__(self) -> str:
        return self.label


class EvalResult(models.Model):
    """(n, c) of one model on one problem, with a few of its completions and their verdicts."""

    model = models.ForeignKey(EvalModel, related_name="results", on_delete=models.CASCADE)
    index = models.PositiveIntegerField(help_text="Problem index within the job's dataset.")
    prompt = models.TextField()
    answer = models.TextField(blank=True)
    n = models.PositiveIntegerField()
    c = models.PositiveIntegerField()
    samples = models.JSONField(default=list, help_text='[{"completion", "correct", "details"}, ...]')

    class Meta:
        ordering = ["index"]
        constraints = [
            models.UniqueConstraint(fields=["model", "index"], name="evalresult_unique_model_index"),
            models.CheckConstraint(condition=models.Q(c__lte=models.F("n")), name="evalresult_c_le_n"),
        ]
