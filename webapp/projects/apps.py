from django.apps import AppConfig


class ProjectsConfig(AppConfig):
    name = "webapp.projects"
    label = "projects"
    verbose_name = "Projects: who may see and act on which runs, sweeps and evaluations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.models.signals import post_save

        from .services import on_user_saved

        # every user gets a personal project, made with the user (DESIGN §9)
        post_save.connect(on_user_saved, sender=get_user_model(), dispatch_uid="projects.personal_project")
