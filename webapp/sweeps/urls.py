from django.urls import path

from . import views

app_name = "sweeps"

urlpatterns = [
    path("", views.sweep_list, name="list"),
    path("new/", views.sweep_new, name="new"),
    path("new/policy-warning/", views.sweep_policy_warning, name="policy_warning"),
    path("<int:sweep_id>/", views.sweep_detail, name="detail"),
    path("<int:sweep_id>/live.json", views.sweep_live, name="live"),
    path("<int:sweep_id>/panel/", views.sweep_panel, name="panel"),
    path("<int:sweep_id>/samples/", views.sweep_samples, name="samples"),
    path("<int:sweep_id>/activity/", views.sweep_activity, name="activity"),
    path("<int:sweep_id>/kill/", views.sweep_kill, name="kill"),
    path("<int:sweep_id>/stop/", views.sweep_stop, name="stop"),
    path("<int:sweep_id>/metrics.<str:fmt>", views.sweep_export, name="export"),
    path("<int:sweep_id>/parallel/", views.sweep_parallel, name="parallel"),
    path("<int:sweep_id>/forecast.json", views.sweep_forecast, name="forecast"),
    path("<int:sweep_id>/replay/", views.sweep_replay, name="replay"),
]
