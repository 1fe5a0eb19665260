"""Sweep now lives in the sweeps app (see sweeps.0003): EvalJob.sweep points there; the table is unchanged."""
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("evals", "0001_initial"),
        ("sweeps", "0003_sweep_moved_here"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="evaljob",
                    name="sweep",
                    field=models.ForeignKey(blank=True, help_text="The sweep whose page it was started from.",
                                            null=True, on_delete=django.db.models.deletion.SET_NULL,
                                            related_name="eval_jobs", to="sweeps.sweep"),
                ),
            ],
            database_operations=[],
        ),
    ]
