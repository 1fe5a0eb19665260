from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "webapp.runs"
    label = "runs"
    verbose_name = "Runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from webapp.projects.paths import register_folder_owner

        from .selectors import run_folder_readable

        # a run's folder, named in a config (its checkpoints), is readable by the run's readers
        register_folder_owner("SEEDBED_RUNS_DIR", run_folder_readable)
