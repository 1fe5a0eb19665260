from django.contrib import admin

from .models import JudgeEndpoint, ModelEntry, ModelTrial


@admin.register(JudgeEndpoint)
class JudgeEndpointAdmin(admin.ModelAdmin):
    list_display = ("name", "base_url", "model", "local_model_path", "secret")


@admin.register(ModelEntry)
class ModelEntryAdmin(admin.ModelAdmin):
    list_display = ("name", "project", "status", "path", "created_by", "created_at")
    list_filter = ("status",)
    search_fields = ("name", "project__name", "path")


@admin.register(ModelTrial)
class ModelTrialAdmin(admin.ModelAdmin):
    list_display = ("pk", "entry", "builtin", "project", "created_by", "status", "tokens", "seconds", "created_at")
    list_filter = ("status",)
    search_fields = ("entry__name", "builtin", "project__name", "created_by__username")
