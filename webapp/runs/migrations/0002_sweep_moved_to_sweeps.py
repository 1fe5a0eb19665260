"""Sweep now lives in the sweeps app (see sweeps.0003): Run.sweep points there; the table is unchanged."""
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0001_initial"),
        ("sweeps", "0003_sweep_moved_here"),
        ("evals", "0002_sweep_moved_to_sweeps"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="run",
                    name="sweep",
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE,
                                            related_name="runs", to="sweeps.sweep"),
                ),
                migrations.DeleteModel(name="Sweep"),
            ],
            database_operations=[],
        ),
    ]
