import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    """Every run belongs to a project (filled in by projects.0002)."""

    dependencies = [("runs", "0003_run_project"), ("projects", "0002_everything_in_a_project")]
    operations = [
        migrations.AlterField(
            model_name="run", name="project",
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="runs",
                                    to="projects.project", help_text="Who may see and act on it (a sweep's runs are in the sweep's project)."),
        ),
    ]
