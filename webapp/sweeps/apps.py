from django.apps import AppConfig


class SweepsConfig(AppConfig):
    name = "webapp.sweeps"
    label = "sweeps"
    verbose_name = "Seed sweeps: policies, decisions, alerts"
    default_auto_field = "django.db.models.BigAutoField"
