"""The live policy check keeps no state between checks (docs/architecture.md, "Early stopping"): the saved curves,
the step judged up to and the discard epoch go; the last replay's duration paces the next check."""
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [("sweeps", "0015_sweep_stop")]

    operations = [
        migrations.RemoveField(model_name="sweepplan", name="policy_state"),
        migrations.RemoveField(model_name="sweepplan", name="policy_step"),
        migrations.RemoveField(model_name="sweepplan", name="policy_epoch"),
        migrations.AddField(
            model_name="sweepplan", name="policy_check_s",
            field=models.FloatField(default=0.0, help_text=(
                "Seconds the last check's replay took: the next check waits at least policy_check.PACE times as "
                "long (services.claim_policy_check).")),
        ),
    ]
