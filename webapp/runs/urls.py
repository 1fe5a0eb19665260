from django.urls import path

from . import compare, views

app_name = "runs"

urlpatterns = [
    path("", views.run_list, name="list"),
    path("new/", views.run_new, name="new"),
    path("new/estimate/", views.run_estimate, name="estimate"),
    path("rows/", views.run_rows, name="rows"),
    path("compare/", compare.run_compare, name="compare"),
    path("bulk/", views.run_bulk, name="bulk"),
    path("<int:run_id>/", views.run_detail, name="detail"),
    path("<int:run_id>/live.json", views.run_live, name="live"),
    path("<int:run_id>/series.json", views.run_series, name="series"),
    path("<int:run_id>/state/", views.run_state, name="state"),
    path("<int:run_id>/samples/", views.run_samples, name="samples"),
    path("<int:run_id>/prompt/", views.run_prompt, name="prompt"),
    path("<int:run_id>/engine-config/", views.run_engine_config, name="engine_config"),
    path("<int:run_id>/kill/", views.run_kill, name="kill"),
    path("<int:run_id>/resume/", views.run_resume, name="resume"),
    path("<int:run_id>/log/", views.run_log, name="log"),
    path("<int:run_id>/annotate/", views.run_annotate, name="annotate"),
    path("<int:run_id>/archive/", views.run_archive, name="archive"),
    path("<int:run_id>/metrics.<str:fmt>", views.run_export, name="export"),
]
