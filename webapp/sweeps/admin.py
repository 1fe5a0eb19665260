from django.contrib import admin

from .models import Alert, HistoryRiskFit, PolicyDecision, Sweep, SweepPlan


@admin.register(Sweep)
class SweepAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "concurrency", "created_by", "created_at")
    search_fields = ("name",)


@admin.register(SweepPlan)
class SweepPlanAdmin(admin.ModelAdmin):
    list_display = ("sweep", "free_slot_use", "extend_steps", "budget", "new_seeds_started")


@admin.register(PolicyDecision)
class PolicyDecisionAdmin(admin.ModelAdmin):
    list_display = ("sweep", "run", "action", "rule", "step", "value", "threshold", "n_peers", "outcome", "created_at")
    list_filter = ("action", "rule", "outcome")


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = ("sweep", "run", "kind", "step", "value", "bound", "created_at")
    list_filter = ("kind",)


@admin.register(HistoryRiskFit)
class HistoryRiskFitAdmin(admin.ModelAdmin):
    list_display = ("project", "key", "sweeps", "risk", "seconds", "created_at")
