"""Sweeps (docs/architecture.md#a-sweeps-decisions): one config (or a small grid) x N seeds, its launch plan, every policy decision,
RL-health alerts. Runs (``webapp.runs``) point at their sweep; only ``webapp.sweeps.services`` writes here.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models

from webapp.runs.models import ENDED_STATUSES, Run


class Sweep(models.Model):
    """One config x N seeds, with a concurrency limit and an early-stopping policy."""

    name = models.CharField(max_length=200)
    project = models.ForeignKey("projects.Project", related_name="sweeps", on_delete=models.PROTECT)
    config = models.JSONField(help_text="The validated TrainConfig.to_dict() shared by every seed.")
    seeds = models.JSONField(default=list, help_text="The seeds launched, in order.")
    concurrency = models.PositiveIntegerField(default=2, help_text="How many of its runs may hold a slot at once.")
    pack = models.PositiveSmallIntegerField(default=1, help_text="How many of its seeds may train in one process, "
                                            "packed (docs/architecture.md#packed-seeds); 1: each its own.")
    policy = models.JSONField(default=dict, blank=True,
                              help_text='Early-stopping policy config, e.g. {"name": "median", "metric": ...}; '
                                        "empty = manual (kill buttons only).")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    # Lineage: a sweep launched from another sweep's config, seeds, grid and policy ("Re-run with changes").
    copied_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="copies",
                                    help_text="The sweep whose settings this sweep's form was filled with.")
    # Stopped: the whole sweep ended by a user (or the system): its live runs killed, nothing more started.
    stopped_at = models.DateTimeField(null=True, blank=True,
                                      help_text="When the sweep was stopped (empty: it runs). Only "
                                                "webapp.sweeps.halting.sweep_stop sets it.")
    stopped_by = models.CharField(max_length=200, blank=True,
                                  help_text='Who stopped it: "user:<name>" or "system".')
    stop_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"sweep {self.pk}: {self.name}"

    @property
    def is_stopped(self) -> bool:
        return self.stopped_at is not None

    @property
    def is_ended(self) -> bool:
        """Every run of it has ended (the page's "ended"): nothing is left to kill or stop. A freed slot starts a
        new seed in the same transaction as the end of the run that freed it, so a sweep that still may start one
        has a queued run, and has not ended."""
        return not self.runs.exclude(status__in=ENDED_STATUSES).exists()


class FreeSlotUse(models.TextChoices):
    """What a slot freed by a stop is used for once the sweep has no queued seed left."""

    NOTHING = "nothing", "nothing (the sweep just finishes sooner)"
    EXTEND = "extend", "extend the best surviving run"
    NEW_SEED = "new_seed", "start new seeds within the budget"


class SweepPlan(models.Model):
    """How a sweep was laid out and how it redirects compute. One per sweep launched from the sweep form."""

    sweep = models.OneToOneField(Sweep, primary_key=True, related_name="plan", on_delete=models.CASCADE)
    grid = models.JSONField(default=dict, blank=True,
                            help_text='Knob -> values crossed with the seeds, e.g. {"lr": [0.0001, 0.0002]}.')
    free_slot_use = models.CharField(max_length=20, choices=FreeSlotUse.choices, default=FreeSlotUse.NOTHING)
    extend_steps = models.PositiveIntegerField(default=0, help_text="Steps an extended survivor gets.")
    budget = models.PositiveIntegerField(null=True, blank=True,
                                         help_text="Compute budget in full runs when freed slots start new seeds: a "
                                                   "new seed starts only if it can run to its end within it "
                                                   "(policies.budget). Empty for the other free-slot uses.")
    new_seeds_started = models.PositiveIntegerField(default=0)
    new_seeds_halted = models.TextField(blank=True,
                                        help_text="Why freed slots start no more new seeds (empty: they may): "
                                                  "new seeds in a row that failed before their first step "
                                                  "(webapp.sweeps.halting).")
    warnings = models.JSONField(default=list, blank=True,
                                help_text="What the sweep's settings make impossible, said when it was made (e.g. a "
                                          "policy that can never stop a run: policies.feasibility).")
    alert_bounds = models.JSONField(default=dict, blank=True,
                                    help_text="Overrides of webapp.sweeps.alerts.AlertBounds, by field name.")
    policy_checked_at = models.DateTimeField(null=True, blank=True,
                                             help_text="When a process last claimed the policy check (throttle).")
    policy_check_s = models.FloatField(default=0.0,
                                       help_text="Seconds the last check's replay took: the next check waits at "
                                                 "least policy_check.PACE times as long (services.claim_policy_check).")
    policy_held = models.JSONField(default=dict, blank=True,
                                   help_text="Run id -> why the last check kept it though its rule would stop it (a "
                                             "budget no new seed could use its steps under: PolicyCheck.held).")

    def __str__(self) -> str:
        return f"plan of sweep {self.sweep_id}"


class HistoryRiskFit(models.Model):
    """A ``bayes`` policy's risk level learned from its project's finished sweeps (``policies.history_risk``),
    kept so that every check, in any process, reads the one fit and none computes it twice
    (``webapp.sweeps.risk_fits``)."""

    project = models.ForeignKey("projects.Project", related_name="risk_fits", on_delete=models.CASCADE)
    key = models.CharField(max_length=64, help_text="SHA-256 of the metric, the policy keys a replay depends on and "
                                                    "the finished sweeps' ids (risk_fits.fit_key).")
    sweeps = models.PositiveIntegerField(help_text="Complete finished sweeps replayed (0: fewer than "
                                                   "history_risk.MIN_SWEEPS, the built-in risk map decides).")
    risk = models.FloatField(help_text="The promised risk the levels were walked up to.")
    lost = models.JSONField(default=list, blank=True,
                            help_text="[[model loss level, sweeps whose every near-best seed its replay stopped, "
                                      "share of their steps it saved]].")
    cuts = models.JSONField(default=list, blank=True,
                            help_text="[[at, keep, sweeps lost, share saved]] of each one-shot cut replayed on the "
                                      "same sweeps (what auto chooses among).")
    seconds = models.FloatField(default=0.0, help_text="What the replays took.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "key"], name="one_risk_fit_per_history")]

    def __str__(self) -> str:
        return f"risk fit {self.key[:8]} of project {self.project_id} ({self.sweeps} sweeps)"


class PolicyDecision(models.Model):
    """One decision of the sweep's policy with the numbers it used, and what was done about it.

    A run gets at most one decision per action (the unique constraint makes a decision happen once even
    when two processes apply the policy at the same moment).
    """

    class Outcome(models.TextChoices):
        APPLIED = "applied"
        SKIPPED = "skipped"

    sweep = models.ForeignKey(Sweep, related_name="decisions", on_delete=models.CASCADE)
    run = models.ForeignKey(Run, related_name="policy_decisions", on_delete=models.CASCADE)
    action = models.CharField(max_length=20, help_text="stop or extend")
    rule = models.CharField(max_length=40)
    step = models.IntegerField()
    value = models.FloatField(help_text="The run's smoothed metric that was compared.")
    threshold = models.FloatField(help_text="What it was compared with (peer median, rung cut-off, bound, best).")
    n_peers = models.IntegerField(default=0)
    extra_steps = models.IntegerField(default=0)
    details = models.JSONField(default=dict, blank=True,
                               help_text="Further numbers the rule used (bayes: probability, forecast, its 95 % "
                                         "interval, the peers' forecasts).")
    reason = models.TextField()
    outcome = models.CharField(max_length=20, choices=Outcome.choices, default=Outcome.APPLIED)
    note = models.TextField(blank=True, help_text="Why it was skipped, or what followed (the seed that took the slot).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["run", "action"], name="decision_once_per_run_action")]

    def __str__(self) -> str:
        return f"{self.rule} {self.action} run {self.run_id} at step {self.step}"


class AlertKind(models.TextChoices):
    ENTROPY_COLLAPSE = "entropy_collapse", "entropy collapse"
    LENGTH_AT_CAP = "length_at_cap", "length at the cap"
    ZERO_STD_CLIMBING = "zero_std_climbing", "zero-variance groups climbing"
    STALLED = "stalled", "stalled (no step for far longer than its steps take)"


class Alert(models.Model):
    """An RL-health warning about one run, raised once per run and kind (alerts only inform; they kill nothing)."""

    sweep = models.ForeignKey(Sweep, related_name="alerts", on_delete=models.CASCADE)
    run = models.ForeignKey(Run, related_name="alerts", on_delete=models.CASCADE)
    kind = models.CharField(max_length=30, choices=AlertKind.choices)
    metric = models.CharField(max_length=100)
    step = models.IntegerField()
    value = models.FloatField()
    bound = models.FloatField()
    message = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["run", "kind"], name="alert_once_per_run_kind")]

    def __str__(self) -> str:
        return f"{self.kind} run {self.run_id} at step {self.step}"
