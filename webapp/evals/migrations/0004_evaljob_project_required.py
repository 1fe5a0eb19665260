import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    """Every evaljob belongs to a project (filled in by projects.0002)."""

    dependencies = [("evals", "0003_evaljob_project"), ("projects", "0002_everything_in_a_project")]
    operations = [
        migrations.AlterField(
            model_name="evaljob", name="project",
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="eval_jobs",
                                    to="projects.project", help_text="Its origin's (the run's or the sweep's) project."),
        ),
    ]
