"""A sweep's ``budget`` (in full runs) replaces ``max_new_seeds`` (policies.budget).

An old plan whose freed slots start fresh seeds keeps what it allowed: a budget of the runs it started with
(its runs less the fresh seeds it started) plus its ``max_new_seeds``. Other plans get no budget. Going back,
``max_new_seeds`` is the budget less the runs the sweep started with (at least 0).
"""
from django.db import migrations, models


def budget_from_max_new_seeds(apps, schema_editor):
    SweepPlan = apps.get_model("sweeps", "SweepPlan")
    Run = apps.get_model("runs", "Run")
    for plan in SweepPlan.objects.filter(free_slot_use="new_seed"):
        initial = max(Run.objects.filter(sweep_id=plan.sweep_id).count() - plan.new_seeds_started, 1)
        plan.budget = initial + plan.max_new_seeds
        plan.save(update_fields=["budget"])


def max_new_seeds_from_budget(apps, schema_editor):
    SweepPlan = apps.get_model("sweeps", "SweepPlan")
    Run = apps.get_model("runs", "Run")
    for plan in SweepPlan.objects.filter(budget__isnull=False):
        initial = max(Run.objects.filter(sweep_id=plan.sweep_id).count() - plan.new_seeds_started, 1)
        plan.max_new_seeds = max(plan.budget - initial, 0)
        plan.save(update_fields=["max_new_seeds"])


class Migration(migrations.Migration):

    dependencies = [
        ('sweeps', '0009_sweepplan_warnings'),
        ('runs', '0001_initial'),
    ]

    operations = [
        migrations.AddField(
            model_name='sweepplan',
            name='budget',
            field=models.PositiveIntegerField(blank=True, help_text='Compute budget in full runs when freed slots start new seeds: a new seed starts only if it can run to its end within it (policies.budget). Empty for the other free-slot uses.', null=True),
        ),
        migrations.RunPython(budget_from_max_new_seeds, max_new_seeds_from_budget),
        migrations.RemoveField(
            model_name='sweepplan',
            name='max_new_seeds',
        ),
        migrations.AlterField(
            model_name='sweepplan',
            name='free_slot_use',
            field=models.CharField(choices=[('nothing', 'nothing (the sweep just finishes sooner)'), ('extend', 'extend the best surviving run'), ('new_seed', 'start new seeds within the budget')], default='nothing', max_length=20),
        ),
    ]
