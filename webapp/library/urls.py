from django.urls import path

from . import views

app_name = "library"

urlpatterns = [
    path("", views.model_list, name="models"),
    path("<int:entry_id>/", views.model_detail, name="model"),
]
