from django.urls import path

from . import views

app_name = "datasets"

urlpatterns = [
    path("", views.dataset_list, name="list"),
    path("<int:entry_id>/", views.dataset_detail, name="detail"),
]
