import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    """Every sweep belongs to a project (filled in by projects.0002)."""

    dependencies = [("sweeps", "0005_sweep_project"), ("projects", "0002_everything_in_a_project")]
    operations = [
        migrations.AlterField(
            model_name="sweep", name="project",
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="sweeps",
                                    to="projects.project"),
        ),
    ]
