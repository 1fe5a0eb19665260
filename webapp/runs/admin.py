from django.contrib import admin

from .models import Checkpoint, MetricPoint, MetricRollup, Queue, Run, Sample, WorkerCapacity


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "sweep", "seed", "status", "queue", "last_step", "worker", "heartbeat_at",
                    "killed_by", "created_at")
    list_filter = ("status", "queue")
    search_fields = ("name", "worker", "killed_by")
    raw_id_fields = ("sweep", "parent_run")
    # Status moves only through services (which check transitions); the admin shows it read-only.
    readonly_fields = ("status", "created_at", "enqueued_at", "started_at", "ended_at", "heartbeat_at",
                       "kill_requested_at", "attempts", "last_step", "pid", "worker", "disk_bytes")


@admin.register(WorkerCapacity)
class WorkerCapacityAdmin(admin.ModelAdmin):
    """Read-only: what each training worker reports it has (workers.capacity), which caps launched configs."""
    list_display = ("worker", "queues", "slots", "cores", "memory_mb", "gpus", "updated_at")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(MetricPoint)
class MetricPointAdmin(admin.ModelAdmin):
    list_display = ("run", "step", "key", "value")
    list_filter = ("key",)
    raw_id_fields = ("run",)


@admin.register(MetricRollup)
class MetricRollupAdmin(admin.ModelAdmin):
    """Read-only: the tier is derived from the points (webapp.runs.rollups) and rewritten at every flush."""
    list_display = ("run", "key", "width", "bucket", "n", "lo", "hi", "first_step", "last_step")
    list_filter = ("width",)
    raw_id_fields = ("run",)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Sample)
class SampleAdmin(admin.ModelAdmin):
    list_display = ("run", "step", "index", "reward")
    raw_id_fields = ("run",)


@admin.register(Checkpoint)
class CheckpointAdmin(admin.ModelAdmin):
    list_display = ("run", "step", "path", "created_at")
    raw_id_fields = ("run",)


@admin.register(Queue)
class QueueAdmin(admin.ModelAdmin):
    """The queues runs may name: Celery ones, and Slurm clusters' partitions with the resources a run asks for."""
    list_display = ("name", "kind", "partition", "nodes", "gpus_per_node", "cpus_per_task", "mem_per_node_mb",
                    "description")
    list_filter = ("kind",)
