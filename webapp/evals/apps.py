from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "webapp.evals"
    label = "evals"
    verbose_name = "Evaluations (pass@k) and run lineage"
    default_auto_field = "django.db.models.BigAutoField"
