from django.contrib import admin

from .models import EvalJob, EvalModel, EvalResult


@admin.register(EvalJob)
class EvalJobAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "run", "sweep", "task", "problems", "n", "status", "done_units", "total_units",
                    "created_at")
    list_filter = ("status",)
    raw_id_fields = ("run", "sweep")
    readonly_fields = ("status", "created_at", "enqueued_at", "started_at", "ended_at", "heartbeat_at", "attempts",
                       "done_units", "total_units", "worker")


@admin.register(EvalModel)
class EvalModelAdmin(admin.ModelAdmin):
    list_display = ("job", "position", "label", "path", "seconds")
    raw_id_fields = ("job", "checkpoint", "run")


@admin.register(EvalResult)
class EvalResultAdmin(admin.ModelAdmin):
    list_display = ("model", "index", "n", "c")
    raw_id_fields = ("model",)
