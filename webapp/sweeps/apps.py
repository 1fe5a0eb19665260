from django.apps import AppConfig


class SweepsConfig(AppConfig):
    name = "webapp.sweeps"
    label = "sweeps"
    verbose_name = "Seed sweeps: plans, policies, decisions, alerts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from webapp.runs.signals import slots_changed

        from .services import on_slots_changed

        slots_changed.connect(on_slots_changed, dispatch_uid="sweeps.on_slots_changed")
