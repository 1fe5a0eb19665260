from django.db import migrations, models


class Migration(migrations.Migration):
    """A policy check saves the policy's curves and goes on from them at the next check."""

    dependencies = [("sweeps", "0006_sweep_project_required")]
    operations = [
        migrations.AddField(
            model_name="sweepplan", name="policy_state",
            field=models.JSONField(blank=True, default=dict,
                                   help_text="The policy's curves as the last check left them before policy_step "
                                             "(JSON, see policy_check): the next check feeds only later points."),
        ),
        migrations.AddField(
            model_name="sweepplan", name="policy_epoch",
            field=models.PositiveIntegerField(default=0, help_text="Bumped when a run's stored points are "
                                                                   "discarded (a resume): an older state is rebuilt."),
        ),
        migrations.AlterField(
            model_name="sweepplan", name="policy_step",
            field=models.IntegerField(default=0, help_text="Steps up to this one were judged with every running "
                                                           "run's point there (see policy_check)."),
        ),
    ]
