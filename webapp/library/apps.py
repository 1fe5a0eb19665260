from django.apps import AppConfig


class LibraryConfig(AppConfig):
    name = "webapp.library"
    label = "library"
    verbose_name = "Library: what staff register for runs to name (judge endpoints)"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # the judge verifier (training/, no Django) finds the endpoints staff registered here
        from training.verifiers.judge import set_endpoint_provider

        from .selectors import judge_endpoints

        set_endpoint_provider(judge_endpoints)
