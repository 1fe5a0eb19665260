from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    name = "webapp.datasets"
    label = "datasets"
    verbose_name = "Datasets: the files a project's runs and evaluations train and evaluate on"
    default_auto_field = "django.db.models.BigAutoField"
