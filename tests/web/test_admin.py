"""Every Seedbed table is in the Django admin."""
import pytest
from django.urls import reverse
from webapp.runs import services

@pytest.mark.django_db
def test_each_model_has_working_admin_pages(admin_client, tmp_path):
    (tmp_path / "config.json").write_text("{}")
    run = services.run_create(config={"model_path": str(tmp_path)})
    services.run_metrics_append(run_id=run.pk, points=[(1, "a", 1.0)])
    for name in ("sweep", "run", "metricpoint", "sample", "checkpoint"):
        assert admin_client.get(reverse(f"admin:runs_{name}_changelist")).status_code == 200, name
    assert admin_client.get(reverse("admin:runs_run_change", args=[run.pk])).status_code == 200
