from django.contrib import admin

from .models import JudgeEndpoint, ModelEntry, ModelTrial


@admin.register(JudgeEndpoint)
class JudgeEndpointAdmin(admin.ModelAdmin):
    list_display = ("name", "base_url", "model", "local_model_path", "secret", "open_to")
    filter_horizontal = ("projects",)

    @admin.display(description="projects")
    def open_to(self, endpoint) -> str:
        names = [p.name for p in endpoint.projects.all()]
        return ", ".join(names) if names else "every project"


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
