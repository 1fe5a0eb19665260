from django.apps import AppConfig


class ProjectsConfig(AppConfig):
    name = "webapp.projects"
    label = "projects"
    verbose_name = "Projects: who may see and act on which runs, sweeps and evaluations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.models.signals import post_migrate, post_save

        from .services import on_user_saved

        # every user gets a personal project, made with the user (docs/architecture.md#projects-and-trust)
        post_save.connect(on_user_saved, sender=get_user_model(), dispatch_uid="projects.personal_project")
        # the reserved projects exist whenever the tables do: a data migration makes them, and this makes them
        # again on a database emptied since (``flush``, as tests do), before any request can ask for the name
        post_migrate.connect(ensure_reserved_projects, sender=self, dispatch_uid="projects.reserved")


def ensure_reserved_projects(sender, *, using="default", apps=None, **_) -> None:
    from django.db import connections

    from .models import RESERVED_PROJECT_NAMES

    try:
        Project = (apps or sender.apps).get_model("projects", "Project")
    except LookupError:  # migrated back to before projects existed
        return
    if Project._meta.db_table not in connections[using].introspection.table_names():
        return
    for name in sorted(RESERVED_PROJECT_NAMES):
        Project.objects.using(using).get_or_create(name=name)
