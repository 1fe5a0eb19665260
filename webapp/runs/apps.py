from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "webapp.runs"
    label = "runs"
    verbose_name = "Runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from webapp.library.selectors import register_model_section
        from webapp.projects.paths import register_folder_owner

        from .selectors import checkpoints_as_models, run_folder_readable, runs_from_model

        # a run's folder, named in a config (its checkpoints), is readable by the run's readers
        register_folder_owner("SEEDBED_RUNS_DIR", run_folder_readable)
        # the library's model pages list the runs started from a model and the checkpoints runs made
        register_model_section("runs_using", runs_from_model)
        register_model_section("checkpoint_models", checkpoints_as_models)
