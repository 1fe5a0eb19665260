from django.urls import path

from . import views

app_name = "library"

urlpatterns = [
    path("", views.model_list, name="models"),
    path("<int:entry_id>/", views.model_detail, name="model"),
    path("<int:entry_id>/try/", views.model_try, name="model-try"),
    path("builtin/<slug:key>/", views.builtin_detail, name="builtin"),
    path("builtin/<slug:key>/try/", views.builtin_try, name="builtin-try"),
    path("trials/<int:trial_id>/", views.trial_state, name="trial"),
]
