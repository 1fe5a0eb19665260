from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "webapp.api"
    label = "api"
    verbose_name = "API: /api/v1/ and its tokens"
    default_auto_field = "django.db.models.BigAutoField"
