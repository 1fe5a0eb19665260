"""Runs and what training leaves behind (docs/architecture.md#a-runs-life). A run may belong to a sweep (webapp.sweeps): that
foreign key is all this app knows of sweeps.

Only ``services`` changes a status; it checks the current one first (see ``LEGAL_TRANSITIONS``, moved by the job
core, webapp.jobs, as ``RUN_JOB`` declares).
"""
from __future__ import annotations

import logging
import uuid

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from webapp.jobs import JobKind


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    KILLED = "killed"
    LOST = "lost"


class FailureKind(models.TextChoices):
    """Why a failed or lost run ended so, set where the failure is seen (``Run.failure_kind``)."""

    ERROR = "error", "its own error"
    DISK_FULL = "disk_full", "the disk was full"  # the training child's EXIT_DISK_FULL (workers.runner)
    SIGNAL = "signal", "a signal killed its process or a rank"  # past its automatic restarts
    LOST_WORKER = "lost_worker", "its worker was lost"  # past its automatic restarts
    BUDGET = "budget", "it went past its disk budget"


ENDED_STATUSES = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.KILLED, RunStatus.LOST})

# from-status -> statuses a service may move a run to. Anything else is refused loudly.
LEGAL_TRANSITIONS: dict[str, frozenset[str]] = {
    RunStatus.QUEUED: frozenset({RunStatus.RUNNING, RunStatus.KILLED, RunStatus.FAILED}),
    # running -> running: a redelivered task takes over; running -> queued: its worker shut down, it was
    # checkpointed and goes back to the queue to resume on the next worker.
    RunStatus.RUNNING: frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.KILLED, RunStatus.LOST,
                                  RunStatus.RUNNING, RunStatus.QUEUED}),
    # A lost run can be taken over by its redelivered task, resumed by a user, or closed.
    RunStatus.LOST: frozenset({RunStatus.RUNNING, RunStatus.QUEUED, RunStatus.KILLED, RunStatus.FAILED}),
    # A killed run can be resumed from its last checkpoint (back to the queue).
    RunStatus.KILLED: frozenset({RunStatus.QUEUED}),
    RunStatus.SUCCEEDED: frozenset(),
    # A failed run can be resumed from its last checkpoint (after its cause was fixed).
    RunStatus.FAILED: frozenset({RunStatus.QUEUED}),
}
# What a user may resume (running -> queued is the worker's own move when it shuts down, not a user's).
RESUMABLE_STATUSES = frozenset({RunStatus.KILLED, RunStatus.LOST, RunStatus.FAILED})


class Run(models.Model):
    """One seed of one config, from the queue to its end."""

    Status = RunStatus

    name = models.CharField(max_length=200, blank=True)
    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False,
                           help_text="Names the run's folder ($SEEDBED_HOME/runs/<uid>): unlike the id, never reused "
                                     "by another database on the same $SEEDBED_HOME.")
    project = models.ForeignKey("projects.Project", related_name="runs", on_delete=models.PROTECT,
                                help_text="Who may see and act on it (a sweep's runs are in the sweep's project).")
    sweep = models.ForeignKey("sweeps.Sweep", null=True, blank=True, related_name="runs", on_delete=models.CASCADE)
    config = models.JSONField(help_text="The validated TrainConfig.to_dict().")
    seed = models.BigIntegerField()
    queue = models.CharField(max_length=20, default="cpu", help_text="Its queue: cpu or gpu (Celery slot kinds, "
                                                                     "derived from the device), or a registered "
                                                                     "Queue's name.")
    status = models.CharField(max_length=20, choices=RunStatus.choices, default=RunStatus.QUEUED, db_index=True)

    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    enqueued_at = models.DateTimeField(null=True, blank=True, help_text="When its task was sent to the broker.")
    dispatched_at = models.DateTimeField(null=True, blank=True,
                                         help_text="When the broker took its task (empty: not yet: the reconciler "
                                                   "sends it again).")
    dispatch_id = models.CharField(max_length=32, blank=True,
                                   help_text="The id of the last message sent for it (in the worker's log line).")
    dispatch_note = models.CharField(max_length=500, blank=True,
                                     help_text='Why its task is not in the queue yet, e.g. "waiting for the queue".')
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    worker = models.CharField(max_length=200, blank=True, help_text="Worker host and slot running it.")
    pid = models.IntegerField(null=True, blank=True, help_text="Process id of the training child process.")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0, help_text="How many times a worker started it (resumes).")
    restarts = models.PositiveIntegerField(default=0, help_text="Automatic restarts after its worker was lost.")
    pack_leader = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="pack_members",
                                    help_text="The run whose training process trains this one, packed with other "
                                              "seeds of its sweep (docs/architecture.md#packed-seeds); itself for "
                                              "the run that started the process; empty: a process of its own.")
    pack_attempt = models.PositiveIntegerField(default=0, help_text="The leader's attempt whose process it shares "
                                               "(with pack_leader, which process: a leader trains a new group at "
                                               "each attempt).")
    preemptions = models.PositiveIntegerField(default=0, help_text="Times its scheduler took its node back (Slurm's "
                                              "time limit or a preemption) after a checkpoint: resumed, not a failure "
                                              "and not one of its restarts.")
    retry_at = models.DateTimeField(null=True, blank=True,
                                    help_text="A restarted run is sent again from this time on (backoff).")

    last_step = models.IntegerField(default=0, help_text="Last step whose metrics are stored.")
    disk_bytes = models.BigIntegerField(default=0, help_text="What its folder takes on disk (bytes), as its worker "
                                                             "last measured it: the disk budgets' count "
                                                             "(webapp.runs.disk_budget).")
    step_advanced_at = models.DateTimeField(null=True, blank=True,
                                            help_text="When last_step last rose, or when the current attempt was "
                                                      "claimed: the stall rule's clock (webapp.runs.stall).")
    median_step_s = models.FloatField(null=True, blank=True,
                                      help_text="Median of its recent step_time_s points (the mean over the run for "
                                                "an engine that does not time its steps): the stall rule's pace.")
    first_step_at = models.DateTimeField(null=True, blank=True,
                                         help_text="When its first step began (its first metrics, less that step's "
                                                   "time): the origin of wall-time axes, which a wait for a slot "
                                                   "or a model build before it does not stretch.")
    tags = models.JSONField(default=list, blank=True, help_text="Labels the run's members gave it (runs_annotate).")
    notes = models.TextField(blank=True, help_text="Free text its members keep about the run.")
    archived_at = models.DateTimeField(null=True, blank=True,
                                       help_text="Archived: hidden from the runs list (kept, not deleted).")
    warnings = models.JSONField(default=list, blank=True,
                                help_text="Guards against silent waste (training.silent_run): e.g. reward 0 for every "
                                          "sample of the first steps, with the verifier's most common reason.")
    ranks = models.JSONField(default=list, blank=True,
                             help_text="A multi-rank run's ranks as they last reported: rank, host, pid, step, time.")
    engine_config = models.JSONField(default=dict, blank=True,
                                     help_text="The engine's own resolved config as it reported it once started "
                                               "(TRL: its GRPOConfig); empty for the seedbed engine and until then.")
    error = models.TextField(blank=True)
    failure_kind = models.CharField(max_length=16, choices=FailureKind.choices, blank=True, default="",
                                    help_text="Why it failed or was lost (empty otherwise); the error says it in words.")

    slurm_job_id = models.CharField(max_length=20, blank=True,
                                    help_text="Its current attempt's Slurm job (a run of a slurm queue; empty before "
                                              "it is submitted).")
    slurm_state = models.CharField(max_length=30, blank=True,
                                   help_text="That job's state as Slurm last said it (PENDING, RUNNING, TIMEOUT).")
    slurm_reason = models.CharField(max_length=200, blank=True,
                                    help_text="Why it pends (Priority, Resources), or the nodes it runs on.")

    kill_requested_at = models.DateTimeField(null=True, blank=True)
    killed_by = models.CharField(max_length=200, blank=True,
                                 help_text='Who or what killed it: "user:<name>", "policy:<rule>", "system".')
    kill_reason = models.TextField(blank=True)

    # Lineage: a run started from another run's checkpoint.
    parent_run = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children")
    parent_step = models.IntegerField(null=True, blank=True)
    # Lineage: a run launched from another run's config ("Re-run with changes"), its weights its own.
    copied_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="copies",
                                    help_text="The run whose config this run's form was filled with.")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["sweep", "status"])]

    @property
    def packed_with(self) -> list[int]:
        """The other runs its latest attempt shares (or shared) a training process with, packed seeds; [] alone."""
        if self.pack_leader_id is None:
            return []
        return list(Run.objects.filter(pack_leader_id=self.pack_leader_id, pack_attempt=self.pack_attempt)
                    .exclude(pk=self.pk).order_by("pk").values_list("pk", flat=True))

    def __str__(self) -> str:
        return f"run {self.pk} ({self.status})"

    @property
    def is_ended(self) -> bool:
        return self.status in ENDED_STATUSES

    @property
    def folder(self):
        """Where the run's checkpoints, logs and records live."""
        from pathlib import Path

        return Path(settings.SEEDBED_RUNS_DIR) / str(self.uid)

    @property
    def recovery_note(self) -> str:
        """"worker lost, restarting from step N in M s" (or "training process killed by SIGKILL, ...", "rank 1
        killed by SIGKILL, ...") while a run whose worker died, or whose training process or one of its ranks a
        signal killed, waits out its restart's backoff
        (webapp.runs.services.restart_run: its note and retry time); "" otherwise."""
        import math
        import re

        from django.utils import timezone

        found = re.search(r"from step (\d+): (worker lost|(?:training process|rank \d+) killed by \w+)",
                          self.dispatch_note or "")
        if self.status != "queued" or self.retry_at is None or not found:
            return ""
        left = math.ceil((self.retry_at - timezone.now()).total_seconds())
        when = f"in {left} s" if left > 0 else "now"
        return f"{found.group(2)}, restarting from step {found.group(1)} {when}"

    @property
    def stalled_for_s(self) -> float | None:
        """Seconds since the step of this running run last advanced when that is past the stall threshold
        (``webapp.runs.stall``: max(floor, factor x its median step time)); None otherwise."""
        from django.utils import timezone

        from .stall import stalled_for_s

        return stalled_for_s(status=self.status, step_advanced_at=self.step_advanced_at,
                             median_step_s=self.median_step_s, now=timezone.now())

    @property
    def stall_note(self) -> str:
        """"stalled: no step for 4 min 10 s (its median step takes 0.31 s; stalled past 120 s)" for a stalled run,
        "" otherwise (the run page; the list shows the badge)."""
        from django.conf import settings

        from .stall import describe, stall_threshold_s

        idle = self.stalled_for_s
        if idle is None:
            return ""
        limit = stall_threshold_s(self.median_step_s, factor=settings.SEEDBED_STALL_FACTOR,
                                  floor_s=settings.SEEDBED_STALL_FLOOR_S)
        return (f"stalled: no step for {describe(idle)} after step {self.last_step} (its median step takes "
                f"{self.median_step_s:.2f} s; stalled past {limit:.0f} s) while its worker still heartbeats: a hung "
                f"collective, a deadlock or a stopped process")

    @property
    def display_name(self) -> str:
        return self.name or f"run {self.pk}"

    @property
    def last_checkpoint(self):
        """Its newest checkpoint, what a resume continues from (its page asks only of an ended run); None before its
        first: a resume then trains from step 0."""
        if not hasattr(self, "_last_checkpoint"):
            self._last_checkpoint = self.checkpoints.order_by("-step").first()
        return self._last_checkpoint

    @property
    def total_steps(self) -> int:
        return int(self.config.get("total_steps", 0))

    @property
    def engine(self) -> str:
        """Which trainer runs it (``training.engines``); runs made before engines existed are seedbed's."""
        return self.config.get("engine") or "seedbed"

    @property
    def engine_entry(self):
        """The run's engine in the registry (``training.engines.Engine``); None when this server has none of that
        name (a run made elsewhere)."""
        from training.engines import engine_named

        try:
            return engine_named(self.engine)
        except KeyError:
            return None

    @property
    def resumes_on_other_ranks(self) -> bool:
        """Its engine's checkpoints load at any number of ranks (the run page's resume offers other ranks)."""
        return bool(self.engine_entry and self.engine_entry.resumes_on_other_ranks)

    @property
    def rank_rows(self) -> list[dict]:
        """The ranks table of the run page: each rank's host, pid, step and seconds since it last reported."""
        import time

        now = time.time()
        return [{**r, "age_s": None if r.get("time") is None else max(0.0, now - r["time"])}
                for r in self.ranks or [] if isinstance(r, dict)]

    @property
    def engine_label(self) -> str:
        """"trl · 2 processes", "command my_trainer · 1 process", "seedbed", "seedbed · 4 ranks (2 nodes), ddp"."""
        if self.engine_entry is not None and self.engine_entry.nodes:  # ranks over machines, a strategy
            per_node, nodes = int(self.config.get("nproc_per_node") or 1), int(self.config.get("nnodes") or 1)
            if per_node * nodes == 1:
                return self.engine
            where = f" ({nodes} nodes)" if nodes > 1 else ""
            return f"{self.engine} · {per_node * nodes} ranks{where}, {self.config.get('strategy')}"
        n = int(self.config.get("nproc_per_node") or 1)
        name = f"{self.engine} {self.config['command']}" if self.config.get("command") else self.engine
        return f"{name} · {n} process{'' if n == 1 else 'es'}"


# What the job core (webapp.jobs) needs to claim, heartbeat, recover and resend runs: their states.
RUN_JOB = JobKind(name="run", model=Run, transitions=LEGAL_TRANSITIONS, ended=ENDED_STATUSES,
                  stop_field="kill_requested_at", log=logging.getLogger("seedbed.runs"),
                  recover="webapp.runs.services.runs_recover")


class MetricPoint(models.Model):
    """One logged value. ``value`` is null for a non-finite number (NaN/inf): a gap, not a crash."""

    run = models.ForeignKey(Run, related_name="metrics", on_delete=models.CASCADE)
    step = models.IntegerField()
    key = models.CharField(max_length=100)
    value = models.FloatField(null=True)
    logged_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "key", "step"], name="metric_unique_run_key_step")]
        # Reads are "this run, these keys, steps after N": the unique index (run, key, step) serves them;
        # this one serves "everything of this run after step N" (the live endpoint).
        indexes = [models.Index(fields=["run", "step"], name="metric_run_step")]

    def __str__(self) -> str:
        return f"{self.run_id}@{self.step} {self.key}={self.value}"


class MetricRollup(models.Model):
    """One bucket of ``width`` consecutive steps of one run's metric: the pre-aggregated tier the charts and the
    API read instead of the raw points (``webapp.runs.rollups`` keeps it and says why). ``n`` counts the finite
    values, ``total`` is their sum (mean = total / n), ``lo``/``hi`` their extremes, ``first_step``/``last_step``
    the steps they span and ``t_last`` when the last of them was logged (seconds since 1970)."""

    run = models.ForeignKey(Run, related_name="rollups", on_delete=models.CASCADE)
    key = models.CharField(max_length=100)
    width = models.IntegerField()
    bucket = models.IntegerField()
    n = models.IntegerField()
    total = models.FloatField(null=True)      # null, like the others below, when n is 0 (only non-finite values)
    lo = models.FloatField(null=True)
    hi = models.FloatField(null=True)
    first_step = models.IntegerField(null=True)
    last_step = models.IntegerField(null=True)
    t_last = models.FloatField(null=True)     # seconds since 1970: read as a number, not parsed per row

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "width", "key", "bucket"],
                                               name="rollup_unique_run_width_key_bucket")]

    def __str__(self) -> str:
        return f"{self.run_id} {self.key} [{self.width}]#{self.bucket}"


class Sample(models.Model):
    """A sampled completion of one step with its reward and the verifier's details."""

    run = models.ForeignKey(Run, related_name="samples", on_delete=models.CASCADE)
    step = models.IntegerField()
    index = models.PositiveIntegerField(default=0)
    prompt = models.TextField()
    completion = models.TextField()
    answer = models.TextField(blank=True)
    reward = models.FloatField(null=True)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-step", "index"]
        indexes = [models.Index(fields=["run", "step"], name="sample_run_step")]


DEVICE_QUEUES = ("cpu", "gpu")
"""The queues ``services.queue_for`` derives from a device: Celery slot kinds, which need no registered row."""


class QueueKind(models.TextChoices):
    CELERY = "celery", "Celery workers"
    SLURM = "slurm", "Slurm"


class Queue(models.Model):
    """A queue staff register (the admin, ``manage.py queue_register``): runs go to one by name (the run and sweep
    forms, the API and the CLI pick it; without a pick, ``services.queue_for`` derives ``cpu`` or ``gpu`` from the
    device, which need no row). A ``celery`` queue's runs are taken by the Celery workers that consume it; a
    ``slurm`` queue's runs are batch jobs submitted with ``sbatch`` to the cluster its ``slurm_conf`` names, with
    the resources registered here (docs/architecture.md, "Slurm queues"): a config's caps on it come from these,
    not from worker reports."""

    name = models.CharField(max_length=20, unique=True, validators=[RegexValidator(r"^[a-z][a-z0-9_-]{0,19}$")],
                            help_text="What runs name (lower case, digits, - and _).")
    kind = models.CharField(max_length=10, choices=QueueKind.choices, default=QueueKind.CELERY)
    description = models.CharField(max_length=200, blank=True, help_text="What the forms say of it.")
    slurm_conf = models.CharField(max_length=500, blank=True,
                                  help_text="The cluster's slurm.conf (SLURM_CONF for sbatch, squeue and scancel; "
                                            "empty: the client's default).")
    partition = models.CharField(max_length=100, blank=True)
    account = models.CharField(max_length=100, blank=True)
    qos = models.CharField(max_length=100, blank=True)
    time_limit_min = models.PositiveIntegerField(default=0, help_text="A job's time limit in minutes (0: the "
                                                                      "partition's).")
    warn_before_s = models.PositiveIntegerField(default=60, validators=[MinValueValidator(5), MaxValueValidator(3600)],
                                                help_text="Slurm warns a job this many seconds before its time limit "
                                                          "or a preemption (sbatch --signal=B:USR1@N): it "
                                                          "checkpoints, stops and is requeued.")
    nodes = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1), MaxValueValidator(256)],
                                        help_text="The most nodes one run may ask for (nnodes).")
    gpus_per_node = models.PositiveIntegerField(default=0, validators=[MaxValueValidator(64)])
    cpus_per_task = models.PositiveIntegerField(default=0, validators=[MaxValueValidator(1024)],
                                                help_text="CPUs per node for a run (0: Slurm's default).")
    mem_per_node_mb = models.PositiveIntegerField(default=0, help_text="Memory per node in MB (0: Slurm's default).")
    extra_sbatch = models.JSONField(default=list, blank=True,
                                    help_text='Extra sbatch options, e.g. ["--constraint=a100"]: only those '
                                              "workers.slurm.commands.EXTRA_OPTION allows.")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        from workers.port import EXTRA_SBATCH_OPTION

        if not isinstance(self.extra_sbatch, list) or not all(isinstance(o, str) for o in self.extra_sbatch):
            raise ValidationError({"extra_sbatch": "a list of sbatch options"})
        bad = [o for o in self.extra_sbatch if not EXTRA_SBATCH_OPTION.match(o)]
        if bad:
            raise ValidationError({"extra_sbatch": f"not allowed: {', '.join(bad)}"})
        if self.kind == QueueKind.CELERY and self.name == "slurm":
            raise ValidationError({"kind": "the queue named slurm is a Slurm queue"})


class WorkerCapacity(models.Model):
    """What one training worker (a Celery node) has, as it reports at start-up and every few seconds after
    (workers.capacity): the caps on what one config may ask of a worker of its queue are read from these
    (webapp.runs.capacity). A worker removes its row when it shuts down; a row not refreshed lately is ignored."""

    worker = models.CharField(max_length=200, unique=True, help_text="The worker's Celery node name.")
    queues = models.JSONField(default=list, help_text="The queues it takes runs from.")
    slots = models.PositiveIntegerField(default=1, help_text="Runs it trains at once (its concurrency).")
    cores = models.PositiveIntegerField(help_text="CPU cores it may use (its affinity).")
    memory_mb = models.PositiveBigIntegerField(help_text="Its memory (total RAM, or its cgroup's limit).")
    gpus = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["worker"]

    def __str__(self) -> str:
        return f"{self.worker} ({', '.join(self.queues)}): {self.cores} cores, {self.memory_mb} MB, {self.gpus} GPUs"


class Checkpoint(models.Model):
    run = models.ForeignKey(Run, related_name="checkpoints", on_delete=models.CASCADE)
    step = models.IntegerField()
    path = models.CharField(max_length=1000)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-step"]
        constraints = [models.UniqueConstraint(fields=["run", "step"], name="checkpoint_unique_run_step")]
