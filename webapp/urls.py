"""Seedbed's URLs. Every page needs a login (LoginRequiredMiddleware) except the login page itself."""
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView

from webapp import builtin_model

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="runs:list", permanent=False)),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("runs/", include("webapp.runs.urls")),
    path("evals/", include("webapp.evals.urls")),
    path("sweeps/", include("webapp.sweeps.urls")),
    path("models/builtin/state", builtin_model.state_view, name="builtin-model-state"),
]
