from django.contrib import admin

from .models import JudgeEndpoint


@admin.register(JudgeEndpoint)
class JudgeEndpointAdmin(admin.ModelAdmin):
    list_display = ("name", "base_url", "model", "local_model_path", "secret")
