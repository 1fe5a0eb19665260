"""Every Seedbed table is in the Django admin."""
import pytest
from django.apps import apps
from django.contrib import admin
from django.urls import reverse

from webapp.runs import services

pytestmark = pytest.mark.postgres


@pytest.mark.django_db
def test_each_model_has_working_admin_pages(admin_client, tmp_path):
    (tmp_path / "config.json").write_text("{}")
    run = services.run_create(config={"model_path": str(tmp_path)})
    services.run_metrics_append(run_id=run.pk, points=[(1, "a", 1.0)])
    ours = [m for label in ("runs", "sweeps", "evals", "library", "projects", "api") for m in apps.get_app_config(label).get_models()]
    assert {m._meta.model_name for m in ours} >= {"run", "metricpoint", "sample", "checkpoint", "sweep",
                                                   "sweepplan", "policydecision", "alert", "project", "membership",
                                                   "auditevent", "apitoken"}
    for model in ours:
        assert admin.site.is_registered(model), model
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        assert admin_client.get(url).status_code == 200, url
    assert admin_client.get(reverse("admin:runs_run_change", args=[run.pk])).status_code == 200


@pytest.mark.django_db
def test_the_admin_names_the_apps_icon_and_favicon_ico_is_found(admin_client, client):
    page = admin_client.get(reverse("admin:index")).content.decode()
    assert '<link rel="icon" type="image/svg+xml" href="/static/seedbed/favicon' in page
    assert "Django administration" in page or "Site administration" in page  # the admin's own header is kept
    for who in (admin_client, client):  # logged in or not (the login page's browser asks too)
        response = who.get("/favicon.ico")
        assert response.status_code == 302 and "/static/seedbed/favicon" in response["Location"]
