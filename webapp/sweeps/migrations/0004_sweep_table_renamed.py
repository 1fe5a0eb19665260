"""Step 2 of the Sweep move (see 0003): this app's foreign keys point at its own Sweep (state only: same
table), then the table takes this app's name (runs_sweep -> sweeps_sweep; the databases keep every foreign key
to it)."""
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("sweeps", "0003_sweep_moved_here"),
        ("runs", "0002_sweep_moved_to_sweeps"),
        ("evals", "0002_sweep_moved_to_sweeps"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="sweepplan", name="sweep",
                    field=models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True,
                                               related_name="plan", serialize=False, to="sweeps.sweep"),
                ),
                migrations.AlterField(
                    model_name="policydecision", name="sweep",
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="decisions",
                                            to="sweeps.sweep"),
                ),
                migrations.AlterField(
                    model_name="alert", name="sweep",
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="alerts",
                                            to="sweeps.sweep"),
                ),
            ],
            database_operations=[],
        ),
        migrations.AlterModelTable(name="sweep", table=None),
    ]
