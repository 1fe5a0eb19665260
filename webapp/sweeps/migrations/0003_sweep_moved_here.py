"""The Sweep model moves from the runs app to this one (one home per concept).

Step 1 of 2 here: the model enters this app's state on its existing table (runs_sweep), with nothing done to
the database. runs.0002 then points Run.sweep here and drops the model from its own state; 0004 points this
app's foreign keys here and renames the table. Existing rows, and every foreign key to them, are kept.
"""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("sweeps", "0002_sweepplan_policy_throttle_and_step"),
        ("runs", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Sweep",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                                   verbose_name="ID")),
                        ("name", models.CharField(max_length=200)),
                        ("config", models.JSONField(help_text="The validated TrainConfig.to_dict() shared by every seed.")),
                        ("seeds", models.JSONField(default=list, help_text="The seeds launched, in order.")),
                        ("concurrency", models.PositiveIntegerField(default=2, help_text="How many of its runs may hold a slot at once.")),
                        ("policy", models.JSONField(blank=True, default=dict, help_text='Early-stopping policy config, e.g. {"name": "median", "metric": ...}; empty = manual (kill buttons only).')),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("created_by", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                                         to=settings.AUTH_USER_MODEL)),
                    ],
                    options={"ordering": ["-created_at", "-id"], "db_table": "runs_sweep"},
                ),
            ],
            database_operations=[],
        ),
    ]
