"""Seedbed's URLs. Every page needs a login (LoginRequiredMiddleware) except the login page itself (and /favicon.ico)."""
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.shortcuts import redirect
from django.templatetags.static import static
from django.urls import include, path, reverse_lazy
from django.views.generic import RedirectView

from webapp import builtin_model, status
from webapp.api import views as api_views
from webapp.api.endpoints import api


def _token_authenticated(urls):
    """The API authenticates every request by its bearer token (401 without one), not by a login session: the
    login middleware must not send API clients to the login page."""
    patterns, app_name, namespace = urls
    for pattern in patterns:
        if hasattr(pattern, "callback") and pattern.callback is not None:
            pattern.callback.login_required = False
    return patterns, app_name, namespace


@login_not_required
def favicon(request):
    """/favicon.ico, which browsers ask for on any page that names no icon (a file view, the admin before its
    own template named one): the app's icon, for anyone (the login page too). Its URL is the static storage's
    (hashed once collected), looked up at request time."""
    return redirect(static("seedbed/favicon.svg"))


# a body past DATA_UPLOAD_MAX_MEMORY_SIZE: 413 naming the limit (JSON for /api/); any other bad request Django's 400
handler400 = "webapp.too_big.bad_request"

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="runs:list", permanent=False)),
    path("favicon.ico", favicon, name="favicon"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Django's own password change (login required; AUTH_PASSWORD_VALIDATORS apply; the user's other sessions end)
    path("accounts/password/", auth_views.PasswordChangeView.as_view(
        template_name="registration/change_password.html", success_url=reverse_lazy("password-change-done")),
        name="password-change"),
    path("accounts/password/done/", auth_views.PasswordChangeDoneView.as_view(
        template_name="registration/change_password_done.html"), name="password-change-done"),
    path("admin/", admin.site.urls),
    path("runs/", include("webapp.runs.urls")),
    path("evals/", include("webapp.evals.urls")),
    path("sweeps/", include("webapp.sweeps.urls")),
    path("models/builtin/state", builtin_model.state_view, name="builtin-model-state"),
    path("status/", status.status_view, name="status"),
    path("account/tokens/", api_views.token_list, name="api-tokens"),
    path("account/tokens/<int:token_id>/revoke/", api_views.token_revoke, name="api-token-revoke"),
    path("projects/", include("webapp.projects.urls")),
    path("models/", include("webapp.library.urls")),
    path("datasets/", include("webapp.datasets.urls")),
    path("api/v1/", _token_authenticated(api.urls)),
]
