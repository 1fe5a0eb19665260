from django.urls import path

from . import views

app_name = "evals"

urlpatterns = [
    path("", views.eval_list, name="list"),
    path("new/", views.eval_new, name="new"),
    path("<int:job_id>/", views.eval_detail, name="detail"),
    path("<int:job_id>/progress.json", views.eval_progress, name="progress"),
    path("<int:job_id>/state/", views.eval_state, name="state"),
    path("<int:job_id>/problems/<int:index>/", views.eval_problem, name="problem"),
    path("<int:job_id>/export.<str:fmt>", views.eval_export, name="export"),
    path("<int:job_id>/cancel/", views.eval_cancel, name="cancel"),
    path("<int:job_id>/resume/", views.eval_resume, name="resume"),
]
